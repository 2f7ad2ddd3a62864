//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The buckets of one limit (or one shard of it), by key, with a hard bound on how many are kept.
///
/// A flood of distinct keys (addresses from a botnet, or forged ones from a trusted proxy's chain) must not
/// grow memory without end. When the table is full, the buckets that have refilled are dropped first (they
/// hold nothing a new bucket would not); if that frees too little, arbitrary buckets go until an eighth of the
/// table is free, so each eviction pass pays for many inserts. Such a flood can reset other keys' buckets:
/// the price of the bound, and never a way past a limit for the keys that keep sending.
struct BucketTable: Sendable {
    private(set) var buckets: [BucketKey: TokenBucket] = [:]
    let capacity: Int
    /// Buckets dropped to make room while still holding less than a full bucket.
    private(set) var evicted = 0
    private var evictedSinceRead = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 8)
    }

    var count: Int { self.buckets.count }

    /// Takes the count of ``evicted`` since the last call (for the metrics, outside the lock).
    mutating func takeEvicted() -> Int {
        defer { self.evictedSinceRead = 0 }
        return self.evictedSinceRead
    }

    /// Takes a token from `key`'s bucket: `nil` when the request passes, else the seconds to wait.
    mutating func take(_ key: BucketKey, limit: RateLimitValues, now: UInt64) -> Int? {
        self.update(key, limit: limit, now: now) { $0.take(perSecond: limit.perSecond, burst: limit.burst, now: now) }
    }

    /// Spends a token from `key`'s bucket whatever it holds (``TokenBucket/spend(perSecond:burst:now:)``).
    mutating func spend(_ key: BucketKey, limit: RateLimitValues, now: UInt64) {
        self.update(key, limit: limit, now: now) { $0.spend(perSecond: limit.perSecond, burst: limit.burst, now: now) }
    }

    /// Whether `key`'s bucket has a token, without taking it. A key without a bucket has a full one, which is
    /// not stored: checking never grows the table.
    mutating func check(_ key: BucketKey, limit: RateLimitValues, now: UInt64) -> Int? {
        guard let index = self.buckets.index(forKey: key) else { return nil }
        return self.buckets.values[index].check(perSecond: limit.perSecond, burst: limit.burst, now: now)
    }

    private mutating func update<Result>(
        _ key: BucketKey,
        limit: RateLimitValues,
        now: UInt64,
        _ body: (inout TokenBucket) -> Result
    ) -> Result {
        // The count first: a table with room is looked up once, by the update itself.
        if self.buckets.count >= self.capacity, self.buckets[key] == nil {
            self.makeRoom(limit: limit, now: now)
        }
        return body(&self.buckets[key, default: TokenBucket(burst: limit.burst, now: now)])
    }

    private mutating func makeRoom(limit: RateLimitValues, now: UInt64) {
        self.buckets = self.buckets.filter { !$0.value.isFull(perSecond: limit.perSecond, burst: limit.burst, now: now) }
        let target = self.capacity - self.capacity / 8
        while self.buckets.count > target {
            self.buckets.remove(at: self.buckets.startIndex)
            self.evicted += 1
            self.evictedSinceRead += 1
        }
    }
}

/// A limit's rate and burst, as the request path reads them.
struct RateLimitValues: Sendable, Equatable {
    let perSecond: Double
    let burst: Int
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers
import NIOCore

/// One configured limit's buckets, shared by every event loop: per instance, as documented — two gateways
/// behind a load balancer each count their own.
///
/// The keys are spread over 16 shards, each a ``BucketTable`` under its own lock held for one dictionary
/// update: two loops contend only when two requests hash to one shard in the same few nanoseconds. Each shard
/// keeps at most its share of `rate_limits.max_keys`.
final class RateLimiter: Sendable {
    let limit: RateLimitValues
    private let shards: [NIOLockedValueBox<BucketTable>]
    /// Random per limiter: which shard a key falls in cannot be chosen from outside.
    private let shardSeed = UInt64.random(in: .min ... .max)
    /// Monotonic nanoseconds; injectable for tests.
    private let clock: @Sendable () -> UInt64
    /// Told how many buckets a take dropped to make room (rare: only when the table is full).
    private let evicted: @Sendable (Int) -> Void

    init(
        perSecond: Double,
        burst: Int,
        maxKeys: Int,
        evicted: @escaping @Sendable (Int) -> Void = { _ in },
        clock: @escaping @Sendable () -> UInt64 = { NIODeadline.now().uptimeNanoseconds }
    ) {
        self.limit = RateLimitValues(perSecond: perSecond, burst: burst)
        self.evicted = evicted
        let perShard = max(maxKeys / 16, 8)
        self.shards = (0..<16).map { _ in NIOLockedValueBox(BucketTable(capacity: perShard)) }
        self.clock = clock
    }

    /// Takes a token for `key`: `nil` when the request passes, else the seconds for `Retry-After`.
    func take(_ key: BucketKey) -> Int? {
        let now = self.clock()
        let (wait, evicted) = self.shard(key).withLockedValue { table in
            (table.take(key, limit: self.limit, now: now), table.takeEvicted())
        }
        if evicted > 0 { self.evicted(evicted) }
        return wait
    }

    /// Spends a token for `key` whether or not there is one (a failed token check).
    func spend(_ key: BucketKey) {
        let now = self.clock()
        let evicted = self.shard(key).withLockedValue { table in
            table.spend(key, limit: self.limit, now: now)
            return table.takeEvicted()
        }
        if evicted > 0 { self.evicted(evicted) }
    }

    /// Whether `key` has a token left, without taking one.
    func check(_ key: BucketKey) -> Int? {
        let now = self.clock()
        return self.shard(key).withLockedValue { $0.check(key, limit: self.limit, now: now) }
    }

    /// How many buckets are kept, and how many were dropped to keep within the bound (for the metrics).
    var keys: (count: Int, evicted: Int) {
        var count = 0
        var evicted = 0
        for shard in self.shards {
            shard.withLockedValue { table in
                count += table.count
                evicted += table.evicted
            }
        }
        return (count, evicted)
    }

    private func shard(_ key: BucketKey) -> NIOLockedValueBox<BucketTable> {
        self.shards[key.shard(seed: self.shardSeed, count: 16)]
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// One token bucket, as a value: `burst` tokens at most, refilled at `perSecond`, one taken per request.
///
/// Time is the caller's monotonic nanoseconds, passed in, so the arithmetic is tested without a clock.
struct TokenBucket: Sendable, Equatable {
    private(set) var tokens: Double
    private(set) var updated: UInt64

    /// A bucket first seen at `now`: full.
    init(burst: Int, now: UInt64) {
        self.tokens = Double(burst)
        self.updated = now
    }

    /// Takes one token if there is one; otherwise says how many whole seconds until there is (at least 1:
    /// the value of a `Retry-After` field).
    mutating func take(perSecond: Double, burst: Int, now: UInt64) -> Int? {
        self.refill(perSecond: perSecond, burst: burst, now: now)
        if self.tokens >= 1 {
            self.tokens -= 1
            return nil
        }
        return self.secondsUntilToken(perSecond: perSecond)
    }

    /// Takes one token even when there is none (down to one token of debt at most): a failed token check
    /// counts whether or not the client was already being refused.
    mutating func spend(perSecond: Double, burst: Int, now: UInt64) {
        self.refill(perSecond: perSecond, burst: burst, now: now)
        self.tokens = max(self.tokens - 1, -1)
    }

    /// Whether a token is there, without taking it; `nil` when there is, else the seconds to wait.
    mutating func check(perSecond: Double, burst: Int, now: UInt64) -> Int? {
        self.refill(perSecond: perSecond, burst: burst, now: now)
        return self.tokens >= 1 ? nil : self.secondsUntilToken(perSecond: perSecond)
    }

    /// Whether the bucket has refilled to `burst` by `now`: it then holds nothing a new bucket would not,
    /// and may be forgotten.
    func isFull(perSecond: Double, burst: Int, now: UInt64) -> Bool {
        var copy = self
        copy.refill(perSecond: perSecond, burst: burst, now: now)
        return copy.tokens >= Double(burst)
    }

    private mutating func refill(perSecond: Double, burst: Int, now: UInt64) {
        // A clock that went backwards (it is monotonic, but a caller could mix sources) adds nothing.
        if now > self.updated {
            let elapsed = Double(now - self.updated) / 1_000_000_000
            self.tokens = min(Double(burst), self.tokens + elapsed * perSecond)
        }
        self.updated = max(self.updated, now)
    }

    private func secondsUntilToken(perSecond: Double) -> Int {
        let missing = 1 - self.tokens
        let seconds = (missing / perSecond).rounded(.up)
        return Int(min(max(seconds, 1), 86_400))
    }
}

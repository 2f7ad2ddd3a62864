//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// One token bucket: `rate` tokens a second refill it up to `burst`; each request takes one, and a request
/// that finds the bucket empty is answered `429`. Counted per instance: two gateways behind a load balancer
/// let through twice the rate.
public struct RateLimit: Sendable, Equatable {
    /// What a bucket is kept for.
    public enum Key: String, Sendable, Equatable, CaseIterable {
        /// The verified token's subject; a request without a verified user is not counted by this limit.
        case user
        /// The client address (``IPRules`` and the access log use the same one).
        case client
        /// The whole route: one bucket for every request to it.
        case route
    }

    public var key: Key
    /// Tokens added per second (`rate: 10/s`, `600/m`, `3600/h`).
    public var perSecond: Double
    public var burst: Int

    public init(key: Key, perSecond: Double, burst: Int) {
        self.key = key
        self.perSecond = perSecond
        self.burst = burst
    }
}

/// The gateway-wide limits (`rate_limits:`): the brute-force guards that apply without any route setting them,
/// and the memory bound of every limit's buckets.
public struct RateLimitSettings: Sendable, Equatable {
    /// Requests whose token failed its check (`401 invalid_token`), per client address: a client guessing or
    /// replaying tokens is slowed down long before it could matter. Counted after the check, so valid tokens
    /// never spend from it.
    public var failedTokens: RateLimit?
    /// Requests to token pages (the page itself and code redemption), per client address.
    public var tokenPage: RateLimit?
    /// The most buckets each limit keeps. Past it the idle ones go first, then arbitrary ones: memory stays
    /// bounded under a flood of distinct addresses or users, at the price of such a flood resetting buckets.
    public var maxKeys: Int

    public static let defaultFailedTokens = RateLimit(key: .client, perSecond: 1, burst: 20)
    public static let defaultTokenPage = RateLimit(key: .client, perSecond: 1, burst: 30)

    public init(
        failedTokens: RateLimit? = Self.defaultFailedTokens,
        tokenPage: RateLimit? = Self.defaultTokenPage,
        maxKeys: Int = 100_000
    ) {
        self.failedTokens = failedTokens
        self.tokenPage = tokenPage
        self.maxKeys = maxKeys
    }
}

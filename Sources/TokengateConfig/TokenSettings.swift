//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// How tokens are read: claim names, lifetimes and the checks applied to every token.
public struct TokenSettings: Sendable, Equatable {
    public var claims: ClaimNames
    /// A session token expires this long after its `iat` (or at its `exp`, if earlier). Default 14 days.
    public var sessionMaxAge: Duration
    /// Tolerated clock difference for `iat` in the future, `exp` and `nbf`. Default 60s.
    public var clockSkew: Duration
    /// When set, `iss` must be present and equal.
    public var issuer: String?
    /// When non-empty, `aud` must be present and contain one of these.
    public var audience: [String]
    /// Algorithms accepted at all (a key's own algorithm must also be in this list). Default: all supported.
    public var algorithms: [TokenAlgorithm]
    /// `verified_cache.entries`: how many verified public-key-signed tokens each event loop remembers, so that a
    /// token sent again skips its signature check (every other check still runs). 0 disables. Default 4096.
    public var verifiedCacheEntries: Int

    /// The default of ``verifiedCacheEntries``: at most about 1.7 MiB per event loop (an entry is 120 bytes, plus
    /// its user id when that is longer than 15 bytes, up to 256), about 0.5 MiB with short user ids.
    public static let defaultVerifiedCacheEntries = 4096

    public init(
        claims: ClaimNames = ClaimNames(),
        sessionMaxAge: Duration = .seconds(14 * 86_400),
        clockSkew: Duration = .seconds(60),
        issuer: String? = nil,
        audience: [String] = [],
        algorithms: [TokenAlgorithm] = TokenAlgorithm.allCases,
        verifiedCacheEntries: Int = TokenSettings.defaultVerifiedCacheEntries
    ) {
        self.claims = claims
        self.sessionMaxAge = sessionMaxAge
        self.clockSkew = clockSkew
        self.issuer = issuer
        self.audience = audience
        self.algorithms = algorithms
        self.verifiedCacheEntries = verifiedCacheEntries
    }
}

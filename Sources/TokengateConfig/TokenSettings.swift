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

    public init(
        claims: ClaimNames = ClaimNames(),
        sessionMaxAge: Duration = .seconds(14 * 86_400),
        clockSkew: Duration = .seconds(60),
        issuer: String? = nil,
        audience: [String] = [],
        algorithms: [TokenAlgorithm] = TokenAlgorithm.allCases
    ) {
        self.claims = claims
        self.sessionMaxAge = sessionMaxAge
        self.clockSkew = clockSkew
        self.issuer = issuer
        self.audience = audience
        self.algorithms = algorithms
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// What a verifier demands beyond a good signature.
public struct VerificationPolicy: Sendable {
    public var claimNames: ClaimNames
    /// Session tokens expire this many seconds after `iat` (or at `exp` when that is earlier).
    public var sessionMaxAge: Int64
    /// Tolerated clock difference between the issuer and the gateway, in seconds, applied to `iat`,
    /// `nbf`, `exp` and the session max-age.
    public var clockSkew: Int64
    /// When set, `iss` must be present and equal.
    public var issuer: String?
    /// When non-empty, `aud` must be present and be (or, as an array, contain) one of these values.
    public var audiences: [String]
    /// When set, only these algorithms (and only where a loaded key allows them). Nil: every algorithm a
    /// loaded key allows.
    public var allowedAlgorithms: Set<TokenAlgorithm>?
    /// Claims that must be present (``RequiredClaims``); empty by default.
    public var requiredClaims: RequiredClaims

    public init(
        claimNames: ClaimNames = ClaimNames(),
        sessionMaxAge: Int64 = 14 * 86_400,
        clockSkew: Int64 = 60,
        issuer: String? = nil,
        audiences: [String] = [],
        allowedAlgorithms: Set<TokenAlgorithm>? = nil,
        requiredClaims: RequiredClaims = []
    ) {
        self.claimNames = claimNames
        self.sessionMaxAge = sessionMaxAge
        self.clockSkew = clockSkew
        self.issuer = issuer
        self.audiences = audiences
        self.allowedAlgorithms = allowedAlgorithms
        self.requiredClaims = requiredClaims
    }
}

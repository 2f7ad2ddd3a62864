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
    /// The scope names and forwarded claims the payload parser looks for (``ClaimSelection``): the same for
    /// every verifier that shares cached tokens, since a cached entry holds only what was read.
    public var selection: ClaimSelection
    /// Scopes a token must grant (`scope`, space-separated, or `scp`, an array): a route's `require_scopes`.
    /// Each must be in ``selection``'s scopes, or no token can grant it.
    public var requiredScopes: [String]
    /// Claims whose values a valid token hands on (``VerifiedToken/forwardedClaims``, in this order): a route's
    /// `forward_claims`. Each must be in ``selection``'s forwarded claims, or its value is never read.
    public var forwardedClaims: [String]
    /// The kind of a token without the ``ClaimNames/apiOnly`` claim: `session` for the token page's issuer
    /// (its tokens say `api_only: true` when they are api tokens), the issuer's `token_kind` for another.
    public var defaultKind: TokenKind = .session
    /// Whether the ``ClaimNames/apiOnly`` claim is read at all: an issuer without `token_kind_claim` gives
    /// every token its ``defaultKind``, whatever the token says.
    public var readsKindClaim = true
    /// The issuer name the cutoffs of this verifier's users are stored under (``IssuerScopedUser``); nil for
    /// the token page's issuer, whose cutoffs are keyed by the bare user id.
    public var cutoffIssuer: String?

    public init(
        claimNames: ClaimNames = ClaimNames(),
        sessionMaxAge: Int64 = 14 * 86_400,
        clockSkew: Int64 = 60,
        issuer: String? = nil,
        audiences: [String] = [],
        allowedAlgorithms: Set<TokenAlgorithm>? = nil,
        requiredClaims: RequiredClaims = [],
        selection: ClaimSelection = ClaimSelection(),
        requiredScopes: [String] = [],
        forwardedClaims: [String] = []
    ) {
        self.claimNames = claimNames
        self.sessionMaxAge = sessionMaxAge
        self.clockSkew = clockSkew
        self.issuer = issuer
        self.audiences = audiences
        self.allowedAlgorithms = allowedAlgorithms
        self.requiredClaims = requiredClaims
        self.selection = selection
        self.requiredScopes = requiredScopes
        self.forwardedClaims = forwardedClaims
    }
}

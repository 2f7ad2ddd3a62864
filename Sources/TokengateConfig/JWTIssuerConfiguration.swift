//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// An issuer of JWTs other than the token page's own (`kind: jwt` in `issuers:`): an identity provider, or a
/// second site, with its own `iss`, keys, algorithms, audiences, claim names and clock.
///
/// The token's `iss` picks its issuer by exact match, so each issuer's ``issuer`` is unique and no two issuers
/// share a key: an HMAC secret of one issuer can never verify a token claiming another. The top-level `keys`
/// and `tokens` stay the issuer named ``topLevelName`` (the token page's), whose cutoffs keep their store keys;
/// every other issuer's users are kept apart from it and from each other (``CutoffUserKey/init(issuer:user:)``).
public struct JWTIssuerConfiguration: Sendable, Equatable {
    /// The name routes use for the issuer made of the top-level `keys` and `tokens`. Reserved: no `issuers:`
    /// item may take it.
    public static let topLevelName = "tokens"

    /// What a routes, logs and metrics call the issuer (letters, digits, `-`, `_`).
    public var name: String
    /// How tokens are read: ``TokenSettings/issuer`` is required here (the `iss` that picks this issuer).
    public var tokens: TokenSettings
    /// At least one; files, `jwks_url` or `discovery`, the same shapes as the top-level `keys`.
    public var keys: [KeySourceConfiguration]
    /// Whether a token without `iss` is this issuer's (at most one issuer is the default).
    public var isDefault: Bool
    /// The kind of a token that does not say: a provider's tokens carry no `api_only`.
    public var tokenKind: TokenKind
    /// A boolean claim that overrides ``tokenKind`` when present (`true`: api, `false`: session); nil: the
    /// kind is always ``tokenKind``.
    public var tokenKindClaim: String?

    public init(
        name: String,
        tokens: TokenSettings,
        keys: [KeySourceConfiguration],
        isDefault: Bool = false,
        tokenKind: TokenKind = .api,
        tokenKindClaim: String? = nil
    ) {
        self.name = name
        self.tokens = tokens
        self.keys = keys
        self.isDefault = isDefault
        self.tokenKind = tokenKind
        self.tokenKindClaim = tokenKindClaim
    }
}

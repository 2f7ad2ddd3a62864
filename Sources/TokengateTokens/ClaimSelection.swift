//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// What the payload parser reads beyond the claims every token is checked on: the scope names some route
/// requires, and the claims some route forwards to its backend.
///
/// One selection serves every route of a key set (the union of their `require_scopes` and `forward_claims`),
/// so that a token verified on one route and remembered in a ``VerifiedTokenCache`` carries what any other
/// route needs: a route then only compares bits (scopes) and picks values (claims). Both lists are bounded so
/// that reading a payload stays bounded: a scope is one bit of a 64-bit mask, a forwarded claim one of at most
/// ``maxForwardedClaims`` values. An empty selection (the default) costs the hot path nothing.
public struct ClaimSelection: Sendable, Hashable {
    /// The most distinct scope names a configuration may require.
    public static let maxScopes = 64
    /// The most distinct claims a configuration may forward.
    public static let maxForwardedClaims = 32
    /// The longest value a forwarded claim may have, in bytes, after an array's elements are joined.
    public static let maxForwardedValueBytes = 1024

    /// Scope names, each a bit of ``TokenVerifier``'s scope mask (in this order).
    public var scopes: [String]
    /// Claim names whose values are kept.
    public var forwardedClaims: [String]

    public init(scopes: [String] = [], forwardedClaims: [String] = []) {
        self.scopes = Array(scopes.prefix(Self.maxScopes))
        self.forwardedClaims = Array(forwardedClaims.prefix(Self.maxForwardedClaims))
    }

    /// Whether a scope name can be carried in a `scope` claim and named in a `scope="…"` challenge
    /// attribute: RFC 6749 §3.3's scope-token, `%x21 / %x23-5B / %x5D-7E`, at most 128 bytes.
    public static func isScopeToken(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 128
            && name.utf8.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
    }

    /// Claims a route may not forward: the ones the verifier reads for its own checks, whose values reach the
    /// backend already (the user, the issue time, the kind) or are checked, never handed on.
    public static func isReservedClaim(_ name: String, claimNames: ClaimNames) -> Bool {
        [claimNames.user, claimNames.issuedAt, claimNames.apiOnly, "exp", "nbf", "iss", "aud", "did"].contains(name)
    }
}

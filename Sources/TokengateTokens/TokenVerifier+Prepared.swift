//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics

extension TokenVerifier {
    /// A verifier's key set and policy, with everything the hot path needs precomputed: claim names and
    /// expected issuer and audiences as bytes, the allowed algorithms as a bit mask, and clamped durations.
    final class Prepared: Sendable {
        let keys: KeySet
        let policy: VerificationPolicy
        let algorithmMask: UInt8
        let userClaim: [UInt8]
        let issuedAtClaim: [UInt8]
        /// The kind claim's name; 0xFF (never a byte of a decoded JSON string) when the policy reads none.
        let apiOnlyClaim: [UInt8]
        /// A token without the kind claim is an api token (``VerificationPolicy/defaultKind``).
        let defaultAPIOnly: Bool
        /// ``IssuerScopedUser/prefix(issuer:)`` of ``VerificationPolicy/cutoffIssuer``; nil: bare user ids.
        let cutoffPrefix: String?
        let issuer: [UInt8]?
        /// Empty when the policy names no audience. An array of arrays so that checking one audience walks
        /// one element without allocating, and several cost no more than a compare each.
        let audiences: [[UInt8]]
        let requiredClaims: RequiredClaims
        /// ``ClaimSelection/scopes`` as bytes: scope `i` is bit `i` of ``SignedClaims/scopes``. Empty when no
        /// route requires a scope, and then `scope` and `scp` are skipped like any other claim.
        let scopeNames: [[UInt8]]
        /// The bits a token's scopes must all have (the policy's ``VerificationPolicy/requiredScopes``); a
        /// required scope outside the selection sets ``scopesUnsatisfiable`` instead (fail closed).
        let requiredScopeMask: UInt64
        let scopesUnsatisfiable: Bool
        /// ``ClaimSelection/forwardedClaims`` as bytes: the value of claim `i` lands in
        /// ``SignedClaims/forwarded`` at `i`. Empty when no route forwards a claim.
        let forwardedNames: [[UInt8]]
        /// For each of the policy's ``VerificationPolicy/forwardedClaims``, its index in ``forwardedNames``
        /// (nil: outside the selection, never read, so never forwarded).
        let forwardedIndices: [Int?]
        /// The bits of ``forwardedIndices``: a token whose claim at one of them cannot be forwarded is refused.
        let forwardedMask: UInt32
        let sessionMaxAge: Int64
        let clockSkew: Int64
        /// Which ``VerifiedTokenCache`` entries this verifier may use: the verifiers that read a payload the
        /// same way (one key set, the same claim names, issuer and audiences) share a scope, and any other
        /// verifier gets a new, larger one. A cache holds one scope at a time, so a key set that changes
        /// empties it (``VerifiedTokenCache/admit(scope:)``).
        let cacheScope: UInt64
        /// Whether ``TokenVerifier/verify(_:accept:cutoffs:now:cache:)`` consults a cache at all: only for
        /// public keys. An HMAC check over the token costs no more than the keyed digest a lookup needs
        /// (docs/benchmarks.md), and a key set never mixes secrets with public keys.
        let usesCache: Bool

        /// Hands out cache scopes; read only while a verifier is built (load, reload), never per request.
        private static let scopes = ManagedAtomic<UInt64>(0)

        /// - Parameter cacheScope: the scope of a verifier this one only narrows (``TokenVerifier/narrowed(to:)``),
        ///   or nil for a new one.
        init(keys: KeySet, policy: VerificationPolicy, cacheScope: UInt64? = nil) {
            self.keys = keys
            self.policy = policy
            self.cacheScope = cacheScope ?? (Self.scopes.wrappingIncrementThenLoad(ordering: .relaxed))
            self.usesCache = !keys.keys.contains(where: \.isSymmetric)
            var mask: UInt8 = 0
            for algorithm in policy.allowedAlgorithms ?? Set(TokenAlgorithm.allCases) {
                mask |= algorithm.bit
            }
            self.algorithmMask = mask
            self.userClaim = Array(policy.claimNames.user.utf8)
            self.issuedAtClaim = Array(policy.claimNames.issuedAt.utf8)
            self.apiOnlyClaim = policy.readsKindClaim ? Array(policy.claimNames.apiOnly.utf8) : [0xFF]
            self.defaultAPIOnly = policy.defaultKind == .api
            self.cutoffPrefix = policy.cutoffIssuer.map { IssuerScopedUser.prefix(issuer: $0) }
            self.issuer = policy.issuer.map { Array($0.utf8) }
            self.audiences = policy.audiences.map { Array($0.utf8) }
            self.requiredClaims = policy.requiredClaims
            let selection = policy.selection
            self.scopeNames = selection.scopes.map { Array($0.utf8) }
            var scopeMask: UInt64 = 0
            var unsatisfiable = false
            for scope in policy.requiredScopes {
                if let index = selection.scopes.firstIndex(of: scope) {
                    scopeMask |= 1 << UInt64(index)
                } else {
                    unsatisfiable = true
                }
            }
            self.requiredScopeMask = scopeMask
            self.scopesUnsatisfiable = unsatisfiable
            self.forwardedNames = selection.forwardedClaims.map { Array($0.utf8) }
            self.forwardedIndices = policy.forwardedClaims.map { selection.forwardedClaims.firstIndex(of: $0) }
            self.forwardedMask = self.forwardedIndices.reduce(0) { mask, index in
                index.map { mask | (1 << UInt32($0)) } ?? mask
            }
            // Clamp so that time arithmetic on in-range NumericDates can never overflow.
            let hundredYears: Int64 = 100 * 366 * 86_400
            self.sessionMaxAge = min(max(policy.sessionMaxAge, 0), hundredYears)
            self.clockSkew = min(max(policy.clockSkew, 0), hundredYears)
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

extension TokenVerifier {
    /// A verifier's key set and policy, with everything the hot path needs precomputed: claim names and
    /// expected issuer and audiences as bytes, the allowed algorithms as a bit mask, and clamped durations.
    final class Prepared: Sendable {
        let keys: KeySet
        let policy: VerificationPolicy
        let algorithmMask: UInt8
        let userClaim: [UInt8]
        let issuedAtClaim: [UInt8]
        let apiOnlyClaim: [UInt8]
        let issuer: [UInt8]?
        /// Empty when the policy names no audience. An array of arrays so that checking one audience walks
        /// one element without allocating, and several cost no more than a compare each.
        let audiences: [[UInt8]]
        let requiredClaims: RequiredClaims
        let sessionMaxAge: Int64
        let clockSkew: Int64

        init(keys: KeySet, policy: VerificationPolicy) {
            self.keys = keys
            self.policy = policy
            var mask: UInt8 = 0
            for algorithm in policy.allowedAlgorithms ?? Set(TokenAlgorithm.allCases) {
                mask |= algorithm.bit
            }
            self.algorithmMask = mask
            self.userClaim = Array(policy.claimNames.user.utf8)
            self.issuedAtClaim = Array(policy.claimNames.issuedAt.utf8)
            self.apiOnlyClaim = Array(policy.claimNames.apiOnly.utf8)
            self.issuer = policy.issuer.map { Array($0.utf8) }
            self.audiences = policy.audiences.map { Array($0.utf8) }
            self.requiredClaims = policy.requiredClaims
            // Clamp so that time arithmetic on in-range NumericDates can never overflow.
            let hundredYears: Int64 = 100 * 366 * 86_400
            self.sessionMaxAge = min(max(policy.sessionMaxAge, 0), hundredYears)
            self.clockSkew = min(max(policy.clockSkew, 0), hundredYears)
        }
    }
}

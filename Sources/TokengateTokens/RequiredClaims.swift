//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Registered claims a verifier demands to be present (a route's `require_claims`). A token without one of
/// them is rejected with ``RejectionReason/missingClaim``.
///
/// Present or not, `exp` and `nbf` are always checked and `iss`/`aud` are compared with the policy's issuer
/// and audiences when it has them; this only turns "checked when present" into "must be present". An
/// option set so that the check costs one bit test per claim on the hot path.
public struct RequiredClaims: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    public static let expiry = RequiredClaims(rawValue: 1 << 0)
    public static let notBefore = RequiredClaims(rawValue: 1 << 1)
    public static let issuer = RequiredClaims(rawValue: 1 << 2)
    public static let audience = RequiredClaims(rawValue: 1 << 3)
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Why a token was rejected: a stable machine code (for metrics, logs and the CLI) and a short human text
/// (for the RFC 6750 `error_description`).
///
/// A struct rather than an enum so that codes can be added without breaking callers (STYLE §2). Values are
/// built from string literals (immortal, never reference counted), so returning one allocates nothing.
/// Equality and hashing use the code alone. The descriptions never carry token content, key ids or library
/// messages.
public struct RejectionReason: Hashable, Sendable, CustomStringConvertible {
    /// The stable code, e.g. `"bad_signature"`.
    public let code: String
    /// A short human text without internals.
    public let description: String

    /// Internal: the set of codes is part of the product's contract, so new ones are added here.
    init(code: String, description: String) {
        self.code = code
        self.description = description
    }

    public static func == (lhs: RejectionReason, rhs: RejectionReason) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
    }

    /// Not a well-formed compact JWS/JWT (size, encoding, JSON, claim types, `crit`).
    public static let malformed = RejectionReason(code: "malformed", description: "The token is malformed.")
    /// The signature does not verify with the selected key.
    public static let badSignature = RejectionReason(
        code: "bad_signature",
        description: "The token signature is invalid."
    )
    /// No configured key matches the token's `kid` (or the key set needs a `kid` and the token has none).
    public static let unknownKey = RejectionReason(
        code: "unknown_key",
        description: "The token was signed with an unknown key."
    )
    /// `alg` is `none`, unknown, not allowed for the selected key, or not allowed by the policy.
    public static let algNotAllowed = RejectionReason(
        code: "alg_not_allowed",
        description: "The token algorithm is not allowed."
    )
    /// Past `exp` or past the session max-age (plus the clock skew).
    public static let expired = RejectionReason(code: "expired", description: "The token has expired.")
    /// Before `nbf` (minus the clock skew).
    public static let notYetValid = RejectionReason(
        code: "not_yet_valid",
        description: "The token is not valid yet."
    )
    /// `iat` more than the clock skew in the future.
    public static let issuedInFuture = RejectionReason(
        code: "issued_in_future",
        description: "The token was issued in the future."
    )
    /// Issued before the global cutoff or the user's `revoked_before`.
    public static let revoked = RejectionReason(code: "revoked", description: "The token has been revoked.")
    /// An api token issued before the user's `api_revoked_before`.
    public static let apiRevoked = RejectionReason(
        code: "api_revoked",
        description: "App access has been revoked for this user."
    )
    /// A token of a device (its `did` claim) that was revoked on its own.
    public static let deviceRevoked = RejectionReason(
        code: "device_revoked",
        description: "This device's access has been revoked."
    )
    /// A valid token of a kind the route does not accept.
    public static let wrongKind = RejectionReason(
        code: "wrong_kind",
        description: "This kind of token is not accepted here."
    )
    /// A required claim (`sub`, `iat`, or a required `iss`/`aud`) is absent or does not have the required value.
    public static let missingClaim = RejectionReason(
        code: "missing_claim",
        description: "The token lacks a required claim."
    )
    /// A valid token that does not grant every scope the route requires (`require_scopes`): a 403.
    public static let insufficientScope = RejectionReason(
        code: "insufficient_scope",
        description: "The token does not grant the scope this resource requires."
    )
    /// A claim the route forwards to its backend (`forward_claims`) holds what no header may carry: a control
    /// character, a leading or trailing space, more than ``ClaimSelection/maxForwardedValueBytes``, an object
    /// or a nested array. Refused rather than forwarded in part, so the backend never sees a value altered.
    public static let unforwardableClaim = RejectionReason(
        code: "unforwardable_claim",
        description: "A token claim cannot be forwarded as a header value."
    )

    /// Every code, in a stable order (for metrics pre-registration and tests).
    public static let all: [RejectionReason] = [
        .malformed, .badSignature, .unknownKey, .algNotAllowed, .expired, .notYetValid, .issuedInFuture,
        .revoked, .apiRevoked, .wrongKind, .missingClaim, .deviceRevoked, .insufficientScope, .unforwardableClaim,
    ]
}

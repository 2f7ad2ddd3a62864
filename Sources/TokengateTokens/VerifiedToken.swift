//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The identity a valid token carries, as the gateway forwards it.
public struct VerifiedToken: Sendable, Hashable {
    /// The user claim (`sub` by default).
    public var subject: String
    public var kind: TokenKind
    /// `iat`, UNIX seconds.
    public var issuedAt: Int64
    /// The `kid` of the key that verified the token (the key's own id, not the token's header text).
    public var keyID: String?
    /// When the token stops being valid (before clock skew): `exp`, or for a session token the earlier
    /// of `exp` and `iat` + session max-age. Nil for an api token without `exp`.
    public var expiresAt: Int64?
    /// The device the token was minted for (its `did` claim), nil for a token without one.
    public var device: DeviceID?
    /// The values of the policy's ``VerificationPolicy/forwardedClaims``, in that order: nil where the token has
    /// no such claim (or it is `null`). Each was checked to be a header value (``ClaimSelection``). Empty when
    /// the policy forwards nothing.
    public var forwardedClaims: [String?]
    /// The name of the JWT issuer whose keys verified the token, on a gateway with `kind: jwt` issuers (for the
    /// access log: a configured name, never the token's own `iss`); nil on a gateway with one issuer.
    public var issuer: String?

    public init(
        subject: String, kind: TokenKind, issuedAt: Int64, keyID: String?, expiresAt: Int64?, device: DeviceID? = nil,
        forwardedClaims: [String?] = []
    ) {
        self.subject = subject
        self.kind = kind
        self.issuedAt = issuedAt
        self.keyID = keyID
        self.expiresAt = expiresAt
        self.device = device
        self.forwardedClaims = forwardedClaims
    }
}

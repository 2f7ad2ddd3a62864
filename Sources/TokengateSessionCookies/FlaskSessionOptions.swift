//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// How a Flask site signs its default session cookie: `SecureCookieSessionInterface`, an itsdangerous
/// `URLSafeTimedSerializer` with the salt `cookie-session`, HMAC key derivation and SHA-1.
///
/// The cookie is `payload.timestamp.signature`: the payload is URL-safe base64 of compact JSON (or `.` and the
/// base64 of it zlib-compressed), the timestamp the signing time as big-endian bytes in URL-safe base64, the
/// signature an HMAC of everything before it. Flask refuses a cookie signed longer than
/// `PERMANENT_SESSION_LIFETIME` ago (31 days by default), permanent session or not.
public struct FlaskSessionOptions: Sendable, Hashable {
    /// How itsdangerous turns the secret into the HMAC key (`Signer.key_derivation`).
    public enum KeyDerivation: String, Sendable, Hashable, CaseIterable {
        /// HMAC(secret, salt): what Flask's session interface sets.
        case hmac
        /// digest(salt ‖ "signer" ‖ secret): itsdangerous' own default, and Django's scheme.
        case djangoConcat = "django-concat"
        /// digest(salt ‖ secret).
        case concat
        /// The secret itself.
        case none
    }

    /// `SecureCookieSessionInterface.salt`.
    public var salt: String
    public var keyDerivation: KeyDerivation
    /// `SecureCookieSessionInterface.digest_method`.
    public var digest: SessionCookieDigest
    /// `PERMANENT_SESSION_LIFETIME` in seconds: the signature's own max-age.
    public var maxAge: Int64

    public init(
        salt: String = "cookie-session",
        keyDerivation: KeyDerivation = .hmac,
        digest: SessionCookieDigest = .sha1,
        maxAge: Int64 = 31 * 86_400
    ) {
        self.salt = salt
        self.keyDerivation = keyDerivation
        self.digest = digest
        self.maxAge = maxAge
    }
}

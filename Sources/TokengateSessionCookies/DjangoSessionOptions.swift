//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// How a Django site signs its session cookie with `SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"`:
/// `django.core.signing.dumps(session, salt=…, compress=True)`, a `TimestampSigner` with HMAC-SHA256 (Django 3.1
/// and later).
///
/// The cookie is `payload:timestamp:signature`: the payload as for Flask (URL-safe base64 of JSON, or `.` and
/// the base64 of it zlib-compressed), the timestamp the signing time in base 62, the signature URL-safe base64
/// of HMAC(digest(salt ‖ "signer" ‖ SECRET_KEY), everything before it). Django refuses a cookie signed longer
/// than `SESSION_COOKIE_AGE` ago (two weeks by default).
///
/// Django's default session engine (the database) puts only a random session key in the cookie: nothing in it
/// can be checked at the edge, so only the signed-cookie engine works here.
public struct DjangoSessionOptions: Sendable, Hashable {
    /// The signer's salt: the session backend's module path.
    public var salt: String
    /// `TimestampSigner.algorithm`: SHA-256 since Django 3.1 (SHA-1 before).
    public var digest: SessionCookieDigest
    /// `SESSION_COOKIE_AGE` in seconds: the signature's own max-age.
    public var maxAge: Int64

    public init(
        salt: String = "django.contrib.sessions.backends.signed_cookies",
        digest: SessionCookieDigest = .sha256,
        maxAge: Int64 = 1_209_600
    ) {
        self.salt = salt
        self.digest = digest
        self.maxAge = maxAge
    }
}

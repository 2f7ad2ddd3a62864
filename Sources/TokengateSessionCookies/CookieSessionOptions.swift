//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// How an Express site signs its `cookie-session` cookie: two cookies, `NAME` holding base64 of the session's
/// JSON and `NAME.sig` holding keygrip's signature of `NAME=VALUE` (HMAC-SHA1 by default, URL-safe base64
/// without padding), checked against each key of the list in turn.
public struct CookieSessionOptions: Sendable, Hashable {
    /// The cookie's name (`cookieSession({ name })`, `session` by default): it is part of what is signed.
    public var cookieName: String
    /// keygrip's algorithm (`Keygrip(keys, "sha256")`).
    public var digest: SessionCookieDigest

    public init(cookieName: String = "session", digest: SessionCookieDigest = .sha1) {
        self.cookieName = cookieName
        self.digest = digest
    }

    /// The companion cookie holding the signature.
    public var signatureCookieName: String { self.cookieName + ".sig" }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// How a Rails site makes its session cookie (ActionDispatch's cookie store and cookie jar).
///
/// The cookie's bytes are the same from Rails 6.1 to 8: `ActiveSupport::MessageEncryptor` with AES-256-GCM
/// (`data--iv--tag`, strict base64 each, URL-escaped in `Set-Cookie`) or `MessageVerifier` (`data--hexdigest`),
/// around the `{"_rails": {"message": base64(JSON), "exp": …, "pur": "cookie.NAME"}}` envelope. What changed is
/// the key: `secret_key_base` through PBKDF2-HMAC-SHA1 up to 6.1, PBKDF2-HMAC-SHA256 with 7.0's defaults
/// (`config.active_support.key_generator_hash_digest_class`). Rails 7.1's messages may instead carry the data
/// inline (`{"_rails": {"data": …}}`, `use_message_serializer_for_metadata`); both envelopes are read.
public struct RailsCookieOptions: Sendable, Hashable {
    public enum Version: String, Sendable, Hashable, CaseIterable {
        case v6_1 = "6.1"
        case v7_0 = "7.0"
        case v7_1 = "7.1"

        /// The PBKDF2 hash `load_defaults` of this version sets.
        var keyDerivationDigest: SessionCookieDigest {
            switch self {
            case .v6_1: .sha1
            case .v7_0, .v7_1: .sha256
            }
        }
    }

    /// `cookies.encrypted` (the cookie store's default whenever `secret_key_base` is set) or `cookies.signed`.
    public enum Protection: String, Sendable, Hashable, CaseIterable {
        case encrypted
        case signed
    }

    public var version: Version
    /// The cookie's name (`config.session_store :cookie_store, key: "_app_session"`): Rails binds each cookie to
    /// its name through the purpose `cookie.NAME`, so a cookie cannot be replayed under another name.
    public var cookieName: String
    public var protection: Protection
    /// PBKDF2's hash; nil for the version's default.
    public var keyDerivationDigest: SessionCookieDigest?
    /// `ActiveSupport::KeyGenerator`'s iteration count for the application's key generator.
    public var iterations: Int
    /// `config.action_dispatch.signed_cookie_digest` (signed cookies only).
    public var signedCookieDigest: SessionCookieDigest
    /// `config.action_dispatch.authenticated_encrypted_cookie_salt`.
    public var encryptedCookieSalt: String
    /// `config.action_dispatch.signed_cookie_salt`.
    public var signedCookieSalt: String

    public init(
        version: Version,
        cookieName: String,
        protection: Protection = .encrypted,
        keyDerivationDigest: SessionCookieDigest? = nil,
        iterations: Int = 1000,
        signedCookieDigest: SessionCookieDigest = .sha1,
        encryptedCookieSalt: String = "authenticated encrypted cookie",
        signedCookieSalt: String = "signed cookie"
    ) {
        self.version = version
        self.cookieName = cookieName
        self.protection = protection
        self.keyDerivationDigest = keyDerivationDigest
        self.iterations = iterations
        self.signedCookieDigest = signedCookieDigest
        self.encryptedCookieSalt = encryptedCookieSalt
        self.signedCookieSalt = signedCookieSalt
    }

    /// The digest PBKDF2 runs with.
    public var effectiveKeyDerivationDigest: SessionCookieDigest {
        self.keyDerivationDigest ?? self.version.keyDerivationDigest
    }
}

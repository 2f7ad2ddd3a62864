//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// An issuer whose tokens are a web framework's own login cookie (`kind: session_cookie`): which framework,
/// the site's secret, where the user id, the login time and the api-only flag are in its session, and the
/// framework's own settings where the site changed them.
///
/// The shape is one item of an `issuers:` list: `kind` names it, and everything a route needs to accept its
/// cookies is here. Values are checked as the decoder reads them (JSON Pointers, cookie names, ranges); the
/// secret itself is read only when the gateway derives the keys, and never appears in a message.
public struct SessionCookieIssuerConfiguration: Sendable, Equatable {
    public enum Format: String, Sendable, Hashable, CaseIterable {
        case rails
        case flask
        case django
        case cookieSession = "cookie_session"
    }

    public enum SecretSource: Sendable, Equatable {
        case file(ConfigPath)
        case environment(String)
    }

    public enum Digest: String, Sendable, Hashable, CaseIterable {
        case sha1 = "SHA1"
        case sha256 = "SHA256"
    }

    /// Where the three fields are, as JSON Pointers (RFC 6901), e.g. `/_auth_user_id`.
    public struct Fields: Sendable, Equatable {
        public var userID: String
        public var loginTime: String
        public var apiOnly: String?
        /// How a minted cookie writes the user id.
        public var userIDType: UserIDType

        public enum UserIDType: String, Sendable, Hashable, CaseIterable {
            case string
            case integer
        }

        public init(userID: String, loginTime: String, apiOnly: String? = nil, userIDType: UserIDType = .string) {
            self.userID = userID
            self.loginTime = loginTime
            self.apiOnly = apiOnly
            self.userIDType = userIDType
        }
    }

    /// Rails' settings (``Format/rails`` only).
    public struct Rails: Sendable, Equatable {
        public enum Version: String, Sendable, Hashable, CaseIterable {
            case v6_1 = "6.1"
            case v7_0 = "7.0"
            case v7_1 = "7.1"
        }

        public enum Protection: String, Sendable, Hashable, CaseIterable {
            case encrypted
            case signed
        }

        public var version: Version
        public var protection: Protection
        /// Nil: the version's own (SHA1 for 6.1, SHA256 for 7.0 and later).
        public var keyDerivationDigest: Digest?
        public var iterations: Int
        public var signedCookieDigest: Digest

        public init(
            version: Version, protection: Protection = .encrypted, keyDerivationDigest: Digest? = nil,
            iterations: Int = 1000, signedCookieDigest: Digest = .sha1
        ) {
            self.version = version
            self.protection = protection
            self.keyDerivationDigest = keyDerivationDigest
            self.iterations = iterations
            self.signedCookieDigest = signedCookieDigest
        }
    }

    public enum FlaskKeyDerivation: String, Sendable, Hashable, CaseIterable {
        case hmac
        case djangoConcat = "django-concat"
        case concat
        case none
    }

    public var format: Format
    /// The current secret, then older ones still accepted (`previous_secret_files`).
    public var secret: SecretSource
    public var previousSecrets: [SecretSource]
    /// The session cookie's name (the framework's default where it has one: `session` for Flask and
    /// cookie-session, `sessionid` for Django; Rails has none and needs it).
    public var cookieName: String
    public var fields: Fields
    /// The framework's own signature max-age (Flask's `PERMANENT_SESSION_LIFETIME`, Django's `SESSION_COOKIE_AGE`);
    /// nil for the framework's default. Not for Rails (whose expiry is in the cookie) nor cookie-session.
    public var formatMaxAge: Duration?
    /// Overrides `tokens.session_max_age` for this issuer's `session` logins.
    public var sessionMaxAge: Duration?
    /// Rails only.
    public var rails: Rails?
    /// Flask and Django: the signer's salt; nil for the framework's default.
    public var salt: String?
    /// Flask only.
    public var flaskKeyDerivation: FlaskKeyDerivation?
    /// Flask, Django and cookie-session: the HMAC's hash; nil for the framework's default.
    public var digest: Digest?

    public init(
        format: Format, secret: SecretSource, previousSecrets: [SecretSource] = [], cookieName: String,
        fields: Fields, formatMaxAge: Duration? = nil, sessionMaxAge: Duration? = nil, rails: Rails? = nil,
        salt: String? = nil, flaskKeyDerivation: FlaskKeyDerivation? = nil, digest: Digest? = nil
    ) {
        self.format = format
        self.secret = secret
        self.previousSecrets = previousSecrets
        self.cookieName = cookieName
        self.fields = fields
        self.formatMaxAge = formatMaxAge
        self.sessionMaxAge = sessionMaxAge
        self.rails = rails
        self.salt = salt
        self.flaskKeyDerivation = flaskKeyDerivation
        self.digest = digest
    }

    /// The companion cookie holding the signature (cookie-session's `NAME.sig`), or nil.
    public var signatureCookieName: String? {
        self.format == .cookieSession ? self.cookieName + ".sig" : nil
    }
}

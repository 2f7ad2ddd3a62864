//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A `token_page` route (DESIGN §8): checks that the browser is logged in, mints an api token and hands it over.
public struct TokenPageConfiguration: Sendable, Equatable {
    public var login: TokenPageLogin
    /// Where a browser that is not logged in is sent: a path on this site or an absolute `https://` URL.
    public var loginURL: String
    /// The query parameter that carries the same-site return address to the login page. Default `return_to`.
    public var returnParameter: String
    /// The well-known cookie the token is delivered in. Default `auth_token`.
    public var cookieName: String
    /// `Path=` of that cookie. Default `/`.
    public var cookiePath: String
    /// `exp` of minted tokens, as a lifetime; `nil` (the default) mints api tokens that only a cutoff ends.
    public var tokenLifetime: Duration?
    /// Apps allowed to receive the token by a redirect to their callback URL.
    public var apps: [TokenPageApp]
    /// `connected_apps`: the path (under the route's `path_prefix`) of the connected-apps page, where a logged-in
    /// user sees the devices the page minted tokens for and revokes one, or all api tokens; nil: no such page.
    public var connectedAppsPath: String?
    /// `mint`: the `issuers:` item (`kind: session_cookie`) whose format the page mints in instead of a JWT, so
    /// that the site's own code reads what the page hands out; nil: JWTs.
    public var mintIssuer: String?
    /// `mint_whoami`: session members only the site knows, as JSON pointer → the whoami answer's header that
    /// carries the value (Django's `/_auth_user_hash`, Devise's salt). Each header must come exactly once.
    public var mintWhoamiHeaders: [SiteValue] = []
    /// `mint_set`: session members that are the same for every user, as JSON pointer → string (Django's
    /// `/_auth_user_backend`).
    public var mintConstants: [SiteValue] = []

    /// A session member the page sets when it mints in the site's format: where, and a header name or a string.
    public struct SiteValue: Sendable, Hashable {
        public var pointer: String
        public var value: String

        public init(pointer: String, value: String) {
            self.pointer = pointer
            self.value = value
        }
    }

    public init(
        login: TokenPageLogin,
        loginURL: String,
        returnParameter: String = "return_to",
        cookieName: String = "auth_token",
        cookiePath: String = "/",
        tokenLifetime: Duration? = nil,
        apps: [TokenPageApp] = [],
        connectedAppsPath: String? = nil
    ) {
        self.login = login
        self.loginURL = loginURL
        self.returnParameter = returnParameter
        self.cookieName = cookieName
        self.cookiePath = cookiePath
        self.tokenLifetime = tokenLifetime
        self.apps = apps
        self.connectedAppsPath = connectedAppsPath
    }
}

/// How the token page knows who is logged in.
public enum TokenPageLogin: Sendable, Equatable {
    /// A valid *session* token in this cookie (the site's own login cookie).
    case sessionCookie(String)
    /// A subrequest to the RP's "who am I" endpoint with the browser's cookies.
    case whoami(WhoamiConfiguration)
}

/// The RP's "who am I" endpoint: 2xx plus the user id in ``userHeader`` means logged in.
public struct WhoamiConfiguration: Sendable, Equatable {
    /// An absolute `http://` or `https://` URL (a path is allowed here, unlike upstream targets).
    public var url: String
    public var userHeader: String
    /// Default 5s.
    public var timeout: Duration
    /// Whoami calls in flight at once, for the whole gateway (default 64). The token page is reachable
    /// without a token and each of its requests with a cookie costs a call to the RP: past this, token-page
    /// requests get a 503 at once instead of piling connections onto the RP.
    public var maxInFlight: Int

    public init(url: String, userHeader: String, timeout: Duration = .seconds(5), maxInFlight: Int = 64) {
        self.url = url
        self.userHeader = userHeader
        self.timeout = timeout
        self.maxInFlight = maxInFlight
    }
}

/// A registered app that receives its token by a redirect to a callback URL (custom scheme or https).
public struct TokenPageApp: Sendable, Equatable {
    public var name: String
    public var callback: String
    /// Whether the app must use PKCE (RFC 7636). Default ``TokenPagePKCE/optional``.
    public var pkce: TokenPagePKCE
    /// Whether a logged-in browser is asked ("continue to this app as alice?") before the page hands the login to
    /// the app's callback. Default: on for a custom-scheme callback, off for an `https://` one
    /// (``confirmsByDefault(callback:)``).
    ///
    /// RFC 8252 §8.6: an authorization server should not process a request without the user's interaction unless
    /// the client's identity is assured. It is for a claimed `https://` link (App Links, Universal Links: only the
    /// app the site names receives it), never for a custom scheme, which any app on the device may claim: such an
    /// app could open the page with its own PKCE challenge and, through the browser's existing login, get a code
    /// it redeems itself, without the user doing anything.
    public var confirm: Bool
    /// What the confirmation page calls the app ("Example for iOS"); the app's ``name`` when nil.
    public var displayName: String?
    /// Refresh tokens, opt-in (`refresh_tokens`): the PKCE redemption answers a short-lived access token and a
    /// refresh token, and the page accepts `grant_type=refresh_token`. Nil: the app gets what it always got.
    public var refreshTokens: TokenPageRefreshTokens?

    /// - Parameter confirm: nil for the default of the callback (``confirmsByDefault(callback:)``).
    public init(
        name: String,
        callback: String,
        pkce: TokenPagePKCE = .optional,
        confirm: Bool? = nil,
        displayName: String? = nil,
        refreshTokens: TokenPageRefreshTokens? = nil
    ) {
        self.name = name
        self.callback = callback
        self.pkce = pkce
        self.confirm = confirm ?? Self.confirmsByDefault(callback: callback)
        self.displayName = displayName
        self.refreshTokens = refreshTokens
    }

    /// Whether the callback is a custom scheme (`myapp://token`), which any app may claim, rather than an
    /// `https://` link, which the operating system gives only to the app the site names.
    public var hasCustomScheme: Bool { !Self.isHTTPS(self.callback) }

    /// The default of ``confirm``: on for a custom scheme, off for `https://`.
    public static func confirmsByDefault(callback: String) -> Bool { !Self.isHTTPS(callback) }

    private static func isHTTPS(_ callback: String) -> Bool {
        callback.utf8.count >= 6 && callback.prefix(6).lowercased() == "https:"
    }
}

/// An app's `refresh_tokens` setting (RFC 6749 §6): how long its access tokens and its refresh tokens live.
public struct TokenPageRefreshTokens: Sendable, Equatable {
    /// `access_token_lifetime`, default 10 minutes: the `exp` of every access token the app gets.
    public var accessTokenLifetime: Duration
    /// `refresh_token_lifetime`, default 30 days: how long a refresh token may wait before its use; every use
    /// gives a new one with a new lifetime.
    public var refreshTokenLifetime: Duration

    public static let defaultAccessTokenLifetime = Duration.seconds(600)
    public static let defaultRefreshTokenLifetime = Duration.seconds(30 * 86_400)

    public init(
        accessTokenLifetime: Duration = Self.defaultAccessTokenLifetime,
        refreshTokenLifetime: Duration = Self.defaultRefreshTokenLifetime
    ) {
        self.accessTokenLifetime = accessTokenLifetime
        self.refreshTokenLifetime = refreshTokenLifetime
    }
}

/// An app's `pkce` setting: whether the token page insists on a code challenge.
///
/// Any app can claim a custom scheme on Android, and one that does receives whatever the page puts in the
/// callback. With PKCE the callback holds only a code that is useless without the verifier the real app kept
/// (RFC 8252 §8.1).
public enum TokenPagePKCE: String, Sendable, Equatable, CaseIterable {
    /// A request with `code_challenge` gets a code, one without gets the token in the fragment as before: for
    /// the time old app versions that send no challenge are still in use.
    case optional
    /// A request without `code_challenge` is refused (`400 code_challenge_required`): the token never goes
    /// into the callback.
    case required
}

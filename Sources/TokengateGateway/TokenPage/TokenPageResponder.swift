//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengatePercentEncoding
import TokengateSessionCookies
import TokengateTokens
import TokengateHTTP

/// The token page (DESIGN §8): decides, without any I/O, what a `token_page` route answers.
///
/// ### Overview
/// 1. The request is read (``TokenPageRequest``): `GET` or `HEAD` only (the gateway hands a `POST` to
///    ``confirm(head:body:cutoffs:now:nowMilliseconds:)`` when its query holds `confirm`, else, a PKCE code redemption, to
///    ``redeem(body:cutoffs:now:)``); `app`, `cancel`, `state`, `code_challenge` and
///    `code_challenge_method` at most once each; `app` must name a configured app exactly, and a challenge
///    needs `app`, `S256` and 43 base64url characters (an app with `pkce: required` needs one). Refusals are
///    fixed JSON errors.
/// 2. `?app=NAME&cancel=1` redirects to that app's callback with `status=unauthorized&message=…` at once; no
///    login is needed to decline.
/// 3. Who is logged in:
///    - `session_cookie: NAME`: exactly one such cookie holding a valid *session* token (api tokens do not log
///      a browser in; cutoffs apply). Two cookies of that name are refused (cookie tossing from a sibling
///      domain could otherwise log the browser in as someone else).
///    - `whoami`: the gateway asks the RP (``TokenPageAction/askWhoami(url:forwardCookies:)``) and hands the
///      result to ``respond(to:whoami:now:nowMilliseconds:)``: 2xx with exactly one non-empty user header is logged in;
///      401, 403 and 3xx are not; anything else, or no answer, is a 502 (fail closed, never a token).
/// 4. Not logged in: `302` to `login_url` with `return_parameter=<this request's path and query>`, only when
///    that address is a same-site path (``SameSiteReturnPath``); otherwise `400`.
/// 5. Logged in, with an app that asks first (``TokengateConfig/TokenPageApp/confirm``: by default a
///    custom-scheme callback, which any app may claim, RFC 8252 §8.6): `200` with the confirmation page
///    (``confirmationPage(app:request:user:nowMilliseconds:notice:reasonCode:)``), which names the app and the
///    account and holds no token and no code, and sets a fresh confirmation cookie (``TokenPageConfirmationCookie``).
///    Its "continue" is a `POST` (``TokenPageConfirmationRequest``, ``confirm(head:body:cutoffs:now:
///    nowMilliseconds:)``) with a value bound to that cookie, the user and this login; the login is checked again,
///    then step 6 follows with a `303`. Its "cancel" is step 2.
/// 6. Logged in: an api token is minted (`api_only: true`, `iat` now, `exp` now + `token_lifetime` when set,
///    `iss`/`aud` when the verification policy requires them) and delivered:
///    - with `app`: `302` to the configured callback with `#access_token=…&token_type=bearer[&expires_in=…]
///      [&state=…]` in the fragment, never the query (a fragment is not sent to servers or in `Referer`);
///    - with `app` and a PKCE challenge: nothing is minted yet; the callback gets `#code=…[&state=…]`, an
///      encrypted and authenticated code (``TokenPageCodeKey``) that the app redeems once with its verifier by
///      `POST` to the page (``redeem(body:cutoffs:now:)``), which mints then;
///    - otherwise: `200` with `Set-Cookie: <cookie_name>=…; HttpOnly; Secure; SameSite=Strict; Path=…
///      [; Max-Age=…]`, the title `tokengate-token:<token>` (``titlePrefix``) and the token in the page body.
///
/// With `connected_apps: PATH`, that path of the route is the connected-apps page instead
/// (``connectedApps(head:cutoffs:now:)``, ``changeDevices(head:body:cutoffs:now:nowMilliseconds:)``): the same login
/// check, the user's devices from the store, and buttons checked as the confirmation's "continue" is.
///
/// Every answer carries `Cache-Control: no-store` and the strict security headers (``TokenPageAnswer``). The
/// token appears only in that one answer: never in a log field (``TokenPageAnswer/reasonCode`` and
/// ``TokenPageAnswer/user`` are the loggable parts) and never in a URL except the callback fragment the
/// configuration registers.
struct TokenPageResponder: Sendable {
    /// The page title is this prefix followed by the token; the client library looks for exactly this.
    static let titlePrefix = "tokengate-token:"

    let configuration: TokenPageConfiguration
    /// The page's route (host and path prefix): its codes are redeemed here only (``TokenPageCode/page``).
    let page: String
    /// Never exposed: the responder is the only code on the request path that mints.
    let signer: TokenSigner
    /// Makes and checks refresh tokens (``TokenSigner/refreshTokenKey``).
    let refreshKey: RefreshTokenKey
    /// Whether the store can rotate refresh tokens (``DeviceRegistry/refresh``): apps get them only then.
    let refreshes: Bool
    /// Seals and opens PKCE codes; derived from the signing key (``TokenSigner/tokenPageCodeKey``).
    let codeKey: TokenPageCodeKey
    /// Makes and checks the confirmation page's values (``TokenSigner/tokenPageConfirmationKey``).
    let confirmationKey: TokenPageConfirmationKey
    /// The codes redeemed in the last minutes: the process's, shared by every page and every generation.
    let redeemedCodes: RedeemedCodeMemory
    /// Nil when the gateway has no verification keys; the configuration then only allows `whoami` login.
    private let sessionVerifier: TokenVerifier?
    /// The gateway's token policy: its issuer and first audience go into minted tokens.
    let policy: VerificationPolicy
    /// Whether every minted token gets a fresh device (``DeviceID``, the `did` claim) whose record the gateway
    /// stores before it sends the answer (``TokenPageAnswer/device``): the cutoff store keeps devices.
    let mintsDevices: Bool
    /// `mint: ISSUER`: the page's tokens are the site's own login cookies in that issuer's format (Flask's
    /// session, Rails' cookie store, Django's signed cookies), api-only, so the site's own code reads them; nil:
    /// JWTs. Such a token carries no device (the formats have no place for one the site would keep).
    let siteMint: SiteMint?

    /// - Parameters:
    ///   - signer: built from `signing_key`, with the configuration's claim names.
    ///   - verifier: the gateway's verifier; checks session cookies, and its policy's `iss` and first audience
    ///     are put into minted tokens so that they pass the gateway's own checks.
    ///   - redeemedCodes: the memory of redeemed codes (no default: a fresh one would silently forget codes).
    init(
        configuration: TokenPageConfiguration,
        signer: TokenSigner,
        verifier: TokenVerifier,
        page: String,
        redeemedCodes: RedeemedCodeMemory,
        mintsDevices: Bool = false,
        refreshes: Bool = false,
        siteMint: SiteMint? = nil
    ) {
        self.init(
            configuration: configuration, signer: signer, sessionVerifier: verifier, policy: verifier.policy, page: page,
            redeemedCodes: redeemedCodes, mintsDevices: mintsDevices, refreshes: refreshes, siteMint: siteMint)
    }

    /// - Parameters:
    ///   - sessionVerifier: checks session cookies; nil when no keys are configured (a session cookie then never
    ///     logs anyone in).
    ///   - policy: the gateway's token policy, for the `iss` and `aud` of minted tokens.
    ///   - redeemedCodes: the process's memory of redeemed codes (``GatewayServer`` keeps one across reloads).
    ///   - mintsDevices: whether tokens carry a device (the cutoff store keeps device records).
    init(
        configuration: TokenPageConfiguration,
        signer: TokenSigner,
        sessionVerifier: TokenVerifier?,
        policy: VerificationPolicy,
        page: String,
        redeemedCodes: RedeemedCodeMemory,
        mintsDevices: Bool = false,
        refreshes: Bool = false,
        siteMint: SiteMint? = nil
    ) {
        self.siteMint = siteMint
        self.mintsDevices = siteMint == nil && mintsDevices
        self.refreshes = refreshes
        self.refreshKey = signer.refreshTokenKey
        self.configuration = configuration
        self.page = page
        self.signer = signer
        self.codeKey = signer.tokenPageCodeKey
        self.confirmationKey = signer.tokenPageConfirmationKey
        self.redeemedCodes = redeemedCodes
        self.sessionVerifier = sessionVerifier
        self.policy = policy
    }

    // MARK: Entry points

    /// The first step for every `GET` and `HEAD` on the route.
    /// - Parameters:
    ///   - now: UNIX seconds, for tokens and codes.
    ///   - nowMilliseconds: UNIX milliseconds, the same clock, for the confirmation value (its minimum delay).
    func respond(to head: HTTPRequestHead, cutoffs: CutoffSnapshot, now: Int64, nowMilliseconds: Int64) -> TokenPageAction {
        let request: TokenPageRequest
        switch TokenPageRequest.parse(head, apps: self.configuration.apps) {
        case .request(let parsed): request = parsed
        case .refused(let refusal): return .answer(Self.answer(for: refusal))
        }
        if request.cancel, let app = request.app {
            return .answer(self.cancelRedirect(app: app, state: request.state))
        }
        switch self.checkLogin(head, cutoffs: cutoffs, now: now) {
        case .loggedIn(let user):
            return .answer(self.loggedIn(user: user, request: request, now: now, nowMilliseconds: nowMilliseconds))
        case .notLoggedIn:
            return .answer(self.loginRedirect(request))
        case .failed(let answer):
            return .answer(answer)
        case .askWhoami(let url, let cookies):
            return .askWhoami(url: url, forwardCookies: cookies)
        }
    }

    /// The second step in `whoami` mode, with what the RP said.
    func respond(
        to head: HTTPRequestHead,
        whoami: TokenPageWhoamiResult,
        now: Int64,
        nowMilliseconds: Int64
    ) -> TokenPageAnswer {
        let request: TokenPageRequest
        switch TokenPageRequest.parse(head, apps: self.configuration.apps) {
        case .request(let parsed): request = parsed
        case .refused(let refusal): return Self.answer(for: refusal)
        }
        switch self.checkLogin(head, whoami: whoami) {
        case .loggedIn(let user):
            switch self.siteValues(whoami) {
            case .success(let values):
                return self.loggedIn(
                    user: user, request: request, now: now, nowMilliseconds: nowMilliseconds, siteValues: values)
            case .failure(let problem):
                return Self.siteValueMissing(problem)
            }
        case .notLoggedIn:
            return self.loginRedirect(request)
        case .failed(let answer):
            return answer
        case .askWhoami:
            preconditionFailure("the whoami answer is the login check's last step")
        }
    }

    // MARK: The login check

    /// Who is logged in, by the session cookie; in `whoami` mode, the question to ask the RP.
    func checkLogin(_ head: HTTPRequestHead, cutoffs: CutoffSnapshot, now: Int64) -> TokenPageLoginCheck {
        let cookieHeaders = head.headers["cookie"]
        switch self.configuration.login {
        case .sessionCookie(let name):
            let values = CookieHeader.values(named: name, in: cookieHeaders)
            guard values.count <= 1 else {
                return .failed(
                    .error(
                        .badRequest,
                        error: "invalid_request",
                        description: "more than one session cookie was sent",
                        reasonCode: "token_page_ambiguous_session"
                    )
                )
            }
            guard let value = values.first,
                let verifier = self.sessionVerifier,
                case .valid(let token) = verifier.verify(value, accept: .session, cutoffs: cutoffs, now: now)
            else {
                return .notLoggedIn
            }
            return .loggedIn(user: token.subject)
        case .whoami(let whoami):
            guard let cookies = self.whoamiCookies(head) else {
                // No cookies at all: nobody can be logged in, so there is no one to ask.
                return .notLoggedIn
            }
            return .askWhoami(url: whoami.url, forwardCookies: cookies)
        }
    }

    /// What the RP's whoami answer says about the login.
    func checkLogin(_ head: HTTPRequestHead, whoami: TokenPageWhoamiResult) -> TokenPageLoginCheck {
        switch whoami {
        case .failed:
            return .failed(Self.loginCheckFailed)
        case .busy:
            return .failed(Self.loginCheckBusy)
        case .answered(let status, let values, _):
            var header = "user"
            if case .whoami(let whoami) = self.configuration.login { header = whoami.userHeader }
            switch status {
            case 200...299:
                // A 2xx without a usable user id is a broken endpoint, not a login: fail closed.
                guard values.count == 1 else {
                    return .failed(
                        Self.loginCheckFailed(
                            because: "it answered \(status) with \(values.count) \(header) fields; one is needed"))
                }
                switch Self.userID(values[0]) {
                case .success(let user):
                    return .loggedIn(user: user)
                case .failure(let problem):
                    return .failed(Self.loginCheckFailed(because: "its \(header) value \(problem.description)"))
                }
            case 300...399, 401, 403:
                return .notLoggedIn
            default:
                return .failed(Self.loginCheckFailed(because: "it answered \(status)"))
            }
        }
    }

    /// The browser's cookies without the page's own (an earlier api token, the confirmation cookie: none of the
    /// RP's business): what the whoami check sends. Nil when there are none.
    private func whoamiCookies(_ head: HTTPRequestHead) -> String? {
        CookieHeader.removing(
            [self.configuration.cookieName, TokenPageConfirmationCookie.name], from: head.headers["cookie"])
    }

    // MARK: Decisions

    /// A logged-in browser: the confirmation page when the app asks for one (``TokenPageApp/confirm``), else the
    /// delivery. `HEAD` shows neither (``deliver(to:request:now:)``).
    private func loggedIn(
        user: String, request: TokenPageRequest, now: Int64, nowMilliseconds: Int64, siteValues: [String: String] = [:]
    ) -> TokenPageAnswer {
        if !request.isHead, let app = request.app, app.confirm {
            return self.confirmationPage(app: app, request: request, user: user, nowMilliseconds: nowMilliseconds)
        }
        return self.deliver(to: user, request: request, now: now, siteValues: siteValues)
    }

    /// The `mint_whoami` values of a whoami answer (none unless the page mints in a site format that needs them).
    /// One that is not there exactly once fails the login check (`502`): the site's own check would refuse the
    /// cookie, and the app would be handed a login that does not work.
    func siteValues(_ whoami: TokenPageWhoamiResult) -> Result<[String: String], SiteValueProblem> {
        guard let site = self.siteMint, !site.whoamiHeaders.isEmpty else { return .success([:]) }
        guard case .answered(_, _, let headers) = whoami else { return .success([:]) }
        return site.values(from: headers)
    }

    /// `502`, naming the header only (never its value).
    static func siteValueMissing(_ problem: SiteValueProblem) -> TokenPageAnswer {
        Self.loginCheckFailed(
            because: "its answer has \(problem.count) usable \(problem.header) fields; the site's format needs one value")
    }

    func loginRedirect(_ request: TokenPageRequest) -> TokenPageAnswer {
        guard let returnAddress = request.returnAddress else {
            return .error(
                .badRequest,
                error: "invalid_request",
                description: "the request target is not a path on this site",
                reasonCode: "token_page_bad_return_address"
            )
        }
        var login = Substring(self.configuration.loginURL)
        var fragment: Substring = ""
        if let hash = login.firstIndex(of: "#") {
            fragment = login[hash...]
            login = login[..<hash]
        }
        let separator = login.contains("?") ? "&" : "?"
        var location = String(login) + separator + self.configuration.returnParameter + "="
        location += PercentEncoding.encode(returnAddress) + fragment
        return .redirect(to: location, reasonCode: "token_page_login_required")
    }

    private func cancelRedirect(app: TokenPageApp, state: String?) -> TokenPageAnswer {
        var location = app.callback + (app.callback.contains("?") ? "&" : "?")
        location += "status=unauthorized&message=" + PercentEncoding.encode(Self.cancelMessage)
        if let state { location += "&state=" + state }
        return .redirect(to: location, reasonCode: "token_page_canceled")
    }

    /// Mints the api token and hands it over, by the app's callback or by the page.
    ///
    /// `HEAD` mints nothing: it must be safe (RFC 9110 §9.3.2), and link checkers, previewers and monitors send
    /// it to any URL. A logged-in `HEAD` gets the page's fields without a token (``pageFieldsWithoutToken()``).
    func deliver(to user: String, request: TokenPageRequest, now: Int64, siteValues: [String: String] = [:]) -> TokenPageAnswer {
        if request.isHead {
            return self.pageFieldsWithoutToken()
        }
        if let app = request.app, let challenge = request.challenge {
            // PKCE: the callback gets a code only; the token is minted when the verifier comes with it.
            // Nil only when libcrypto fails (its random number generator included): no code, as no token.
            guard
                let code = self.codeKey.seal(
                    TokenPageCode(
                        subject: user, app: app.name, page: self.page, challenge: challenge, issuedAt: now,
                        siteValues: siteValues)
                )
            else { return Self.mintFailed }
            var location = app.callback + "#code=" + code
            if let state = request.state { location += "&state=" + state }
            return .redirect(to: location, reasonCode: "token_page_issued_code", user: user)
        }
        let lifetime = self.tokenLifetime
        guard let minted = self.mint(for: user, app: request.app?.name, now: now, siteValues: siteValues) else {
            return Self.mintFailed
        }
        let token = minted.token
        var answer: TokenPageAnswer
        if let app = request.app {
            var location = app.callback + "#access_token=" + PercentEncoding.encode(token)
            for (name, value) in minted.deliveryParameters(encode: PercentEncoding.encode) { location += "&\(name)=\(value)" }
            if let lifetime { location += "&expires_in=\(lifetime)" }
            if let state = request.state { location += "&state=" + state }
            answer = .redirect(to: location, reasonCode: "token_page_issued_app", user: user)
        } else {
            answer = self.page(token: token, user: user, lifetime: lifetime)
        }
        answer.device = minted.device
        return answer
    }

    /// `token_lifetime` in seconds, or nil.
    var tokenLifetime: Int64? { self.configuration.tokenLifetime.map { $0.components.seconds } }

    /// Mints the page's api token for `user`: `iat` now, `exp` after `token_lifetime`, the policy's `iss` and
    /// first audience. Nil when libcrypto fails or the user id cannot go into a token (answer ``mintFailed``).
    /// - Parameter issuedAt: the token's `iat` when it is not `now`: a PKCE code's issue time, so that a cutoff
    ///   after the code kills the token (``TokenPageCode/issuedAt``). `exp` counts from `now` all the same: a
    ///   code redeemed late in its 60 seconds gives a token of the whole `token_lifetime`.
    func mint(for user: String, now: Int64, issuedAt: Int64? = nil) -> String? {
        self.mint(for: user, app: nil, now: now, issuedAt: issuedAt)?.token
    }

    /// ``mint(for:now:issuedAt:)`` for `app` (nil: the page's own delivery), with a fresh device when the page
    /// ``mintsDevices``: the token's `did` claim, and the record the gateway must store before the answer goes out.
    /// Nil when libcrypto fails (its random number generator included).
    func mint(
        for user: String, app: String?, now: Int64, issuedAt: Int64? = nil, siteValues: [String: String] = [:]
    ) -> MintedToken? {
        var device: DeviceRecord?
        let expiresAt = self.tokenLifetime.map { now + $0 }
        if let site = self.siteMint {
            // The site's format: the login time is the token's `iat` (a code's issue time for a redemption), the
            // api-only flag set; Rails' metadata expiry is `token_lifetime` (Flask and Django count the format's
            // max-age from the signing time, which is now).
            guard let extras = site.extras(siteValues: siteValues),
                let cookie = try? site.minter.mint(
                    userID: user, loginTime: issuedAt ?? now, apiOnly: true, now: now, expiresAt: expiresAt,
                    extras: extras)
            else { return nil }
            guard site.deliversAsCookie else { return MintedToken(token: cookie.value, device: nil, cookie: nil) }
            return MintedToken(
                token: cookie.value, device: nil,
                cookie: (site.cookieName, site.signatureCookieName, site.signatureCookieName.flatMap { _ in cookie.signature }))
        }
        if self.mintsDevices {
            guard let id = DeviceID.random() else { return nil }
            device = DeviceRecord(
                device: id, user: user, app: app ?? DeviceRecord.copiedByHand, createdAt: now, tokensExpireBy: expiresAt)
        }
        let claims = TokenClaims(
            subject: user,
            issuedAt: issuedAt ?? now,
            apiOnly: true,
            expiresAt: expiresAt,
            issuer: self.policy.issuer,
            audience: self.policy.audiences.first,
            device: device?.device
        )
        // The error says nothing secret, but the answer stays fixed text anyway.
        guard let token = try? self.signer.mint(claims) else { return nil }
        return MintedToken(token: token, device: device, cookie: nil)
    }

    // MARK: Fixed answers

    static let cancelMessage = "user canceled"

    static let mintFailed = TokenPageAnswer.error(
        .internalServerError,
        error: "server_error",
        description: "cannot issue a token",
        reasonCode: "token_page_mint_failed"
    )

    static let loginCheckFailed = TokenPageAnswer.error(
        .badGateway,
        error: "bad_gateway",
        description: "the login check did not answer",
        reasonCode: "token_page_whoami_failed"
    )

    /// ``loginCheckFailed`` for an answer that came but cannot be used, with why for the log.
    static func loginCheckFailed(because diagnostic: String) -> TokenPageAnswer {
        var answer = Self.loginCheckFailed
        answer.diagnostic = diagnostic
        return answer
    }

    static let loginCheckBusy = TokenPageAnswer.error(
        .serviceUnavailable,
        error: "temporarily_unavailable",
        description: "too many login checks are under way; try again shortly",
        reasonCode: "token_page_whoami_busy"
    )

    static func answer(for refusal: TokenPageRequest.Refusal) -> TokenPageAnswer {
        switch refusal {
        case .method:
            .error(
                .methodNotAllowed,
                error: "method_not_allowed",
                description: "the token page answers GET, and POST to redeem a code or to confirm a login",
                reasonCode: "token_page_method",
                extraHeaders: [("allow", "GET, HEAD, POST")]
            )
        case .badQuery:
            .error(
                .badRequest,
                error: "invalid_request",
                description: "malformed or repeated query parameter",
                reasonCode: "token_page_bad_query"
            )
        case .unknownApp:
            .error(.badRequest, error: "invalid_request", description: "unknown app", reasonCode: "token_page_unknown_app")
        case .cancelWithoutApp:
            .error(
                .badRequest,
                error: "invalid_request",
                description: "cancel needs an app",
                reasonCode: "token_page_bad_query"
            )
        case .stateWithoutApp:
            .error(
                .badRequest,
                error: "invalid_request",
                description: "state needs an app",
                reasonCode: "token_page_bad_query"
            )
        case .badState:
            .error(
                .badRequest,
                error: "invalid_request",
                description: "state must be 1 to 256 characters of A-Z a-z 0-9 - . _ ~",
                reasonCode: "token_page_bad_query"
            )
        case .challengeWithoutApp:
            .error(
                .badRequest,
                error: "invalid_request",
                description: "code_challenge needs an app",
                reasonCode: "token_page_bad_query"
            )
        case .badChallenge:
            .error(
                .badRequest,
                error: "invalid_code_challenge",
                description: "code_challenge_method must be S256 and code_challenge 43 characters of base64url",
                reasonCode: "token_page_invalid_code_challenge"
            )
        case .challengeRequired:
            .error(
                .badRequest,
                error: "code_challenge_required",
                description: "this app must send code_challenge and code_challenge_method=S256 (PKCE)",
                reasonCode: "token_page_code_challenge_required"
            )
        }
    }

    /// Why a user header value is no user id (completes "its X-User value …"). Never repeats the value.
    enum UserIDProblem: Error, Equatable, CustomStringConvertible {
        /// Not UTF-8 (NIO's decoder put U+FFFD where the bytes were not): Latin-1 from an RP would become a
        /// lossy id, under which `josé` and `josè` are one user whose cutoffs match neither.
        case notUTF8
        case rule(UserIDRules.Problem)

        var description: String {
            switch self {
            case .notUTF8: "is not UTF-8"
            case .rule(let problem): "\(problem)"
            }
        }
    }

    /// The RP's user id, trimmed of HTTP's optional white space, if it is one tokens can carry: UTF-8, and within
    /// the rules the signer and the verifier hold every id to (``UserIDRules``), so that a bad header fails the
    /// login check (502) instead of the minting (500).
    static func userID(_ value: String) -> Result<String, UserIDProblem> {
        let trimmed = String(Substring(value).trimmingOWS())
        if trimmed.unicodeScalars.contains("\u{FFFD}") {
            return .failure(.notUTF8)
        }
        if let problem = UserIDRules.problem(trimmed) {
            return .failure(.rule(problem))
        }
        return .success(trimmed)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

// MARK: The confirmation page (RFC 8252 §8.6): asking before a login goes to an app nothing vouches for.

extension TokenPageResponder {
    /// The page shown instead of the redirect when the app asks for confirmation (``TokenPageApp/confirm``): it
    /// names the app and the account, and has two buttons.
    ///
    /// - "Continue" posts ``TokenPageConfirmationRequest`` back to the page with a value bound to the confirmation
    ///   cookie set with this answer (``TokenPageConfirmationCookie``, a fresh random value each time), the user,
    ///   app, state and challenge (``TokenPageConfirmationKey``); the page then checks the login again and
    ///   delivers as it would have without the page.
    /// - "Cancel" is the page's existing cancel (`GET ?app=…&cancel=1[&state=…]`), which redirects to the callback
    ///   with `status=unauthorized`.
    ///
    /// The page holds no token and no code: an app that opened it (and could read it, in its own web view) gets
    /// nothing until the user clicks. No script, no style, no image; the CSP lets its forms post to the page only
    /// and be redirected to the app's callback (a browser holds a form's redirects to `form-action` too).
    ///
    /// Its referrer policy is `same-origin`, not the token page's `no-referrer`: under `no-referrer` a browser
    /// sends `Origin: null` with the page's own `POST` (Fetch, "serialize a request origin"), and the click could
    /// not be told from another site's by its `Origin`. The page's address holds nothing secret (the app, the
    /// state, the challenge), and `same-origin` sends it to this site only: never to the app's callback.
    ///
    /// - Parameters:
    ///   - notice: a first paragraph, when the page is shown again (a click that came too soon).
    ///   - reasonCode: the log's reason.
    func confirmationPage(
        app: TokenPageApp,
        request: TokenPageRequest,
        user: String,
        nowMilliseconds: Int64,
        notice: String? = nil,
        reasonCode: String = "token_page_confirm_shown"
    ) -> TokenPageAnswer {
        // Nil only when libcrypto's random number generator fails: no page, as no token.
        guard let cookie = TokenPageConfirmation.freshCookieValue() else { return Self.mintFailed }
        let confirmation = TokenPageConfirmation(
            page: self.page, app: app.name, state: request.state, challenge: request.challenge?.text, user: user,
            cookie: cookie)
        let value = self.confirmationKey.issue(confirmation, nowMilliseconds: nowMilliseconds)
        let appName = HTMLEscaping.escape(app.displayName ?? app.name)
        let account = HTMLEscaping.escape(user)
        var cancelFields = "<input type=\"hidden\" name=\"app\" value=\"\(HTMLEscaping.escape(app.name))\">\n"
        cancelFields += "<input type=\"hidden\" name=\"cancel\" value=\"1\">\n"
        if let state = request.state {
            cancelFields += "<input type=\"hidden\" name=\"state\" value=\"\(HTMLEscaping.escape(state))\">\n"
        }
        let page = """
            <h1>Continue to <span id="app">\(appName)</span>?</h1>
            \(notice.map { "<p id=\"notice\">" + HTMLEscaping.escape($0) + "</p>\n" } ?? "")            <p>You are signed in as <strong id="account">\(account)</strong>. Continuing lets \(appName) use your account.</p>
            <p>Continue only if you have just started signing in to \(appName) yourself. If you did not, cancel: another app may be trying to get into your account.</p>
            <form method="post" action="\(HTMLEscaping.escape(TokenPageConfirmationRequest.target(for: request)))">
            <input type="hidden" name="confirmation" value="\(value)">
            <button type="submit" id="continue">Continue</button>
            </form>
            <form method="get" action="">
            \(cancelFields)<button type="submit" id="cancel">Cancel</button>
            </form>

            """
        let html = TokenPageHTML.document(title: "Continue to \(appName)?", referrer: "same-origin", body: page)
        let body = Array(html.utf8)
        var headers = TokenPageAnswer.securityHeaders()
        headers.replaceOrAdd(
            name: "content-security-policy", value: Self.confirmationPolicy(callback: app.callback))
        headers.replaceOrAdd(name: "referrer-policy", value: "same-origin")
        headers.add(name: "content-type", value: "text/html; charset=utf-8")
        headers.add(name: "content-length", value: String(body.count))
        headers.add(name: "set-cookie", value: TokenPageConfirmationCookie.set(cookie))
        return TokenPageAnswer(status: .ok, headers: headers, body: body, reasonCode: reasonCode)
    }

    /// The confirmation page's CSP: the token page's, except that its forms may go to the page itself and on to
    /// the app's callback, the one place the page redirects them (`form-action` covers a form's redirects).
    static func confirmationPolicy(callback: String) -> String {
        "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self' "
            + Self.formActionSource(callback: callback)
    }

    /// The CSP source for a callback: `scheme:` for a custom scheme, `https://host[:port]` for a claimed link.
    /// A callback is printable ASCII without spaces (checked at load), but only letters, digits and `. - + : [ ]`
    /// ever go into the header: an authority holding anything else (`;` would end the directive) falls back to
    /// `https:`.
    static func formActionSource(callback: String) -> String {
        let colon = callback.firstIndex(of: ":") ?? callback.endIndex
        let scheme = callback[..<colon].lowercased()
        guard scheme == "https" else { return scheme + ":" }
        let rest = callback[colon...].dropFirst(3)  // "://"
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        let safe = !authority.isEmpty
            && authority.utf8.allSatisfy { byte in
                (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ":")
                    || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]")
            }
        return safe ? "https://" + authority.lowercased() : "https:"
    }

    // MARK: The click on "continue"

    /// The refusal of a confirmation before its body is read, or nil when the body should be read.
    ///
    /// - A browser says where a form was submitted from: `Sec-Fetch-Site` other than `same-origin`, or an `Origin`
    ///   other than the page's own (`https://` and the request's `Host`), is another site or app submitting the
    ///   form for the user: `403`. Either field given twice is refused as well. Neither is required (older
    ///   browsers and web views send neither): the confirmation value is the check that always holds.
    /// - Then the body: one `Content-Type`, `application/x-www-form-urlencoded`, and at most
    ///   ``TokenPageConfirmationRequest/maximumBody`` bytes.
    static func confirmationHeadProblem(
        fetchSites: [String],
        origins: [String],
        host: String?,
        contentType: String?,
        contentLength: Int?
    ) -> TokenPageAnswer? {
        if let site = fetchSites.first {
            guard fetchSites.count == 1, site.lowercased() == "same-origin" else {
                return Self.confirmationRefused(
                    .forbidden,
                    "The confirmation came from another site",
                    "The browser says this form was not sent from this site's own page.",
                    reason: "token_page_confirm_cross_site"
                )
            }
        }
        if let origin = origins.first {
            guard origins.count == 1, let host, Self.isOrigin(origin, ofHost: host) else {
                return Self.confirmationRefused(
                    .forbidden,
                    "The confirmation came from another site",
                    "The browser says this form was sent from another origin than this page's.",
                    reason: "token_page_confirm_bad_origin"
                )
            }
        }
        guard contentType == "application/x-www-form-urlencoded" else {
            return Self.confirmationRefused(
                .badRequest,
                "This is not a confirmation",
                "The body must be one application/x-www-form-urlencoded form.",
                reason: "token_page_confirm_bad_request"
            )
        }
        if let contentLength, contentLength > TokenPageConfirmationRequest.maximumBody {
            return Self.confirmationTooLarge
        }
        return nil
    }

    /// Whether `origin` is `https://<host>`: the scheme and host compared without case, a default port (`:443`)
    /// the same as none. The gateway serves the page over TLS only (a trusted proxy must say `https` too).
    static func isOrigin(_ origin: String, ofHost host: String) -> Bool {
        func withoutDefaultPort(_ authority: Substring) -> Substring {
            authority.hasSuffix(":443") ? authority.dropLast(4) : authority
        }
        let lowered = origin.lowercased()
        guard lowered.hasPrefix("https://") else { return false }
        return withoutDefaultPort(lowered.dropFirst(8)) == withoutDefaultPort(Substring(host.lowercased()))
    }

    /// A confirmation body over ``TokenPageConfirmationRequest/maximumBody``, announced or found while reading it.
    static let confirmationTooLarge = Self.confirmationRefused(
        .payloadTooLarge,
        "This is not a confirmation",
        "The body is larger than \(TokenPageConfirmationRequest.maximumBody) bytes.",
        reason: "token_page_confirm_too_large"
    )

    /// The first step of a click on "continue": the request read, then the login checked again, exactly as the
    /// page's `GET` checks it (in `whoami` mode the RP is asked again, and
    /// ``confirm(head:body:whoami:now:nowMilliseconds:)`` goes on). Every answer to a click clears the
    /// confirmation cookie, except the page shown again after a click too soon, which sets a fresh one.
    func confirm(
        head: HTTPRequestHead,
        body: [UInt8],
        cutoffs: CutoffSnapshot,
        now: Int64,
        nowMilliseconds: Int64
    ) -> TokenPageAction {
        let confirmation: TokenPageConfirmationRequest
        switch TokenPageConfirmationRequest.parse(target: head.uri, body: body, apps: self.configuration.apps) {
        case .success(let parsed): confirmation = parsed
        case .failure(let refusal): return .answer(Self.clearingCookie(Self.confirmationRefused(refusal)))
        }
        switch self.checkLogin(head, cutoffs: cutoffs, now: now) {
        case .loggedIn(let user):
            return .answer(
                self.confirmed(confirmation, head: head, user: user, now: now, nowMilliseconds: nowMilliseconds))
        case .notLoggedIn:
            return .answer(Self.clearingCookie(Self.afterPost(self.loginRedirect(confirmation.request))))
        case .failed(let answer):
            return .answer(Self.clearingCookie(answer))
        case .askWhoami(let url, let cookies):
            return .askWhoami(url: url, forwardCookies: cookies)
        }
    }

    /// The second step of a click in `whoami` mode, with what the RP said.
    func confirm(
        head: HTTPRequestHead,
        body: [UInt8],
        whoami: TokenPageWhoamiResult,
        now: Int64,
        nowMilliseconds: Int64
    ) -> TokenPageAnswer {
        let confirmation: TokenPageConfirmationRequest
        switch TokenPageConfirmationRequest.parse(target: head.uri, body: body, apps: self.configuration.apps) {
        case .success(let parsed): confirmation = parsed
        case .failure(let refusal): return Self.clearingCookie(Self.confirmationRefused(refusal))
        }
        switch self.checkLogin(head, whoami: whoami) {
        case .loggedIn(let user):
            switch self.siteValues(whoami) {
            case .success(let values):
                return self.confirmed(
                    confirmation, head: head, user: user, now: now, nowMilliseconds: nowMilliseconds, siteValues: values)
            case .failure(let problem):
                return Self.clearingCookie(Self.siteValueMissing(problem))
            }
        case .notLoggedIn:
            return Self.clearingCookie(Self.afterPost(self.loginRedirect(confirmation.request)))
        case .failed(let answer):
            return Self.clearingCookie(answer)
        case .askWhoami:
            preconditionFailure("the whoami answer is the login check's last step")
        }
    }

    /// A logged-in click: exactly one confirmation cookie, the value checked for it, the user, page, app, state
    /// and challenge, then the delivery the page would have made without asking (`303` to the callback). A click
    /// that came too soon gets the page again, with a fresh cookie and value.
    private func confirmed(
        _ confirmation: TokenPageConfirmationRequest,
        head: HTTPRequestHead,
        user: String,
        now: Int64,
        nowMilliseconds: Int64,
        siteValues: [String: String] = [:]
    ) -> TokenPageAnswer {
        let request = confirmation.request
        // Two cookies of the name (one tossed in under another path) are refused: which would count?
        let cookies = CookieHeader.values(named: TokenPageConfirmationCookie.name, in: head.headers["cookie"])
        guard cookies.count == 1, let cookie = cookies.first, !cookie.isEmpty else {
            return Self.clearingCookie(Self.confirmationWithoutCookie(count: cookies.count))
        }
        let expected = TokenPageConfirmation(
            page: self.page, app: confirmation.app.name, state: request.state, challenge: request.challenge?.text,
            user: user, cookie: String(cookie))
        switch self.confirmationKey.check(
            confirmation.value, for: expected, nowMilliseconds: nowMilliseconds, clockSkew: self.policy.clockSkew)
        {
        case nil:
            return Self.clearingCookie(Self.afterPost(self.deliver(to: user, request: request, now: now)))
        case .tooSoon:
            return self.confirmationPage(
                app: confirmation.app, request: request, user: user, nowMilliseconds: nowMilliseconds,
                notice: Self.tooSoonNotice, reasonCode: "token_page_confirm_too_soon")
        case let refusal?:
            return Self.clearingCookie(Self.confirmationRefused(refusal))
        }
    }

    /// What the page shown again after a click too soon says first.
    static let tooSoonNotice =
        "Your click came too soon after this page appeared, so it did not count. Read the page, then press Continue again."

    /// `answer` with the confirmation cookie cleared (`Max-Age=0`): the answer to a click, which has used it.
    static func clearingCookie(_ answer: TokenPageAnswer) -> TokenPageAnswer {
        var answer = answer
        answer.headers.add(name: "set-cookie", value: TokenPageConfirmationCookie.clear)
        return answer
    }

    /// A redirect answering a `POST` is a `303`: the browser follows it with a `GET`, never posting again.
    static func afterPost(_ answer: TokenPageAnswer) -> TokenPageAnswer {
        var answer = answer
        if answer.status == .found { answer.status = .seeOther }
        return answer
    }

    // MARK: Refusals

    static func confirmationRefused(_ refusal: TokenPageConfirmationRequest.Refusal) -> TokenPageAnswer {
        Self.confirmationRefused(
            .badRequest,
            "This is not a confirmation",
            "The request is not one this page made: " + refusal.description + ".",
            reason: "token_page_confirm_bad_request"
        )
    }

    /// A click without exactly one confirmation cookie: a form submitted by another site (a `SameSite=Strict`
    /// cookie does not come with it), a browser that refuses cookies, a page older than the cookie's lifetime.
    static func confirmationWithoutCookie(count: Int) -> TokenPageAnswer {
        Self.confirmationRefused(
            .forbidden,
            "This confirmation cannot be checked",
            count == 0
                ? "The browser did not send the cookie this page set with it: cookies may be blocked, or the page is too old."
                : "The browser sent the page's cookie more than once.",
            reason: "token_page_confirm_no_cookie"
        )
    }

    static func confirmationRefused(_ refusal: TokenPageConfirmationKey.Refusal) -> TokenPageAnswer {
        let reason = "token_page_confirm_" + refusal.rawValue
        switch refusal {
        case .malformed:
            return Self.confirmationRefused(
                .badRequest, "This is not a confirmation", "The confirmation is malformed.", reason: reason)
        case .mismatch:
            return Self.confirmationRefused(
                .forbidden,
                "This confirmation is not yours",
                "It was not made by this page for this browser's login and this sign-in.",
                reason: reason
            )
        case .expired:
            return Self.confirmationRefused(
                .badRequest,
                "The confirmation has expired",
                "The page was shown more than \(TokenPageConfirmationKey.lifetime / 60) minutes ago.",
                reason: reason
            )
        case .issuedInFuture:
            return Self.confirmationRefused(
                .badRequest, "The confirmation is not valid yet", "It was made later than now.", reason: reason)
        case .tooSoon:
            // ``confirmed`` shows the page again instead; this is only for completeness of the switch.
            return Self.confirmationRefused(
                .badRequest, "The click came too soon", "The page had only just appeared.", reason: reason)
        }
    }

    /// A refusal page: what went wrong, and what to do (start over from the app). Fixed text only.
    static func confirmationRefused(
        _ status: HTTPResponseStatus,
        _ title: String,
        _ detail: String,
        reason: String
    ) -> TokenPageAnswer {
        .page(
            status,
            title: title,
            paragraphs: [detail, "Nothing was sent to the app. To sign in, start again from the app."],
            reasonCode: reason
        )
    }
}

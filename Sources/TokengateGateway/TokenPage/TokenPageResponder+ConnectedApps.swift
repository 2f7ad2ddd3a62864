//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengateHTTP
import TokengateTokens

// MARK: The connected-apps page: the user's devices, each with a button to revoke it, and "disable mobile apps".

extension TokenPageResponder {
    /// The ``TokengateTokens/TokenPageConfirmation/app`` of the page's buttons: not an app name (those hold no
    /// space), so a value from the page never confirms an app's login, nor one of a login this page.
    static let connectedAppsBinding = "connected apps"

    /// Whether `target` (a request's path and query) is the connected-apps page of this route.
    func isConnectedApps(target: String) -> Bool {
        guard let path = self.configuration.connectedAppsPath else { return false }
        let end = target.firstIndex(of: "?") ?? target.endIndex
        return target[..<end] == path
    }

    // MARK: GET

    /// The first step of the page's `GET`/`HEAD`: the token page's login check; logged in, the store is asked for
    /// the user's devices (``TokenPageAction/listDevices(user:)``), then ``connectedAppsPage(head:user:devices:nowMilliseconds:)``.
    func connectedApps(head: HTTPRequestHead, cutoffs: CutoffSnapshot, now: Int64) -> TokenPageAction {
        if let refusal = Self.connectedAppsMethodProblem(head) { return .answer(refusal) }
        return self.connectedAppsLogin(self.checkLogin(head, cutoffs: cutoffs, now: now), head: head, posted: false)
    }

    /// The second step in `whoami` mode, with what the RP said.
    func connectedApps(head: HTTPRequestHead, whoami: TokenPageWhoamiResult) -> TokenPageAction {
        if let refusal = Self.connectedAppsMethodProblem(head) { return .answer(refusal) }
        return self.connectedAppsLogin(self.checkLogin(head, whoami: whoami), head: head, posted: false)
    }

    private static func connectedAppsMethodProblem(_ head: HTTPRequestHead) -> TokenPageAnswer? {
        switch head.method {
        case .GET, .HEAD: nil
        default:
            .error(
                .methodNotAllowed, error: "method_not_allowed", description: "the connected-apps page answers GET and POST",
                reasonCode: "connected_apps_method", extraHeaders: [("allow", "GET, HEAD, POST")])
        }
    }

    private func connectedAppsLogin(_ check: TokenPageLoginCheck, head: HTTPRequestHead, posted: Bool) -> TokenPageAction {
        switch check {
        case .loggedIn(let user):
            return .listDevices(user: user)
        case .notLoggedIn:
            let request = TokenPageRequest(
                isHead: head.method == .HEAD, returnAddress: SameSiteReturnPath.validate(self.connectedAppsPath),
                app: nil, cancel: false, state: nil, challenge: nil)
            let redirect = self.loginRedirect(request)
            return .answer(posted ? Self.clearingCookie(Self.afterPost(redirect)) : redirect)
        case .failed(let answer):
            return .answer(posted ? Self.clearingCookie(answer) : answer)
        case .askWhoami(let url, let cookies):
            return .askWhoami(url: url, forwardCookies: cookies)
        }
    }

    private var connectedAppsPath: String { self.configuration.connectedAppsPath ?? "/" }

    /// The page, with the devices the store listed (nil: it could not, `503`).
    ///
    /// Every device with its app (the display name of a configured app, else the name as stored), its id, when it
    /// got its first and its latest token, and a "revoke" button unless it is revoked already; then "disable mobile
    /// apps". Each button is a form posting to the page with its own confirmation value, bound to the double-submit
    /// cookie set with this answer (``TokenPageConfirmationCookie``, a fresh one each time), the user and the
    /// button's change (``ConnectedAppsChange/binding``), as the token page's confirmation is. Everything from the
    /// store is escaped. No script, no style; the CSP lets forms post to the page only.
    func connectedAppsPage(head: HTTPRequestHead, user: String, devices: [DeviceRecord]?, nowMilliseconds: Int64)
        -> TokenPageAnswer
    {
        guard let devices else { return Self.connectedAppsUnavailable }
        guard let cookie = TokenPageConfirmation.freshCookieValue() else { return Self.mintFailed }
        func form(_ change: ConnectedAppsChange, label: String, id: String) -> String {
            let value = self.confirmationKey.issue(
                TokenPageConfirmation(
                    page: self.page, app: Self.connectedAppsBinding, state: change.binding, challenge: nil, user: user,
                    cookie: cookie),
                nowMilliseconds: nowMilliseconds)
            var fields = "<input type=\"hidden\" name=\"confirmation\" value=\"\(HTMLEscaping.escape(value))\">"
            switch change {
            case .revoke(let device):
                fields += "<input type=\"hidden\" name=\"action\" value=\"revoke\">"
                fields += "<input type=\"hidden\" name=\"device\" value=\"\(HTMLEscaping.escape(device.text))\">"
            case .disableMobileApps:
                fields += "<input type=\"hidden\" name=\"action\" value=\"disable_mobile_apps\">"
            }
            return "<form method=\"post\" action=\"\(HTMLEscaping.escape(self.connectedAppsPath))\">\(fields)"
                + "<button type=\"submit\" id=\"\(HTMLEscaping.escape(id))\">\(HTMLEscaping.escape(label))</button></form>"
        }
        var body = "<h1>Connected apps</h1>\n"
        if let notice = ConnectedAppsRequest.notice(target: head.uri) {
            body += "<p id=\"notice\">" + HTMLEscaping.escape(notice.text) + "</p>\n"
        }
        body += "<p>Signed in as <strong id=\"account\">\(HTMLEscaping.escape(user))</strong>.</p>\n"
        if devices.isEmpty {
            body += "<p id=\"no-devices\">No app has signed in to your account.</p>\n"
        } else {
            body += "<table id=\"devices\">\n<tr><th>App</th><th>Device</th><th>Signed in</th><th>Last refreshed</th><th></th></tr>\n"
            for device in devices {
                let app = self.configuration.apps.first { $0.name == device.app }.map { $0.displayName ?? $0.name } ?? device.app
                let id = device.device.text
                body += "<tr class=\"device\" data-device=\"\(HTMLEscaping.escape(id))\">"
                body += "<td class=\"app\">\(HTMLEscaping.escape(app))</td>"
                body += "<td class=\"id\"><code>\(HTMLEscaping.escape(id))</code></td>"
                body += "<td class=\"created\">\(HTMLEscaping.escape(UTCTimeText.format(device.createdAt)))</td>"
                let refreshed = device.lastUsedAt.flatMap { $0 > device.createdAt ? UTCTimeText.format($0) : nil } ?? "never"
                body += "<td class=\"refreshed\">\(HTMLEscaping.escape(refreshed))</td>"
                if let revokedAt = device.revokedAt {
                    body += "<td class=\"revoked\">signed out \(HTMLEscaping.escape(UTCTimeText.format(revokedAt)))</td>"
                } else {
                    body += "<td>" + form(.revoke(device.device), label: "Sign out", id: "revoke-" + id) + "</td>"
                }
                body += "</tr>\n"
            }
            body += "</table>\n"
        }
        body += "<p>Lost a phone, or do not know an app here? Sign it out above. To sign out every app at once "
        body += "(your browser sessions stay signed in):</p>\n"
        body += form(.disableMobileApps, label: "Disable mobile apps", id: "disable-mobile-apps") + "\n"

        let html = TokenPageHTML.document(title: "Connected apps", referrer: "same-origin", body: body)
        let bytes = Array(html.utf8)
        var headers = TokenPageAnswer.securityHeaders()
        // Its forms post to the page itself; under `no-referrer` a browser would send `Origin: null` with them
        // (see ``confirmationPage(app:request:user:nowMilliseconds:notice:reasonCode:)``).
        headers.replaceOrAdd(name: "content-security-policy", value: Self.connectedAppsPolicy)
        headers.replaceOrAdd(name: "referrer-policy", value: "same-origin")
        headers.add(name: "content-type", value: "text/html; charset=utf-8")
        headers.add(name: "content-length", value: String(bytes.count))
        headers.add(name: "set-cookie", value: TokenPageConfirmationCookie.set(cookie))
        return TokenPageAnswer(status: .ok, headers: headers, body: bytes, reasonCode: "connected_apps_shown")
    }

    static let connectedAppsPolicy = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

    // MARK: POST

    /// The first step of a button: the body read, then the login checked again exactly as for the page (the RP
    /// asked again in `whoami` mode, then ``changeDevices(head:body:whoami:nowMilliseconds:)``). The head's
    /// checks (`Sec-Fetch-Site`, `Origin`, the body's type and size) are the confirmation's
    /// (``confirmationHeadProblem(fetchSites:origins:host:contentType:contentLength:)``), made before the body is read.
    func changeDevices(head: HTTPRequestHead, body: [UInt8], cutoffs: CutoffSnapshot, now: Int64, nowMilliseconds: Int64)
        -> TokenPageAction
    {
        let request: ConnectedAppsRequest
        switch ConnectedAppsRequest.parse(body: body) {
        case .success(let parsed): request = parsed
        case .failure(let refusal): return .answer(Self.clearingCookie(Self.connectedAppsRefused(refusal)))
        }
        switch self.checkLogin(head, cutoffs: cutoffs, now: now) {
        case .loggedIn(let user):
            return self.checkedChange(request, head: head, user: user, nowMilliseconds: nowMilliseconds)
        case let check:
            return self.connectedAppsLogin(check, head: head, posted: true)
        }
    }

    /// The second step of a button in `whoami` mode.
    func changeDevices(head: HTTPRequestHead, body: [UInt8], whoami: TokenPageWhoamiResult, nowMilliseconds: Int64)
        -> TokenPageAction
    {
        let request: ConnectedAppsRequest
        switch ConnectedAppsRequest.parse(body: body) {
        case .success(let parsed): request = parsed
        case .failure(let refusal): return .answer(Self.clearingCookie(Self.connectedAppsRefused(refusal)))
        }
        switch self.checkLogin(head, whoami: whoami) {
        case .loggedIn(let user):
            return self.checkedChange(request, head: head, user: user, nowMilliseconds: nowMilliseconds)
        case .askWhoami:
            preconditionFailure("the whoami answer is the login check's last step")
        case let check:
            return self.connectedAppsLogin(check, head: head, posted: true)
        }
    }

    /// A logged-in button: exactly one confirmation cookie, and the value checked for it, the user and the change.
    /// A click too soon or too late goes back to the page with a notice and changes nothing.
    private func checkedChange(_ request: ConnectedAppsRequest, head: HTTPRequestHead, user: String, nowMilliseconds: Int64)
        -> TokenPageAction
    {
        let cookies = CookieHeader.values(named: TokenPageConfirmationCookie.name, in: head.headers["cookie"])
        guard cookies.count == 1, let cookie = cookies.first, !cookie.isEmpty else {
            return .answer(
                Self.clearingCookie(
                    Self.connectedAppsRefusal(
                        .forbidden, "This button cannot be checked",
                        cookies.count == 0
                            ? "The browser did not send the cookie this page set with it: cookies may be blocked, or the button is on another site's page."
                            : "The browser sent the page's cookie more than once.",
                        reason: "connected_apps_no_cookie")))
        }
        let expected = TokenPageConfirmation(
            page: self.page, app: Self.connectedAppsBinding, state: request.change.binding, challenge: nil, user: user,
            cookie: String(cookie))
        switch self.confirmationKey.check(
            request.confirmation, for: expected, nowMilliseconds: nowMilliseconds, clockSkew: self.policy.clockSkew)
        {
        case nil:
            return .changeDevices(user: user, change: request.change)
        case .tooSoon:
            return .answer(self.backToConnectedApps(.tooSoon, reasonCode: "connected_apps_too_soon"))
        case .expired:
            return .answer(self.backToConnectedApps(.expired, reasonCode: "connected_apps_expired"))
        case .mismatch?:
            return .answer(
                Self.clearingCookie(
                    Self.connectedAppsRefusal(
                        .forbidden, "This button is not yours",
                        "It was not made by this page for this browser and this account.",
                        reason: "connected_apps_mismatch")))
        case let refusal?:
            return .answer(
                Self.clearingCookie(
                    Self.connectedAppsRefusal(
                        .badRequest, "This is not a button of the page", "Its confirmation is malformed.",
                        reason: "connected_apps_" + refusal.rawValue)))
        }
    }

    /// What the store did with a button's change: `303` back to the page, which says what happened.
    func devicesChanged(_ change: ConnectedAppsChange, user: String, outcome: ConnectedAppsChangeOutcome) -> TokenPageAnswer {
        switch outcome {
        case .done:
            switch change {
            case .revoke: return self.backToConnectedApps(.revoked, reasonCode: "connected_apps_device_revoked")
            case .disableMobileApps: return self.backToConnectedApps(.disabled, reasonCode: "connected_apps_disabled")
            }
        case .unknownDevice:
            return Self.clearingCookie(
                .page(
                    .notFound, title: "No such device",
                    paragraphs: ["Your account has no such device. Nothing was changed."],
                    reasonCode: "connected_apps_unknown_device"))
        case .failed:
            return Self.clearingCookie(Self.connectedAppsUnavailable)
        }
    }

    /// `303` to the page with `?done=<notice>`: the browser loads the page again with a `GET` (a reload never
    /// posts the button again), which shows the notice.
    private func backToConnectedApps(_ notice: ConnectedAppsRequest.Notice, reasonCode: String) -> TokenPageAnswer {
        var answer = TokenPageAnswer.redirect(to: self.connectedAppsPath + "?done=" + notice.rawValue, reasonCode: reasonCode)
        answer.status = .seeOther
        return Self.clearingCookie(answer)
    }

    // MARK: Refusals

    static let connectedAppsUnavailable = TokenPageAnswer.page(
        .serviceUnavailable, title: "Connected apps are not available right now",
        paragraphs: ["The list of your apps cannot be read or changed at the moment. Nothing was changed; try again shortly."],
        reasonCode: "connected_apps_store_failed")

    static func connectedAppsRefused(_ refusal: ConnectedAppsRequest.Refusal) -> TokenPageAnswer {
        .page(
            .badRequest, title: "This is not a button of the page",
            paragraphs: ["The request is not one this page made: " + refusal.description + ".", "Nothing was changed."],
            reasonCode: "connected_apps_bad_request")
    }

    /// A refusal page: what went wrong, and that nothing changed. Fixed text only.
    private static func connectedAppsRefusal(
        _ status: HTTPResponseStatus, _ title: String, _ detail: String, reason: String
    ) -> TokenPageAnswer {
        .page(status, title: title, paragraphs: [detail, "Nothing was changed. Open your connected apps again to try once more."], reasonCode: reason)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TokengateConfig
import TokengateHTTP
import TokengateTokens

@testable import TokengateGateway

/// The connected-apps page as values: who it lists devices for, what the page shows and escapes, and what a button
/// must carry (the token page confirmation's rules: same origin, the double-submit cookie, a value bound to the
/// user and to that button's change).
@Suite struct ConnectedAppsResponderTests {
    static let now: Int64 = 1_700_000_000
    static let path = "/token/apps"
    static let phone = DeviceID(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
    static let tablet = DeviceID(high: 0x1111_2222_3333_4444, low: 0x5555_6666_7777_8888)
    let signer: TokenSigner
    let verifier: TokenVerifier

    init() throws {
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-connected-apps")
        self.signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        self.verifier = TokenVerifier(keys: try KeySet(jwks: Array(keys.publicJWKS.utf8)))
    }

    private func responder(login: TokenPageLogin = .sessionCookie("session")) -> TokenPageResponder {
        TokenPageResponder(
            configuration: TokenPageConfiguration(
                login: login, loginURL: "/login",
                apps: [TokenPageApp(name: "ios", callback: "myapp://token", displayName: "Example <for> iOS")],
                connectedAppsPath: Self.path),
            signer: self.signer, verifier: self.verifier, page: "/token", redeemedCodes: .forTest(), mintsDevices: true)
    }

    private func head(_ uri: String = path, method: HTTPMethod = .GET, cookie: String?) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.add(name: "host", value: "example.com")
        if let cookie { headers.add(name: "cookie", value: cookie) }
        return HTTPRequestHead(version: .http1_1, method: method, uri: uri, headers: headers)
    }

    private func session(_ user: String = "alice") throws -> String {
        "session=" + (try self.signer.mint(TokenClaims(subject: user, issuedAt: Self.now - 60, apiOnly: false)))
    }

    private static let devices = [
        DeviceRecord(device: phone, user: "alice", app: "ios", createdAt: now - 86_400, tokensExpireBy: nil, lastUsedAt: now - 600),
        DeviceRecord(device: tablet, user: "alice", app: "<img src=x onerror=alert(1)>", createdAt: now - 3600, tokensExpireBy: nil),
        DeviceRecord(
            device: DeviceID(high: 9, low: 9), user: "alice", app: DeviceRecord.copiedByHand, createdAt: now - 7200,
            tokensExpireBy: nil, revokedAt: now - 60),
    ]

    /// The page for alice, shown at `now` (its values are made then).
    private func page(user: String = "alice", uri: String = path) throws -> TokenPageAnswer {
        let responder = self.responder()
        let head = self.head(uri, cookie: try self.session(user))
        #expect(responder.connectedApps(head: head, cutoffs: .empty, now: Self.now) == .listDevices(user: user))
        return responder.connectedAppsPage(head: head, user: user, devices: Self.devices, nowMilliseconds: Self.now * 1000)
    }

    private func html(_ answer: TokenPageAnswer) -> String { String(decoding: answer.body, as: UTF8.self) }

    /// The hidden fields of the form whose button has this id.
    private func form(_ id: String, in answer: TokenPageAnswer) throws -> [String: String] {
        let html = self.html(answer)
        let button = try #require(html.range(of: "id=\"\(id)\""))
        let start = try #require(html.range(of: "<form", options: .backwards, range: html.startIndex..<button.lowerBound))
        var fields: [String: String] = [:]
        var rest = html[start.upperBound..<button.lowerBound]
        while let input = rest.range(of: "name=\"") {
            let name = String(rest[input.upperBound...].prefix { $0 != "\"" })
            let value = try #require(rest[input.upperBound...].range(of: "value=\""))
            fields[name] = String(rest[value.upperBound...].prefix { $0 != "\"" })
            rest = rest[value.upperBound...]
        }
        return fields
    }

    private func body(_ fields: [String: String]) -> [UInt8] {
        Array(fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&").utf8)
    }

    private func confirmCookie(in answer: TokenPageAnswer) throws -> String {
        let set = try #require(answer.headers["set-cookie"].first { $0.hasPrefix(TokenPageConfirmationCookie.name + "=") })
        return String(set.prefix { $0 != ";" })
    }

    private func post(
        _ body: [UInt8], user: String = "alice", confirmCookie: String?, atSecond second: Int64 = now + 2
    ) throws -> TokenPageAction {
        let cookie = [try self.session(user), confirmCookie].compactMap { $0 }.joined(separator: "; ")
        return self.responder().changeDevices(
            head: self.head(method: .POST, cookie: cookie), body: body, cutoffs: .empty, now: second,
            nowMilliseconds: second * 1000)
    }

    private func answer(_ action: TokenPageAction) -> TokenPageAnswer? {
        if case .answer(let answer) = action { return answer }
        Issue.record("expected an answer, got \(action)")
        return nil
    }

    @Test("only the configured path is the page; a query does not change that")
    func thePath() {
        let responder = self.responder()
        #expect(responder.isConnectedApps(target: "/token/apps"))
        #expect(responder.isConnectedApps(target: "/token/apps?done=revoked"))
        #expect(!responder.isConnectedApps(target: "/token/apps/"))
        #expect(!responder.isConnectedApps(target: "/token/appsx"))
        #expect(!responder.isConnectedApps(target: "/token"))
        let without = TokenPageResponder(
            configuration: TokenPageConfiguration(login: .sessionCookie("session"), loginURL: "/login"),
            signer: self.signer, verifier: self.verifier, page: "/token", redeemedCodes: .forTest())
        #expect(!without.isConnectedApps(target: "/token/apps"))
    }

    @Test("not logged in: the login, which sends the browser back to the page; an api token is no login")
    func notLoggedIn() throws {
        let responder = self.responder()
        let redirect = try #require(self.answer(responder.connectedApps(head: self.head(cookie: nil), cutoffs: .empty, now: Self.now)))
        #expect(redirect.status == .found)
        #expect(redirect.headers["location"] == ["/login?return_to=%2Ftoken%2Fapps"])
        #expect(redirect.headers["cache-control"] == ["no-store"])
        let api = try self.signer.mint(TokenClaims(subject: "alice", issuedAt: Self.now - 60, apiOnly: true))
        let refused = try #require(
            self.answer(responder.connectedApps(head: self.head(cookie: "session=" + api), cutoffs: .empty, now: Self.now)))
        #expect(refused.status == .found)
        // A user cut off since the session began is not logged in either.
        let cutoffs = CutoffSnapshot(globalRevokedBefore: nil, users: [CutoffUserKey("alice"): UserCutoffs(revokedBefore: Self.now)])
        let cut = try #require(
            self.answer(responder.connectedApps(head: self.head(cookie: try self.session()), cutoffs: cutoffs, now: Self.now)))
        #expect(cut.status == .found)
        let post = try #require(self.answer(self.responder().changeDevices(
            head: self.head(method: .POST, cookie: nil), body: Array("action=disable_mobile_apps&confirmation=x".utf8),
            cutoffs: .empty, now: Self.now, nowMilliseconds: Self.now * 1000)))
        #expect(post.status == .seeOther, "after a POST, the login is a GET")
        #expect(post.headers["location"] == ["/login?return_to=%2Ftoken%2Fapps"])
        let method = try #require(self.answer(responder.connectedApps(
            head: self.head(method: .PUT, cookie: try self.session()), cutoffs: .empty, now: Self.now)))
        #expect(method.status == .methodNotAllowed)
    }

    @Test("the page lists every device with its app, times and a button, escapes the store's text, and sends the strict headers")
    func thePage() throws {
        let page = try self.page(user: "<b>alice</b>")
        #expect(page.status == .ok)
        #expect(page.reasonCode == "connected_apps_shown")
        #expect(page.headers["cache-control"] == ["no-store"])
        #expect(page.headers["x-frame-options"] == ["DENY"])
        #expect(page.headers["x-content-type-options"] == ["nosniff"])
        #expect(page.headers["referrer-policy"] == ["same-origin"])
        let csp = try #require(page.headers["content-security-policy"].first)
        #expect(csp.contains("frame-ancestors 'none'") && csp.contains("default-src 'none'") && csp.contains("form-action 'self'"))
        #expect(page.headers["content-length"] == [String(page.body.count)])
        let cookie = try #require(page.headers["set-cookie"].first)
        #expect(cookie.hasPrefix("__Host-tokengate-confirm=") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"))

        let html = self.html(page)
        #expect(html.contains("<strong id=\"account\">&lt;b&gt;alice&lt;/b&gt;</strong>"))
        #expect(html.contains("<td class=\"app\">Example &lt;for&gt; iOS</td>"), "a configured app by its display name")
        #expect(html.contains("<td class=\"app\">&lt;img src=x onerror=alert(1)&gt;</td>"), "the store's app name, escaped")
        #expect(!html.contains("<img") && !html.contains("<script") && !html.contains("<b>"))
        #expect(html.contains("<td class=\"created\">2023-11-13 22:13 UTC</td>"))
        #expect(html.contains("<td class=\"refreshed\">2023-11-14 22:03 UTC</td>"))
        #expect(html.contains("<td class=\"refreshed\">never</td>"))
        #expect(html.contains("id=\"revoke-\(Self.phone.text)\"") && html.contains("id=\"revoke-\(Self.tablet.text)\""))
        #expect(!html.contains("id=\"revoke-\(DeviceID(high: 9, low: 9).text)\""), "a revoked device has no button")
        #expect(html.contains("<td class=\"revoked\">signed out 2023-11-14 22:12 UTC</td>"))
        #expect(html.contains("id=\"disable-mobile-apps\""))
        #expect(!html.contains("tokengate-token:"), "no token on the page")

        let fields = try self.form("revoke-\(Self.phone.text)", in: page)
        #expect(fields["action"] == "revoke" && fields["device"] == Self.phone.text)
        let other = try self.form("revoke-\(Self.tablet.text)", in: page)
        #expect(fields["confirmation"] != other["confirmation"], "each button's value is its own")
    }

    @Test("a store that cannot list answers 503, and no store at all the same")
    func storeFailure() throws {
        let responder = self.responder()
        let head = self.head(cookie: try self.session())
        let answer = responder.connectedAppsPage(head: head, user: "alice", devices: nil, nowMilliseconds: Self.now * 1000)
        #expect(answer.status == .serviceUnavailable)
        #expect(answer.headers["set-cookie"].isEmpty)
        #expect(responder.devicesChanged(.disableMobileApps, user: "alice", outcome: .failed).status == .serviceUnavailable)
    }

    @Test("a button with its value and cookie, a second later, asks the store for that change of that user")
    func aButton() throws {
        let page = try self.page()
        let cookie = try self.confirmCookie(in: page)
        let revoke = try self.form("revoke-\(Self.phone.text)", in: page)
        #expect(try self.post(self.body(revoke), confirmCookie: cookie) == .changeDevices(user: "alice", change: .revoke(Self.phone)))
        let disable = try self.form("disable-mobile-apps", in: page)
        #expect(try self.post(self.body(disable), confirmCookie: cookie) == .changeDevices(user: "alice", change: .disableMobileApps))

        let done = self.responder().devicesChanged(.revoke(Self.phone), user: "alice", outcome: .done)
        #expect(done.status == .seeOther)
        #expect(done.headers["location"] == ["/token/apps?done=revoked"])
        #expect(done.headers["set-cookie"] == [TokenPageConfirmationCookie.clear])
        let again = try self.page(uri: "/token/apps?done=revoked")
        #expect(self.html(again).contains("<p id=\"notice\">The device was signed out."))
        let unknown = self.responder().devicesChanged(.revoke(Self.phone), user: "alice", outcome: .unknownDevice)
        #expect(unknown.status == .notFound)
        // A notice is one of the page's own texts, never the query's.
        let hostile = try self.page(uri: "/token/apps?done=%3Cscript%3E")
        #expect(!self.html(hostile).contains("id=\"notice\"") && !self.html(hostile).contains("script"))
    }

    @Test("a click in the same second as the page is too soon: back to the page, nothing changed")
    func tooSoon() throws {
        let page = try self.page()
        let revoke = try self.form("revoke-\(Self.phone.text)", in: page)
        let answer = try #require(self.answer(try self.post(self.body(revoke), confirmCookie: try self.confirmCookie(in: page), atSecond: Self.now)))
        #expect(answer.status == .seeOther)
        #expect(answer.headers["location"] == ["/token/apps?done=too_soon"])
        let late = try #require(self.answer(try self.post(
            self.body(revoke), confirmCookie: try self.confirmCookie(in: page), atSecond: Self.now + TokenPageConfirmationKey.lifetime + 1)))
        #expect(late.headers["location"] == ["/token/apps?done=expired"])
    }

    @Test("attacks: no cookie, another browser's cookie, another button's value, another user, no value, two values")
    func attacks() throws {
        let page = try self.page()
        let cookie = try self.confirmCookie(in: page)
        let revoke = try self.form("revoke-\(Self.phone.text)", in: page)

        // A cross-site form carries no SameSite=Strict cookie.
        let noCookie = try #require(self.answer(try self.post(self.body(revoke), confirmCookie: nil)))
        #expect(noCookie.status == .forbidden)
        #expect(noCookie.reasonCode == "connected_apps_no_cookie")
        #expect(noCookie.headers["content-security-policy"].first?.contains("frame-ancestors 'none'") == true)
        // The attacker's own page and cookie, with the victim's value (or the other way round).
        let attackerPage = try self.page()
        let foreign = try #require(self.answer(try self.post(self.body(revoke), confirmCookie: try self.confirmCookie(in: attackerPage))))
        #expect(foreign.status == .forbidden)
        #expect(foreign.reasonCode == "connected_apps_mismatch")
        // A value from one button for another device or for "disable mobile apps".
        var swapped = revoke
        swapped["device"] = Self.tablet.text
        #expect(try self.answer(self.post(self.body(swapped), confirmCookie: cookie))?.reasonCode == "connected_apps_mismatch")
        var disable = revoke
        disable["action"] = "disable_mobile_apps"
        disable["device"] = nil
        #expect(try self.answer(self.post(self.body(disable), confirmCookie: cookie))?.reasonCode == "connected_apps_mismatch")
        // Another user logged in with alice's page and cookie.
        #expect(try self.answer(self.post(self.body(revoke), user: "bob", confirmCookie: cookie))?.reasonCode == "connected_apps_mismatch")
        // No value, an empty one, two of them, two cookies.
        var missing = revoke
        missing["confirmation"] = nil
        #expect(try self.answer(self.post(self.body(missing), confirmCookie: cookie))?.reasonCode == "connected_apps_bad_request")
        missing["confirmation"] = ""
        #expect(try self.answer(self.post(self.body(missing), confirmCookie: cookie))?.reasonCode == "connected_apps_bad_request")
        let twice = self.body(revoke) + Array("&device=\(Self.tablet.text)".utf8)
        #expect(try self.answer(self.post(twice, confirmCookie: cookie))?.status == .badRequest)
        let twoCookies = try #require(self.answer(try self.post(self.body(revoke), confirmCookie: cookie + "; " + cookie)))
        #expect(twoCookies.reasonCode == "connected_apps_no_cookie")
        var garbage = revoke
        garbage["confirmation"] = "AAAA"
        #expect(try self.answer(self.post(self.body(garbage), confirmCookie: cookie))?.reasonCode == "connected_apps_malformed")
        // Every refusal clears the cookie and changes nothing.
        #expect(noCookie.headers["set-cookie"] == [TokenPageConfirmationCookie.clear])
    }

    @Test("the head checks of the confirmation: another site's Sec-Fetch-Site or Origin is refused before the body")
    func crossSiteHeads() {
        func problem(site: [String] = [], origin: [String] = [], type: String? = "application/x-www-form-urlencoded") -> TokenPageAnswer? {
            TokenPageResponder.confirmationHeadProblem(fetchSites: site, origins: origin, host: "example.com", contentType: type, contentLength: 100)
        }
        #expect(problem(site: ["same-origin"], origin: ["https://example.com"]) == nil)
        #expect(problem(site: ["cross-site"])?.status == .forbidden)
        #expect(problem(site: ["same-site"])?.status == .forbidden)
        #expect(problem(origin: ["https://evil.example"])?.status == .forbidden)
        #expect(problem(origin: ["null"])?.status == .forbidden)
        #expect(problem(type: "text/plain")?.status == .badRequest)
    }

    @Test("whoami mode: the RP is asked without the page's own cookies, then the store")
    func whoami() throws {
        let responder = self.responder(login: .whoami(WhoamiConfiguration(url: "http://127.0.0.1:9/whoami", userHeader: "user")))
        let head = self.head(cookie: "site=abc; __Host-tokengate-confirm=secret")
        guard case .askWhoami(_, let cookies) = responder.connectedApps(head: head, cutoffs: .empty, now: Self.now) else {
            Issue.record("expected a whoami question")
            return
        }
        #expect(cookies == "site=abc")
        #expect(responder.connectedApps(head: head, whoami: .answered(status: 200, userHeaderValues: ["alice"])) == .listDevices(user: "alice"))
        let login = try #require(self.answer(responder.connectedApps(head: head, whoami: .answered(status: 401, userHeaderValues: []))))
        #expect(login.status == .found)
        let broken = try #require(self.answer(responder.connectedApps(head: head, whoami: .failed)))
        #expect(broken.status == .badGateway)
    }

    @Test func utcTimes() {
        #expect(UTCTimeText.format(0) == "1970-01-01 00:00 UTC")
        #expect(UTCTimeText.format(951_782_400) == "2000-02-29 00:00 UTC")
        #expect(UTCTimeText.format(1_700_000_000) == "2023-11-14 22:13 UTC")
        #expect(UTCTimeText.format(-1) == "1969-12-31 23:59 UTC")
    }
}

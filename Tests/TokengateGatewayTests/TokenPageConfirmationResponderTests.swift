//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOHTTP1
import Testing
import TokengateConfig
import TokengateHTTP
import TokengateTokens

@testable import TokengateGateway

/// The confirmation page (RFC 8252 §8.6) as plain values: which apps get it, what it shows and holds, and what a
/// click on "continue" must carry.
@Suite struct TokenPageConfirmationResponderTests {
    static let now: Int64 = 1_700_000_000
    static let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    static let apps = [
        TokenPageApp(name: "ios", callback: "myapp://token", pkce: .required, displayName: "Example <for> \"iOS\""),
        TokenPageApp(name: "old", callback: "myapp://old"),
        TokenPageApp(name: "trusted", callback: "myapp://trusted", confirm: false),
        TokenPageApp(name: "web", callback: "https://app.example.com/cb"),
        TokenPageApp(name: "web-asked", callback: "https://app.example.com/cb", confirm: true),
    ]
    let signer: TokenSigner
    let verifier: TokenVerifier

    init() throws {
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-confirm")
        self.signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        self.verifier = TokenVerifier(keys: try KeySet(jwks: Array(keys.publicJWKS.utf8)))
    }

    private func responder(login: TokenPageLogin = .sessionCookie("session"), page: String = "/token") -> TokenPageResponder {
        TokenPageResponder(
            configuration: TokenPageConfiguration(login: login, loginURL: "/login", apps: Self.apps),
            signer: self.signer, verifier: self.verifier, page: page, redeemedCodes: .forTest())
    }

    private func head(_ uri: String, method: HTTPMethod = .GET, cookie: String?) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.add(name: "host", value: "example.com")
        if let cookie { headers.add(name: "cookie", value: cookie) }
        return HTTPRequestHead(version: .http1_1, method: method, uri: uri, headers: headers)
    }

    private func session(_ user: String = "alice") throws -> String {
        try self.signer.mint(TokenClaims(subject: user, issuedAt: Self.now - 60, apiOnly: false))
    }

    private func answer(_ action: TokenPageAction) -> TokenPageAnswer? {
        if case .answer(let answer) = action { return answer }
        Issue.record("expected an answer, got \(action)")
        return nil
    }

    /// The value in the page's "continue" form.
    private func value(in answer: TokenPageAnswer) throws -> String {
        let html = String(decoding: answer.body, as: UTF8.self)
        let start = try #require(html.range(of: "name=\"confirmation\" value=\""))
        return String(html[start.upperBound...].prefix { $0 != "\"" })
    }

    /// The confirmation cookie the page set, as a `Cookie` pair (`__Host-tokengate-confirm=…`).
    private func confirmCookie(in answer: TokenPageAnswer) throws -> String {
        let set = try #require(answer.headers["set-cookie"].first { $0.hasPrefix(TokenPageConfirmationCookie.name + "=") })
        return String(set.prefix { $0 != ";" })
    }

    static let pageTarget = "/token?app=ios&state=S1&code_challenge=\(challenge)&code_challenge_method=S256"
    static let postTarget = pageTarget + "&confirm=1"

    @Test("a custom-scheme app gets the page, which names the app and the account, holds no code and sets the confirmation cookie")
    func thePage() throws {
        let responder = self.responder()
        let cookie = "session=" + (try self.session("<b>alice</b>"))
        let page = try #require(self.answer(responder.respond(to: self.head(Self.pageTarget, cookie: cookie), cutoffs: .empty, now: Self.now)))
        #expect(page.status == .ok)
        #expect(page.reasonCode == "token_page_confirm_shown")
        #expect(page.user == nil, "nothing was minted")
        #expect(page.headers["location"].isEmpty)
        // One cookie: the double-submit cookie, 32 random bytes, `__Host-`, strict, as long as the value lives.
        #expect(page.headers["set-cookie"].count == 1)
        let setCookie = try #require(page.headers["set-cookie"].first)
        let value = String(setCookie.dropFirst("__Host-tokengate-confirm=".count).prefix { $0 != ";" })
        #expect(setCookie == "__Host-tokengate-confirm=\(value); Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=300")
        #expect(value.utf8.count == 43 && !value.contains("="), "32 bytes in unpadded base64url")
        let again = try #require(self.answer(responder.respond(to: self.head(Self.pageTarget, cookie: cookie), cutoffs: .empty, now: Self.now)))
        #expect(try self.confirmCookie(in: again) != "__Host-tokengate-confirm=" + value, "a fresh cookie each time")
        #expect(page.headers["cache-control"] == ["no-store"])
        #expect(page.headers["x-frame-options"] == ["DENY"])
        // `same-origin`, not `no-referrer`: under `no-referrer` the browser's own click carries `Origin: null`.
        #expect(page.headers["referrer-policy"] == ["same-origin"])
        #expect(page.headers["x-content-type-options"] == ["nosniff"])
        #expect(
            page.headers["content-security-policy"]
                == ["default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self' myapp:"])
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(html.contains("<span id=\"app\">Example &lt;for&gt; &quot;iOS&quot;</span>"))
        #expect(html.contains("<strong id=\"account\">&lt;b&gt;alice&lt;/b&gt;</strong>"))
        #expect(!html.contains("<b>") && !html.contains("<script"))
        #expect(!html.contains("code=") && !html.contains("access_token") && !html.contains("tokengate-token:"))
        #expect(!html.contains(cookie.dropFirst(8)), "never the session")
        #expect(!html.contains(value), "never the confirmation cookie")
        #expect(!html.contains("id=\"notice\""))
        #expect(
            html.contains(
                "<form method=\"post\" action=\"?app=ios&amp;state=S1&amp;code_challenge=\(Self.challenge)&amp;code_challenge_method=S256&amp;confirm=1\">"))
        // Cancel is the page's own cancel link, as a button.
        #expect(html.contains("<form method=\"get\" action=\"\">"))
        #expect(html.contains("name=\"cancel\" value=\"1\"") && html.contains("name=\"state\" value=\"S1\""))
        // HEAD shows nothing, as before.
        let headAnswer = try #require(self.answer(responder.respond(to: self.head(Self.pageTarget, method: .HEAD, cookie: cookie), cutoffs: .empty, now: Self.now)))
        #expect(headAnswer.reasonCode == "token_page_head" && headAnswer.body.isEmpty && headAnswer.headers["set-cookie"].isEmpty)
    }

    @Test("continue with the page's value and cookie: a 303 to the callback with the code, which redeems; the cookie is cleared")
    func continueDelivers() throws {
        let responder = self.responder()
        let session = "session=" + (try self.session())
        let page = try #require(self.answer(responder.respond(to: self.head(Self.pageTarget, cookie: session), cutoffs: .empty, now: Self.now)))
        let body = Array(("confirmation=" + (try self.value(in: page))).utf8)
        let post = self.head(Self.postTarget, method: .POST, cookie: session + "; " + (try self.confirmCookie(in: page)))
        let answer = try #require(self.answer(responder.confirm(head: post, body: body, cutoffs: .empty, now: Self.now + 30)))
        #expect(answer.status == .seeOther)
        #expect(answer.reasonCode == "token_page_issued_code")
        #expect(answer.user == "alice")
        #expect(answer.headers["set-cookie"] == ["__Host-tokengate-confirm=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0"])
        let location = try #require(answer.headers["location"].first)
        #expect(location.hasPrefix("myapp://token#code=") && location.hasSuffix("&state=S1"))
        let code = String(location.dropFirst("myapp://token#code=".count).prefix { $0 != "&" })
        let redeemed = responder.redeem(
            body: Array("grant_type=authorization_code&code=\(code)&code_verifier=\(Self.verifier)&app=ios".utf8),
            cutoffs: .empty, now: Self.now + 31)
        #expect(redeemed.reasonCode == "token_page_code_redeemed")
        // The same click again (the cookie not yet gone) is still within the value's 5 minutes: another code.
        let again = try #require(self.answer(responder.confirm(head: post, body: body, cutoffs: .empty, now: Self.now + 60)))
        #expect(again.status == .seeOther)
        // After 5 minutes, no more.
        let late = try #require(self.answer(responder.confirm(head: post, body: body, cutoffs: .empty, now: Self.now + 300)))
        #expect(late.status == .badRequest && late.reasonCode == "token_page_confirm_expired")
        #expect(late.headers["location"].isEmpty)
        #expect(late.headers["set-cookie"] == ["__Host-tokengate-confirm=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0"])
    }

    /// Double-clickjacking: the second press of a double click lands on "continue" right after the page appears.
    @Test("a click less than a second after the page is refused with the page again (fresh value and cookie)")
    func tooSoon() throws {
        let responder = self.responder()
        let session = "session=" + (try self.session())
        let shownAt = Self.now * 1000 + 400
        let page = try #require(self.answer(responder.respond(to: self.head(Self.pageTarget, cookie: session), cutoffs: .empty, now: Self.now, nowMilliseconds: shownAt)))
        let cookie = try self.confirmCookie(in: page)
        let post = self.head(Self.postTarget, method: .POST, cookie: session + "; " + cookie)
        let body = Array(("confirmation=" + (try self.value(in: page))).utf8)
        for early in [shownAt, shownAt + 150, shownAt + 999] {
            let answer = try #require(self.answer(responder.confirm(head: post, body: body, cutoffs: .empty, now: early / 1000, nowMilliseconds: early)))
            #expect(answer.status == .ok && answer.reasonCode == "token_page_confirm_too_soon" && answer.user == nil)
            #expect(answer.headers["location"].isEmpty)
            let html = String(decoding: answer.body, as: UTF8.self)
            #expect(html.contains("<p id=\"notice\">Your click came too soon") && html.contains("id=\"continue\""))
            // The page again: a fresh cookie replaces the old one (nothing clears it), and a fresh value.
            #expect(answer.headers["set-cookie"].count == 1)
            #expect(try self.confirmCookie(in: answer) != cookie)
            #expect(try self.value(in: answer) != (try self.value(in: page)))
        }
        // A second later, the first page's value with its cookie counts.
        let late = shownAt + TokenPageConfirmationKey.minimumDelayMilliseconds
        let ok = try #require(self.answer(responder.confirm(head: post, body: body, cutoffs: .empty, now: late / 1000, nowMilliseconds: late)))
        #expect(ok.status == .seeOther && ok.reasonCode == "token_page_issued_code")
        // And the page shown again works the same way, with its own cookie.
        let shownAgainAt = shownAt + 500
        let shownAgain = try #require(self.answer(responder.confirm(head: post, body: body, cutoffs: .empty, now: shownAgainAt / 1000, nowMilliseconds: shownAgainAt)))
        let secondPost = self.head(Self.postTarget, method: .POST, cookie: session + "; " + (try self.confirmCookie(in: shownAgain)))
        let secondBody = Array(("confirmation=" + (try self.value(in: shownAgain))).utf8)
        let at = shownAgainAt + 1200
        #expect(try #require(self.answer(responder.confirm(head: secondPost, body: secondBody, cutoffs: .empty, now: at / 1000, nowMilliseconds: at))).status == .seeOther)
    }

    @Test("a value from another browser or session, for another login, without its cookie, or none at all delivers nothing")
    func forgeries() throws {
        let responder = self.responder()
        let alice = "session=" + (try self.session())
        let aliceAgain = "session=" + (try self.signer.mint(TokenClaims(subject: "alice", issuedAt: Self.now - 10, apiOnly: false)))
        let mallory = "session=" + (try self.session("mallory"))
        let clickedAt = Self.now + 1
        func click(_ target: String, _ body: String, cookie: String) throws -> TokenPageAnswer {
            try #require(self.answer(responder.confirm(head: self.head(target, method: .POST, cookie: cookie), body: Array(body.utf8), cutoffs: .empty, now: clickedAt)))
        }
        func page(_ session: String) throws -> (value: String, cookie: String) {
            let page = try #require(self.answer(responder.respond(to: self.head(Self.pageTarget, cookie: session), cutoffs: .empty, now: Self.now)))
            return (try self.value(in: page), try self.confirmCookie(in: page))
        }
        let mallorys = try page(mallory)
        let alices = try page(alice)
        let alicesOtherBrowser = try page(aliceAgain)
        let alicesBrowser = alice + "; " + alices.cookie

        var refused: [(TokenPageAnswer, String)] = [
            // The attacker's own value, for its own cookie and login, posted from the victim's browser.
            (try click(Self.postTarget, "confirmation=" + mallorys.value, cookie: alicesBrowser), "token_page_confirm_mismatch"),
            // ... or with its own cookie tossed in beside the victim's: two cookies.
            (try click(Self.postTarget, "confirmation=" + mallorys.value, cookie: alicesBrowser + "; " + mallorys.cookie), "token_page_confirm_no_cookie"),
            // Alice's value, from another of her browsers (its own confirmation cookie).
            (try click(Self.postTarget, "confirmation=" + alices.value, cookie: aliceAgain + "; " + alicesOtherBrowser.cookie), "token_page_confirm_mismatch"),
            // Alice's value without the cookie (a form another site submits: `SameSite=Strict` keeps it back).
            (try click(Self.postTarget, "confirmation=" + alices.value, cookie: alice), "token_page_confirm_no_cookie"),
            (try click(Self.postTarget, "confirmation=" + alices.value, cookie: alice + "; __Host-tokengate-confirm="), "token_page_confirm_no_cookie"),
            // Alice's value for another state, app or challenge.
            (try click(Self.postTarget.replacingOccurrences(of: "S1", with: "S2"), "confirmation=" + alices.value, cookie: alicesBrowser), "token_page_confirm_mismatch"),
            (try click("/token?app=old&state=S1&confirm=1", "confirmation=" + alices.value, cookie: alicesBrowser), "token_page_confirm_mismatch"),
            (try click(Self.postTarget.replacingOccurrences(of: "E9Mel", with: "A9Mel"), "confirmation=" + alices.value, cookie: alicesBrowser), "token_page_confirm_mismatch"),
            // Its last character changed, to one that is canonical base64url whatever the value's length (a value
            // that already ended in "A" was left as it was and passed, now and then).
            (try click(Self.postTarget, "confirmation=" + String(alices.value.dropLast()) + (alices.value.last == "A" ? "Q" : "A"), cookie: alicesBrowser), "token_page_confirm_mismatch"),
            (try click(Self.postTarget, "confirmation=guess", cookie: alicesBrowser), "token_page_confirm_malformed"),
            (try click(Self.postTarget, "", cookie: alicesBrowser), "token_page_confirm_bad_request"),
            (try click(Self.postTarget, "confirmation=a&confirmation=" + alices.value, cookie: alicesBrowser), "token_page_confirm_bad_request"),
        ]
        // Another token page's value (another path prefix, maybe a looser token lifetime) does not pass either.
        let otherPage = self.responder(page: "/other")
        refused.append(
            (try #require(self.answer(otherPage.confirm(head: self.head(Self.postTarget, method: .POST, cookie: alicesBrowser), body: Array(("confirmation=" + alices.value).utf8), cutoffs: .empty, now: clickedAt))), "token_page_confirm_mismatch"))
        for (answer, reason) in refused {
            #expect(answer.reasonCode == reason)
            let forbidden = reason == "token_page_confirm_mismatch" || reason == "token_page_confirm_no_cookie"
            #expect(answer.status == (forbidden ? .forbidden : .badRequest), "\(reason)")
            #expect(answer.headers["location"].isEmpty && answer.user == nil)
            #expect(answer.headers["content-type"] == ["text/html; charset=utf-8"])
            #expect(answer.headers["content-security-policy"] == [TokenPageAnswer.contentSecurityPolicy])
            #expect(answer.headers["set-cookie"] == ["__Host-tokengate-confirm=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0"])
            #expect(String(decoding: answer.body, as: UTF8.self).contains("start again from the app"))
        }
        // The right value and cookie pass.
        #expect(try click(Self.postTarget, "confirmation=" + alices.value, cookie: alicesBrowser).status == .seeOther)
        // Logged out since: to the login, with a 303, and back to the page afterwards.
        let loggedOut = try click(Self.postTarget, "confirmation=" + alices.value, cookie: "other=1; " + alices.cookie)
        #expect(loggedOut.status == .seeOther)
        #expect(loggedOut.headers["location"].first?.hasPrefix("/login?return_to=%2Ftoken%3Fapp%3Dios") == true)
        #expect(loggedOut.headers["set-cookie"] == ["__Host-tokengate-confirm=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0"])
    }

    @Test("https callbacks are not asked by default, custom schemes are; both can be set either way")
    func whoIsAsked() throws {
        let responder = self.responder()
        let cookie = "session=" + (try self.session())
        func first(_ query: String) throws -> TokenPageAnswer {
            try #require(self.answer(responder.respond(to: self.head("/token?" + query, cookie: cookie), cutoffs: .empty, now: Self.now)))
        }
        #expect(try first("app=old").reasonCode == "token_page_confirm_shown")
        #expect(try first("app=web-asked&state=x").reasonCode == "token_page_confirm_shown")
        #expect(
            try first("app=web-asked").headers["content-security-policy"]
                == ["default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self' https://app.example.com"])
        let web = try first("app=web&state=x")
        #expect(web.status == .found && web.headers["location"].first?.hasPrefix("https://app.example.com/cb#access_token=") == true)
        let trusted = try first("app=trusted")
        #expect(trusted.status == .found && trusted.headers["location"].first?.hasPrefix("myapp://trusted#access_token=") == true)
        // Not logged in: the login first, as before (the page comes after it).
        let anonymous = try #require(self.answer(responder.respond(to: self.head("/token?app=old", cookie: nil), cutoffs: .empty, now: Self.now)))
        #expect(anonymous.reasonCode == "token_page_login_required")
        // A cancel needs neither a login nor a confirmation.
        let cancel = try #require(self.answer(responder.respond(to: self.head("/token?app=old&cancel=1&state=S", cookie: nil), cutoffs: .empty, now: Self.now)))
        #expect(cancel.headers["location"] == ["myapp://old?status=unauthorized&message=user%20canceled&state=S"])
    }

    @Test("the login check and the page's actions print no cookie and no answer's token")
    func descriptionsRedact() throws {
        let responder = self.responder(login: .whoami(WhoamiConfiguration(url: "http://rp.internal/whoami", userHeader: "X-User")))
        let secret = "sid=secret-session-value"
        let get = self.head(Self.pageTarget, cookie: secret)
        let action = responder.respond(to: get, cutoffs: .empty, now: Self.now)
        let check = responder.checkLogin(get, cutoffs: .empty, now: Self.now)
        guard case .askWhoami(_, let forwarded) = action else {
            Issue.record("the RP was not asked")
            return
        }
        #expect(forwarded == secret)
        for shown in ["\(action)", String(reflecting: action), "\(check)", String(reflecting: check)] {
            #expect(!shown.contains("secret-session-value") && shown.contains("redacted"), "\(shown)")
        }
        // An answer that carries a token (the page's cookie delivery) prints its status and reason only.
        let sessionCookie = self.responder()
        let cookie = "session=" + (try self.session())
        let delivered = sessionCookie.respond(to: self.head("/token", cookie: cookie), cutoffs: .empty, now: Self.now)
        guard case .answer(let answer) = delivered else {
            Issue.record("expected an answer")
            return
        }
        let token = try #require(answer.headers["set-cookie"].first.map { String($0.dropFirst("auth_token=".count).prefix { $0 != ";" }) })
        #expect(token.count > 20)
        for shown in ["\(delivered)", String(reflecting: delivered)] {
            #expect(!shown.contains(token) && shown == "answer(200, token_page_issued)", "\(shown)")
        }
        #expect("\(TokenPageLoginCheck.failed(answer))" == "failed(200, token_page_issued)")
    }

    @Test("whoami mode: the value is bound to the confirmation cookie and the user, not the RP's cookies, which may change; the RP is asked again at the click and never gets the confirmation cookie")
    func whoami() throws {
        let responder = self.responder(login: .whoami(WhoamiConfiguration(url: "http://rp.internal/whoami", userHeader: "X-User")))
        // The page's GET came through a cross-site redirect from the IdP: the RP's `SameSite=Strict` cookie
        // was left off it, but comes with the same-origin click.
        let cookies = "sid=abc; auth_token=old-api-token"
        let get = self.head(Self.pageTarget, cookie: cookies)
        guard case .askWhoami(_, let forwarded) = responder.respond(to: get, cutoffs: .empty, now: Self.now) else {
            Issue.record("the RP was not asked")
            return
        }
        #expect(forwarded == "sid=abc")
        let page = responder.respond(to: get, whoami: .answered(status: 200, userHeaderValues: ["alice"]), now: Self.now)
        #expect(page.reasonCode == "token_page_confirm_shown")
        let body = Array(("confirmation=" + (try self.value(in: page))).utf8)
        let confirmCookie = try self.confirmCookie(in: page)
        let alice = TokenPageWhoamiResult.answered(status: 200, userHeaderValues: ["alice"])
        let clickedAt = Self.now + 2

        let post = self.head(Self.postTarget, method: .POST, cookie: "sid=abc; strict=1; " + confirmCookie + "; _ga=GA1.2.3")
        guard case .askWhoami(_, let again) = responder.confirm(head: post, body: body, cutoffs: .empty, now: clickedAt) else {
            Issue.record("the RP was not asked again at the click")
            return
        }
        #expect(again == "sid=abc; strict=1; _ga=GA1.2.3", "never the confirmation cookie")
        let ok = responder.confirm(head: post, body: body, whoami: alice, now: clickedAt)
        #expect(ok.status == .seeOther && ok.reasonCode == "token_page_issued_code")
        // Other cookies changing does not matter, nor does the RP's session (the RP still says alice).
        for other in ["sid=abc; auth_token=newer", "sid=xyz; lb=7", ""] {
            let changed = self.head(Self.postTarget, method: .POST, cookie: other + (other.isEmpty ? "" : "; ") + confirmCookie)
            #expect(responder.confirm(head: changed, body: body, whoami: alice, now: clickedAt).status == .seeOther, "\(other)")
        }
        // Without the confirmation cookie, or with another browser's, nothing.
        let noCookie = self.head(Self.postTarget, method: .POST, cookie: "sid=abc")
        #expect(responder.confirm(head: noCookie, body: body, whoami: alice, now: clickedAt).reasonCode == "token_page_confirm_no_cookie")
        let otherCookie = self.head(Self.postTarget, method: .POST, cookie: "sid=abc; __Host-tokengate-confirm=Yx3vQm2c0fN8pL5sR1tW7uZ9aB4dE6gH2jK0mN3pQ5s")
        #expect(responder.confirm(head: otherCookie, body: body, whoami: alice, now: clickedAt).reasonCode == "token_page_confirm_mismatch")
        // The RP now says someone else, or no one, or cannot say.
        #expect(responder.confirm(head: post, body: body, whoami: .answered(status: 200, userHeaderValues: ["bob"]), now: clickedAt).reasonCode == "token_page_confirm_mismatch")
        #expect(responder.confirm(head: post, body: body, whoami: .answered(status: 401, userHeaderValues: []), now: clickedAt).status == .seeOther)
        #expect(responder.confirm(head: post, body: body, whoami: .answered(status: 401, userHeaderValues: []), now: clickedAt).reasonCode == "token_page_login_required")
        let failed = responder.confirm(head: post, body: body, whoami: .failed, now: clickedAt)
        #expect(failed.reasonCode == "token_page_whoami_failed")
        #expect(failed.headers["set-cookie"] == ["__Host-tokengate-confirm=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0"])
    }
}

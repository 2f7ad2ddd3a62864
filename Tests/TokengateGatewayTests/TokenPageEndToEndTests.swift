//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateClient
import TokengateGateway

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Issue 6 item 3: the seed's whole flow, a simulated app using the client library against the demo RP
/// behind a real gateway over real TLS: token page → login → capture → API 200 → password change → API 401
/// → new login → 200; "disable mobile apps" → the api token gets 401 while the browser session still gets 200;
/// the token never appears in a URL or a log.
@Suite(.serialized)
struct TokenPageEndToEndTests {
    /// What the embedded web view does: open the token page, be sent to the login, log in, come back, and get
    /// the token. Returns the captured token, the browser's session cookie, and every URL the browser saw.
    private func browserLogin(
        _ gateway: TokenPageHarness,
        user: String,
        password: String
    ) throws -> (token: StoredToken, session: String, urls: [String]) {
        var urls: [String] = []
        let page = try TokenPageURL(site: URL(string: gateway.baseURL)!)
        urls.append(page.url.absoluteString)
        let first = try gateway.curl([page.url.absoluteString])
        #expect(first.status == 302, "\(first.body)")
        let login = try #require(first.header("location"))
        #expect(login == "/login?return_to=%2Ftoken")
        urls.append(login)
        #expect(try gateway.curl([gateway.baseURL + login]).status == 200, "the login form renders")
        let posted = try gateway.curl([
            "--data-urlencode", "user=\(user)", "--data-urlencode", "password=\(password)",
            "--data-urlencode", "return_to=/token", gateway.baseURL + "/login",
        ])
        #expect(posted.status == 303)
        let back = try #require(posted.header("location"))
        #expect(back == "/token")
        urls.append(back)
        let session = try #require(
            posted.headers("set-cookie").first { $0.hasPrefix("session=") }.map { String($0.dropFirst(8).prefix { $0 != ";" }) }
        )
        let delivered = try gateway.curl(["-H", "Cookie: session=\(session)", gateway.baseURL + back])
        #expect(delivered.status == 200, "\(delivered.body)")
        let setCookie = delivered.headers("set-cookie")
        #expect(setCookie.count == 1)
        #expect(setCookie.first?.contains("; HttpOnly; Secure; SameSite=Strict; Path=/") == true)
        #expect(delivered.header("cache-control") == "no-store")
        #expect(delivered.header("content-security-policy")?.hasPrefix("default-src 'none'") == true)
        // The app's two ways of reading it agree.
        let fromCookie = try #require(TokenCapture.fromSetCookie(setCookie))
        let fromTitle = try #require(TokenCapture.fromTitle(delivered.title))
        #expect(fromCookie.value == fromTitle.value)
        return (fromCookie, session, urls)
    }

    /// An API call as the app makes it: the library attaches the token and reads the answer.
    private func apiCall(_ gateway: TokenPageHarness, _ token: inout StoredToken?, form: Bool = false) throws -> (TokenResponseOutcome, Curl.Result) {
        var request = URLRequest(url: URL(string: gateway.baseURL + "/api/items")!)
        if form {
            request.httpMethod = "POST"
            request.httpBody = Data("n=1".utf8)
        }
        try request.attach(try #require(token), as: form ? .formField() : .authorizationHeader, now: Date(timeIntervalSince1970: TimeInterval(gateway.clock.now)))
        #expect(!(request.url?.absoluteString.contains(token!.value) ?? true))
        let result = try gateway.send(request)
        let outcome = TokenResponseCheck.outcome(status: result.status, wwwAuthenticate: result.headers("www-authenticate"))
        if outcome == .loginRequired { token = nil }
        return (outcome, result)
    }

    @Test
    func theSeedFlowEndToEnd() async throws {
        try await TokenPageHarness.with { gateway in
            var seen: [String] = []
            var tokens: [String] = []

            // Token page → login → capture → API 200.
            let first = try self.browserLogin(gateway, user: "alice", password: "pw")
            seen += first.urls
            tokens.append(first.token.value)
            var token: StoredToken? = first.token
            var (outcome, result) = try self.apiCall(gateway, &token)
            #expect(outcome == .proceed)
            #expect(result.status == 200)
            #expect(result.body.contains("\"user\":\"alice\""))
            #expect(try self.apiCall(gateway, &token, form: true).1.status == 200, "as a form field too")

            // Password change → API 401 → the library drops the token.
            gateway.clock.advance(by: 10)
            // As a browser does, the form post carries its Origin (a cookie on an unsafe method needs it).
            let changed = try gateway.curl(["-H", "Cookie: session=\(first.session)", "-H", "Origin: \(gateway.baseURL)", "--data", "password=new-secret", gateway.baseURL + "/account/password"])
            #expect(changed.status == 200, "\(changed.body)")
            (outcome, result) = try self.apiCall(gateway, &token)
            #expect(result.status == 401)
            #expect(outcome == .loginRequired)
            #expect(token == nil)

            // New login → 200.
            gateway.clock.advance(by: 10)
            let second = try self.browserLogin(gateway, user: "alice", password: "new-secret")
            seen += second.urls
            tokens.append(second.token.value)
            token = second.token
            #expect(try self.apiCall(gateway, &token).1.status == 200)

            // "Disable mobile apps" → the api token gets 401, the browser session still 200.
            gateway.clock.advance(by: 10)
            let disabled = try gateway.curl(["-X", "POST", "-H", "Cookie: session=\(second.session)", "-H", "Origin: \(gateway.baseURL)", gateway.baseURL + "/account/disable-mobile-apps"])
            #expect(disabled.status == 200, "\(disabled.body)")
            (outcome, result) = try self.apiCall(gateway, &token)
            #expect(result.status == 401)
            #expect(outcome == .loginRequired)
            let browser = try gateway.curl(["-H", "Cookie: session=\(second.session)", gateway.baseURL + "/account/profile"])
            #expect(browser.status == 200)
            #expect(browser.body.contains("\"user\":\"alice\""))

            // The app flow: the token in the registered callback's fragment, and a cancel.
            gateway.clock.advance(by: 10)
            let state = TokenPageURL.randomState()
            let appPage = try TokenPageURL(site: URL(string: gateway.baseURL)!, app: "ios", state: state)
            seen.append(appPage.url.absoluteString)
            let redirect = try gateway.curl(["-H", "Cookie: session=\(second.session)", appPage.url.absoluteString])
            #expect(redirect.status == 302)
            let callback = try #require(redirect.header("location").flatMap(URL.init(string:)))
            let appToken = try #require(try TokenCapture.fromCallback(callback, callback: TokenPageHarness.callback, expectedState: state))
            tokens.append(appToken.value)
            token = appToken
            #expect(try self.apiCall(gateway, &token).1.status == 200)
            let cancel = try gateway.curl([gateway.baseURL + "/token?app=ios&cancel=1"])
            #expect(cancel.header("location") == TokenPageHarness.callback + "?status=unauthorized&message=user%20canceled")

            // Never in a URL (other than the registered callback's fragment) or a log.
            for token in tokens {
                for url in seen { #expect(!url.contains(token), "a token in a URL: \(url)") }
                for line in gateway.logLines.all { #expect(!line.contains(token), "a token in a log line") }
                #expect(!gateway.logLines.all.contains { $0.contains(String(token.split(separator: ".").last ?? "")) })
            }
            #expect(!gateway.logLines.all.contains { $0.contains(first.session) }, "nor the session cookie")
        }
    }

    /// Another site may send the browser to the token page (a federated login comes back that way), but not make
    /// it mint in the background: a cross-site fetch, image or frame is refused; a token in its URL too, which
    /// the login redirect would otherwise carry on.
    @Test
    func crossSiteSubresourcesAndTokensInTheURLAreRefused() async throws {
        try await TokenPageHarness.with { gateway in
            let login = try self.browserLogin(gateway, user: "alice", password: "pw")
            let cookie = "Cookie: session=\(login.session)"
            func page(_ headers: [String]) throws -> Curl.Result {
                try gateway.curl(headers.flatMap { ["-H", $0] } + ["-H", cookie, gateway.baseURL + "/token"])
            }
            for (mode, destination) in [("cors", "empty"), ("no-cors", "image"), ("navigate", "iframe"), ("no-cors", "script")] {
                let refused = try page(["Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: \(mode)", "Sec-Fetch-Dest: \(destination)"])
                #expect(refused.status == 403, "\(mode) \(destination): \(refused.status)")
                #expect(refused.headers("set-cookie").isEmpty, "nothing minted for \(mode) \(destination)")
                #expect(refused.body.contains("cross_site_request"))
            }
            for headers in [
                ["Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate", "Sec-Fetch-Dest: document"],
                ["Sec-Fetch-Site: same-origin", "Sec-Fetch-Mode: cors", "Sec-Fetch-Dest: empty"],
                ["Sec-Fetch-Site: none", "Sec-Fetch-Mode: navigate"],
                [],
            ] {
                let served = try page(headers)
                #expect(served.status == 200, "\(headers): \(served.status)")
                #expect(served.headers("set-cookie").count == 1, "\(headers)")
            }
            let inURL = try gateway.curl(["-H", cookie, gateway.baseURL + "/token?access_token=\(login.token.value)"])
            #expect(inURL.status == 400 && inURL.body.contains("URL"), "\(inURL.status) \(inURL.body)")
            #expect(inURL.header("location") == nil)
            let noSession = try gateway.curl([gateway.baseURL + "/token?return_to=%2Fx%3Ft%3D\(login.token.value)"])
            #expect(noSession.status == 400, "a token is never carried on to the login: \(noSession.status)")
        }
    }
}

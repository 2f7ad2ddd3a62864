//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOHTTP1
import Testing
import TokengateClient
import TokengateConfig
import TokengateHTTP
import TokengateTokens

@testable import TokengateGateway

/// The token page's decisions as plain values: no gateway, no sockets.
@Suite struct TokenPageResponderTests {
    static let now: Int64 = 1_700_000_000
    let signer: TokenSigner
    let verifier: TokenVerifier

    init() throws {
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-page")
        self.signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        self.verifier = TokenVerifier(keys: try KeySet(jwks: Array(keys.publicJWKS.utf8)))
    }

    private func responder(
        login: TokenPageLogin = .sessionCookie("session"),
        loginURL: String = "/login",
        lifetime: Duration? = nil,
        // `confirm: false`: these tests are about what the page delivers once nothing is left to ask
        // (TokenPageConfirmationResponderTests asks).
        apps: [TokenPageApp] = [TokenPageApp(name: "ios", callback: "myapp://token", confirm: false)]
    ) -> TokenPageResponder {
        var configuration = TokenPageConfiguration(login: login, loginURL: loginURL, apps: apps)
        configuration.tokenLifetime = lifetime
        return TokenPageResponder(configuration: configuration, signer: self.signer, verifier: self.verifier, page: "/token", redeemedCodes: .forTest())
    }

    private func head(_ uri: String, method: HTTPMethod = .GET, cookie: String? = nil) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.add(name: "host", value: "example.com")
        if let cookie { headers.add(name: "cookie", value: cookie) }
        return HTTPRequestHead(version: .http1_1, method: method, uri: uri, headers: headers)
    }

    private func session(_ user: String = "alice", issuedAt: Int64 = Self.now - 60, apiOnly: Bool = false) throws -> String {
        try self.signer.mint(TokenClaims(subject: user, issuedAt: issuedAt, apiOnly: apiOnly))
    }

    private func answer(_ action: TokenPageAction) throws -> TokenPageAnswer {
        guard case .answer(let answer) = action else {
            Issue.record("expected an answer, got \(action)")
            throw CancellationError()
        }
        return answer
    }

    private func run(_ responder: TokenPageResponder, _ head: HTTPRequestHead, cutoffs: CutoffSnapshot = .empty) throws -> TokenPageAnswer {
        try self.answer(responder.respond(to: head, cutoffs: cutoffs, now: Self.now))
    }

    /// The security headers every answer must carry.
    private func expectSecurityHeaders(_ answer: TokenPageAnswer, sourceLocation: SourceLocation = #_sourceLocation) {
        let headers = answer.headers
        #expect(headers["cache-control"] == ["no-store"], sourceLocation: sourceLocation)
        #expect(headers["pragma"] == ["no-cache"], sourceLocation: sourceLocation)
        #expect(headers["content-security-policy"] == ["default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"], sourceLocation: sourceLocation)
        #expect(headers["x-frame-options"] == ["DENY"], sourceLocation: sourceLocation)
        #expect(headers["referrer-policy"] == ["no-referrer"], sourceLocation: sourceLocation)
        #expect(headers["x-content-type-options"] == ["nosniff"], sourceLocation: sourceLocation)
        if !answer.body.isEmpty {
            #expect(headers["content-length"] == [String(answer.body.count)], sourceLocation: sourceLocation)
        }
    }

    // MARK: Logged in: the page.

    @Test func loggedInGetsTheTokenInCookieTitleAndBody() throws {
        let answer = try self.run(self.responder(), self.head("/token", cookie: "theme=dark; session=\(try self.session())"))
        #expect(answer.status == .ok)
        #expect(answer.user == "alice")
        #expect(answer.reasonCode == "token_page_issued")
        self.expectSecurityHeaders(answer)
        #expect(answer.headers["content-type"] == ["text/html; charset=utf-8"])
        let setCookie = try #require(answer.headers["set-cookie"].first)
        let html = String(decoding: answer.body, as: UTF8.self)
        // The client library reads each delivery the same way.
        let fromCookie = try #require(TokenCapture.fromSetCookie([setCookie]))
        let title = try #require(html.range(of: "<title>").flatMap { start in html.range(of: "</title>").map { html[start.upperBound..<$0.lowerBound] } })
        let fromTitle = try #require(TokenCapture.fromTitle(String(title)))
        #expect(fromCookie.value == fromTitle.value)
        #expect(html.contains("<pre id=\"token\">\(fromCookie.value)</pre>"))
        #expect(setCookie == "auth_token=\(fromCookie.value); HttpOnly; Secure; SameSite=Strict; Path=/")
        #expect(fromCookie.expiresAt == nil)
        // An api token for that user, issued now, valid at the gateway as api and not as session.
        guard case .valid(let verified) = self.verifier.verify(fromCookie.value, accept: .api, cutoffs: .empty, now: Self.now) else {
            Issue.record("the minted token does not verify")
            return
        }
        #expect(verified.subject == "alice")
        #expect(verified.kind == .api)
        #expect(verified.issuedAt == Self.now)
        #expect(verified.expiresAt == nil)
        #expect(self.verifier.verify(fromCookie.value, accept: .session, cutoffs: .empty, now: Self.now) == .invalid(.wrongKind))
    }

    @Test func lifetimeGivesExpAndMaxAgeAndConfiguredCookieNameAndPath() throws {
        var configuration = TokenPageConfiguration(login: .sessionCookie("sid"), loginURL: "/login", cookieName: "app_token", cookiePath: "/m/")
        configuration.tokenLifetime = .seconds(3600)
        let responder = TokenPageResponder(configuration: configuration, signer: self.signer, verifier: self.verifier, page: "/token", redeemedCodes: .forTest())
        let answer = try self.run(responder, self.head("/token", cookie: "sid=\(try self.session())"))
        let setCookie = try #require(answer.headers["set-cookie"].first)
        #expect(setCookie.hasPrefix("app_token=") && setCookie.hasSuffix("; HttpOnly; Secure; SameSite=Strict; Path=/m/; Max-Age=3600"))
        let token = try #require(TokenCapture.fromSetCookie([setCookie], name: "app_token")).value
        guard case .valid(let verified) = self.verifier.verify(token, accept: .api, cutoffs: .empty, now: Self.now) else {
            Issue.record("the minted token does not verify")
            return
        }
        #expect(verified.expiresAt == Self.now + 3600)
    }

    /// `HEAD` is safe: link checkers and previewers send it anywhere, so it never mints a token.
    @Test func headMintsNothing() throws {
        for target in ["/token", "/token?app=ios"] {
            let answer = try self.run(self.responder(), self.head(target, method: .HEAD, cookie: "session=\(try self.session())"))
            #expect(answer.status == .ok, "\(target)")
            #expect(answer.body.isEmpty)
            #expect(answer.headers["set-cookie"].isEmpty, "\(target)")
            #expect(answer.headers["location"].isEmpty, "\(target)")
            #expect(answer.headers["content-length"].isEmpty, "\(target): the length of a page that was not made")
            #expect(answer.headers["content-type"] == ["text/html; charset=utf-8"])
            #expect(answer.reasonCode == "token_page_head")
            #expect(answer.user == nil)
            self.expectSecurityHeaders(answer)
        }
        // Not logged in, `HEAD` learns what `GET` would: the way to the login.
        let anonymous = try self.run(self.responder(), self.head("/token", method: .HEAD, cookie: nil))
        #expect(anonymous.status == .found)
    }

    @Test func otherMethodsAreRefused() throws {
        for method in [HTTPMethod.POST, .PUT, .DELETE, .OPTIONS] {
            let answer = try self.run(self.responder(), self.head("/token", method: method, cookie: "session=\(try self.session())"))
            #expect(answer.status == .methodNotAllowed)
            #expect(answer.headers["allow"] == ["GET, HEAD, POST"])
            #expect(answer.headers["set-cookie"].isEmpty)
            self.expectSecurityHeaders(answer)
        }
    }

    // MARK: Not logged in.

    @Test func notLoggedInRedirectsToTheLoginWithTheReturnAddress() throws {
        let cases: [(String?, String)] = [
            (nil, "no cookie"),
            ("theme=dark", "no session cookie"),
            ("session=garbage", "not a token"),
            ("session=\(try self.session(apiOnly: true))", "an api token is not a login"),
            ("session=\(try self.session(issuedAt: Self.now - 30 * 86_400))", "an expired session"),
            ("Session=\(try self.session())", "cookie names are case-sensitive"),
        ]
        for (cookie, label) in cases {
            let answer = try self.run(self.responder(), self.head("/token?app=ios&state=abc", cookie: cookie))
            #expect(answer.status == .found, "\(label)")
            #expect(answer.headers["location"] == ["/login?return_to=%2Ftoken%3Fapp%3Dios%26state%3Dabc"], "\(label)")
            #expect(answer.headers["set-cookie"].isEmpty, "\(label)")
            #expect(answer.user == nil)
            self.expectSecurityHeaders(answer)
        }
    }

    @Test func revokedSessionIsNotALogin() throws {
        let cutoffs = CutoffSnapshot(users: ["alice": UserCutoffs(revokedBefore: Self.now - 10)])
        let answer = try self.run(self.responder(), self.head("/token", cookie: "session=\(try self.session())"), cutoffs: cutoffs)
        #expect(answer.status == .found)
        // A disabled-apps cutoff does not touch the browser session: the page still works (and the new
        // token is issued after the cutoff).
        let apps = CutoffSnapshot(users: ["alice": UserCutoffs(apiRevokedBefore: Self.now - 10)])
        #expect(try self.run(self.responder(), self.head("/token", cookie: "session=\(try self.session())"), cutoffs: apps).status == .ok)
    }

    @Test func twoSessionCookiesAreRefused() throws {
        let cookie = "session=\(try self.session()); session=\(try self.session("mallory"))"
        let answer = try self.run(self.responder(), self.head("/token", cookie: cookie))
        #expect(answer.status == .badRequest)
        #expect(answer.headers["set-cookie"].isEmpty)
        let split = try self.run(self.responder(), HTTPRequestHead(version: .http1_1, method: .GET, uri: "/token", headers: ["cookie": "session=\(try self.session())", "Cookie": "session=x"]))
        #expect(split.status == .badRequest)
    }

    @Test func loginURLWithQueryFragmentOrAbsolute() throws {
        let absolute = try self.run(self.responder(loginURL: "https://login.example.com/sso?site=1#top"), self.head("/token"))
        #expect(absolute.headers["location"] == ["https://login.example.com/sso?site=1&return_to=%2Ftoken#top"])
        var configuration = TokenPageConfiguration(login: .sessionCookie("session"), loginURL: "/signin", returnParameter: "next")
        configuration.apps = []
        let named = try self.run(TokenPageResponder(configuration: configuration, signer: self.signer, verifier: self.verifier, page: "/token", redeemedCodes: .forTest()), self.head("/token"))
        #expect(named.headers["location"] == ["/signin?next=%2Ftoken"])
    }

    @Test func requestTargetsThatAreNotSameSitePathsGetNoLoginRedirect() throws {
        for uri in ["//evil.example/token", "/\\evil.example", "https://evil.example/token", "/%2F/evil", "/token/../..//evil", "/%5Cevil"] {
            let answer = try self.run(self.responder(), self.head(uri))
            #expect(answer.status == .badRequest, "\(uri)")
            #expect(answer.headers["location"].isEmpty, "\(uri)")
        }
    }

    // MARK: Registered apps.

    @Test func appGetsTheTokenInTheCallbackFragment() throws {
        let answer = try self.run(self.responder(lifetime: .seconds(600)), self.head("/token?app=ios&state=xyz-1", cookie: "session=\(try self.session())"))
        #expect(answer.status == .found)
        #expect(answer.reasonCode == "token_page_issued_app")
        #expect(answer.headers["set-cookie"].isEmpty)
        #expect(answer.body.isEmpty)
        self.expectSecurityHeaders(answer)
        let location = try #require(answer.headers["location"].first)
        #expect(location.hasPrefix("myapp://token#access_token="))
        #expect(location.hasSuffix("&token_type=bearer&expires_in=600&state=xyz-1"))
        #expect(!location.contains("?"), "never in the query")
        let stored = try #require(try TokenCapture.fromCallback(URL(string: location)!, callback: "myapp://token", expectedState: "xyz-1", now: Date(timeIntervalSince1970: TimeInterval(Self.now))))
        #expect(stored.expiresAt == Date(timeIntervalSince1970: TimeInterval(Self.now + 600)))
        guard case .valid(let verified) = self.verifier.verify(stored.value, accept: .api, cutoffs: .empty, now: Self.now) else {
            Issue.record("the minted token does not verify")
            return
        }
        #expect(verified.subject == "alice")
    }

    @Test func cancelGoesToTheCallbackWithoutLoginOrToken() throws {
        let answer = try self.run(self.responder(), self.head("/token?app=ios&cancel=1&state=s"))
        #expect(answer.status == .found)
        #expect(answer.headers["location"] == ["myapp://token?status=unauthorized&message=user%20canceled&state=s"])
        do {
            _ = try TokenCapture.fromCallback(URL(string: answer.headers["location"][0])!, callback: "myapp://token", expectedState: "s")
            Issue.record("a cancel must not yield a token")
        } catch let error as TokengateClientError {
            #expect(error.code == .unauthorized)
            #expect(error.serverMessage == "user canceled")
        }
        let withQuery = self.responder(apps: [TokenPageApp(name: "a", callback: "https://app.example/cb?v=2")])
        #expect(try self.run(withQuery, self.head("/token?app=a&cancel=1")).headers["location"] == ["https://app.example/cb?v=2&status=unauthorized&message=user%20canceled"])
    }

    @Test func unknownAppsAndBadParametersAreRefusedWithoutRedirect() throws {
        let cookie = "session=\(try self.session())"
        for uri in [
            "/token?app=android", "/token?app=IOS", "/token?app=ios&app=ios",
            "/token?cancel=1", "/token?state=abc", "/token?app=ios&state=a%20b", "/token?app=ios&state=" + String(repeating: "a", count: 257),
            "/token?app=ios&cancel=yes", "/token?app=%ZZ", "/token?app=ios&state=%0d%0aSet-Cookie:x",
        ] {
            let answer = try self.run(self.responder(), self.head(uri, cookie: cookie))
            #expect(answer.status == .badRequest, "\(uri)")
            #expect(answer.headers["location"].isEmpty && answer.headers["set-cookie"].isEmpty, "\(uri)")
            #expect(answer.headers["content-type"] == ["application/json"])
            let body = String(decoding: answer.body, as: UTF8.self)
            #expect(!body.contains("android") && !body.contains("evil"), "the request's text is never echoed: \(body)")
        }
        // The callback parameter is not read at all: the configured callback is used.
        let answer = try self.run(self.responder(), self.head("/token?app=ios&redirect_uri=https://evil.example", cookie: cookie))
        #expect(answer.headers["location"].first?.hasPrefix("myapp://token#") == true)
    }

    // MARK: whoami.

    @Test func whoamiAsksTheRPWithTheBrowsersCookiesButNotTheOldToken() throws {
        let responder = self.responder(login: .whoami(WhoamiConfiguration(url: "http://127.0.0.1:9000/whoami", userHeader: "X-User-Id")))
        let action = responder.respond(to: self.head("/token", cookie: "sid=abc; auth_token=old.api.token; theme=dark"), cutoffs: .empty, now: Self.now)
        #expect(action == .askWhoami(url: "http://127.0.0.1:9000/whoami", forwardCookies: "sid=abc; theme=dark"))
        // No cookies at all: nobody to ask about.
        #expect(try self.answer(responder.respond(to: self.head("/token"), cutoffs: .empty, now: Self.now)).status == .found)
        #expect(try self.answer(responder.respond(to: self.head("/token", cookie: "auth_token=x"), cutoffs: .empty, now: Self.now)).status == .found)
    }

    @Test func whoamiResults() throws {
        let responder = self.responder(login: .whoami(WhoamiConfiguration(url: "http://127.0.0.1:9000/whoami", userHeader: "X-User-Id")))
        let head = self.head("/token", cookie: "sid=abc")
        let ok = responder.respond(to: head, whoami: .answered(status: 200, userHeaderValues: [" bob "]), now: Self.now)
        #expect(ok.status == .ok)
        #expect(ok.user == "bob")
        for status in [302, 303, 401, 403] {
            let answer = responder.respond(to: head, whoami: .answered(status: status, userHeaderValues: []), now: Self.now)
            #expect(answer.status == .found, "\(status)")
            #expect(answer.headers["location"] == ["/login?return_to=%2Ftoken"])
        }
        let failures: [TokenPageWhoamiResult] = [
            .failed, .answered(status: 500, userHeaderValues: ["bob"]), .answered(status: 404, userHeaderValues: []),
            .answered(status: 200, userHeaderValues: []), .answered(status: 200, userHeaderValues: [""]),
            .answered(status: 200, userHeaderValues: ["bob", "alice"]), .answered(status: 200, userHeaderValues: ["bo\u{1}b"]),
            .answered(status: 200, userHeaderValues: [String(repeating: "u", count: 257)]),
            // Ids the signer would refuse (a 500 before): NBSP around it, a line separator, a C1 control; and one
            // that was not UTF-8 on the wire (NIO's decoder puts U+FFFD where it was not).
            .answered(status: 200, userHeaderValues: ["\u{A0}bob"]), .answered(status: 200, userHeaderValues: ["bo\u{2028}b"]),
            .answered(status: 200, userHeaderValues: ["bo\u{85}b"]), .answered(status: 200, userHeaderValues: ["al\u{FFFD}ice"]),
        ]
        for result in failures {
            let answer = responder.respond(to: head, whoami: result, now: Self.now)
            #expect(answer.status == .badGateway, "\(result)")
            #expect(answer.headers["set-cookie"].isEmpty)
            // Why, for the log: never the value the RP sent.
            if case .answered = result {
                #expect(answer.diagnostic != nil, "\(result)")
                #expect(answer.diagnostic?.contains("bob") != true && answer.diagnostic?.contains("ice") != true)
            }
        }
        #expect(
            responder.respond(to: head, whoami: .answered(status: 200, userHeaderValues: ["al\u{FFFD}ice"]), now: Self.now)
                .diagnostic == "its X-User-Id value is not UTF-8")
        #expect(
            responder.respond(to: head, whoami: .answered(status: 500, userHeaderValues: []), now: Self.now).diagnostic
                == "it answered 500")
        let app = responder.respond(to: self.head("/token?app=ios", cookie: "sid=abc"), whoami: .answered(status: 204, userHeaderValues: ["carol"]), now: Self.now)
        #expect(app.headers["location"].first?.hasPrefix("myapp://token#access_token=") == true)
    }

    // MARK: The return address.

    @Test(arguments: [
        "/token", "/token?app=ios&state=x", "/a/b.c/d?x=..&y=//z", "/%E2%82%AC", "/",
    ])
    func sameSitePathsAreAccepted(_ path: String) {
        #expect(SameSiteReturnPath.validate(path) == path)
    }

    @Test(arguments: [
        "", "//evil", "///evil", "/\\evil", "\\\\evil", "/a\\b", "https://evil", "http:/evil", "javascript:alert(1)", "evil",
        "%2F%2Fevil", "/%2F/evil", "/%2f%2fevil", "/%5Cevil", "/%5cevil", "/\t/evil", "/\r\nSet-Cookie:x=1", "/a%0D%0ALocation:x",
        "/a b", "/é", "/..", "/a/../b", "/%2e%2e/x", "/%zz", "/%", " /a", "/a\u{0}",
    ])
    func otherReturnAddressesAreRefused(_ candidate: String) {
        #expect(SameSiteReturnPath.validate(candidate) == nil)
    }

    @Test func returnAddressLengthLimit() {
        #expect(SameSiteReturnPath.validate("/" + String(repeating: "a", count: 2047)) != nil)
        #expect(SameSiteReturnPath.validate("/" + String(repeating: "a", count: 2048)) == nil)
    }

    @Test func htmlEscaping() {
        #expect(HTMLEscaping.escape("<a href=\"x\">'&'</a>") == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;")
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOHTTP1
import Testing
import TokengateClient
import TokengateConfig
import TokengateSessionCookies
import TokengateTestSupport
import TokengateTokens

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TokengateGateway

/// `mint:` a Rails (6.1, Debian's) or an Express cookie-session issuer: the page's callback names the cookie
/// (and cookie-session's `.sig` beside it), the client library attaches exactly that, and the real framework
/// (scripts/frameworks/) reads the user from what it attaches: Rails' own cookie store, and for Express the
/// suite's app reading with `cookies` and keygrip as cookie-session does (cookie-session is not in Debian).
@Suite(.serialized)
struct TokenPageCookieFormatMintTests {
    static let secret = "test-only site secret key base of some length, as Rails wants at least this much"

    private func responder(_ format: SessionCookieFormat, cookie: String, userID: String) throws -> TokenPageResponder {
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-page")
        let configuration = TokenPageConfiguration(
            login: .whoami(WhoamiConfiguration(url: "http://127.0.0.1:9000/whoami", userHeader: "x-user-id")),
            loginURL: "/login", apps: [TokenPageApp(name: "ios", callback: "myapp://token", confirm: false)])
        let minter = try SessionCookieMinter(
            format: format, secrets: [try SessionCookieSecret(bytes: Array(Self.secret.utf8))],
            fields: SessionCookieFields(
                userID: SessionJSONPointer(userID)!, loginTime: SessionJSONPointer("/login_at")!,
                apiOnly: SessionJSONPointer("/api_only")!))
        return TokenPageResponder(
            configuration: configuration, signer: try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8)),
            verifier: TokenVerifier(keys: try KeySet(jwks: Array(keys.publicJWKS.utf8))), page: "/token",
            redeemedCodes: .forTest(),
            siteMint: SiteMint(minter: minter, cookieName: cookie, signatureCookieName: format.signatureCookieName))
    }

    /// The `Cookie:` header the client library attaches for the page's answer to a logged-in `user`.
    private func attachedCookie(_ responder: TokenPageResponder, user: String) throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        var headers = HTTPHeaders()
        headers.add(name: "cookie", value: "sid=browser")
        let answer = responder.respond(
            to: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/token?app=ios", headers: headers),
            whoami: .answered(status: 200, userHeaderValues: [user]), now: now, nowMilliseconds: now * 1000)
        let location = try #require(answer.headers["location"].first, "\(answer.status)")
        let token = try #require(try TokenCapture.fromCallback(URL(string: location)!, callback: "myapp://token"))
        var request = URLRequest(url: URL(string: "https://example.com/api/me")!)
        try request.attach(token)
        #expect(request.value(forHTTPHeaderField: "Authorization") == nil)
        return try #require(request.value(forHTTPHeaderField: "Cookie"))
    }

    /// `NAME=VALUE` pairs of a `Cookie:` header.
    private func pairs(_ header: String) -> [String: String] {
        var pairs: [String: String] = [:]
        for pair in header.components(separatedBy: "; ") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { pairs[parts[0]] = parts[1] }
        }
        return pairs
    }

    @Test(.enabled(if: FrameworkScript.rails61.isInstalled, "Debian's Rails is needed (scripts/install-deps.sh test)"))
    func railsReadsTheMintedSessionFromItsCookieStore() throws {
        let responder = try self.responder(
            .rails(RailsCookieOptions(version: .v6_1, cookieName: "_app_session")), cookie: "_app_session", userID: "/user_id")
        let header = try self.attachedCookie(responder, user: "42")
        let pairs = self.pairs(header)
        #expect(pairs.count == 1)
        let value = try #require(pairs["_app_session"], "\(header.count) bytes")
        #expect(value.contains("%3D") || value.contains("--"), "Rails' own cookie, escapes and all")
        let read = try FrameworkScript.rails61.run(secret: Self.secret, ops: [["op": "read", "cookie": value]])
        #expect(read[0]["user"] as? String == "42", "\(read[0])")
        let other = try FrameworkScript.rails61.run(
            secret: "another site's secret key base, long enough for the key generator", ops: [["op": "read", "cookie": value]])
        #expect(other[0]["user"] as? String == nil)
    }

    @Test(.enabled(if: FrameworkScript.express.isInstalled, "Debian's node-express, node-cookies and node-keygrip are needed"))
    func expressReadsTheMintedCookiePair() throws {
        let responder = try self.responder(
            .cookieSession(CookieSessionOptions()), cookie: "session", userID: "/passport/user")
        let header = try self.attachedCookie(responder, user: "42")
        let pairs = self.pairs(header)
        let value = try #require(pairs["session"], "\(header.count) bytes")
        let signature = try #require(pairs["session.sig"], "the signature cookie goes with the value")
        let read = try FrameworkScript.express.run(
            secret: Self.secret,
            ops: [
                ["op": "read", "cookie": value, "sig": signature],
                ["op": "read", "cookie": value, "sig": String(signature.reversed())],
            ])
        #expect(read[0]["user"] as? String == "42", "\(read[0])")
        #expect(read[1]["user"] as? String == nil, "a wrong signature: \(read[1])")
    }
}

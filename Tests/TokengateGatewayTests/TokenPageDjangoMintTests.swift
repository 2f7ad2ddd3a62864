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

/// `mint:` a Django issuer: the page's whoami answer hands over the user's session auth hash (`mint_whoami`),
/// the page mints a `signed_cookies` session with it, the client library captures it as the `sessionid` cookie
/// and real Django (PyPI, scripts/frameworks/django_app.py) authenticates `request.user` from what it attaches.
@Suite(.serialized)
struct TokenPageDjangoMintTests {
    static let secret = "test-only django secret key"
    static let hashHeader = "x-session-auth-hash"

    private func responder() throws -> TokenPageResponder {
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-page")
        let signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        let verifier = TokenVerifier(keys: try KeySet(jwks: Array(keys.publicJWKS.utf8)))
        let configuration = TokenPageConfiguration(
            login: .whoami(WhoamiConfiguration(url: "http://127.0.0.1:9000/whoami", userHeader: "x-user-id")),
            loginURL: "/login", apps: [TokenPageApp(name: "ios", callback: "myapp://token", confirm: false)])
        let minter = try SessionCookieMinter(
            format: .django(DjangoSessionOptions()), secrets: [try SessionCookieSecret(bytes: Array(Self.secret.utf8))],
            fields: SessionCookieFields(
                userID: SessionJSONPointer("/_auth_user_id")!, loginTime: SessionJSONPointer("/login_at")!,
                apiOnly: SessionJSONPointer("/api_only")!))
        var site = SiteMint(minter: minter, cookieName: "sessionid", signatureCookieName: nil)
        site.whoamiHeaders = [(SessionJSONPointer("/_auth_user_hash")!, Self.hashHeader)]
        site.constants = [(SessionJSONPointer("/_auth_user_backend")!, "django.contrib.auth.backends.ModelBackend")]
        return TokenPageResponder(
            configuration: configuration, signer: signer, verifier: verifier, page: "/token", redeemedCodes: .forTest(),
            siteMint: site)
    }

    private func head(_ uri: String) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.add(name: "host", value: "example.com")
        headers.add(name: "cookie", value: "sessionid=the-browsers-own")
        return HTTPRequestHead(version: .http1_1, method: .GET, uri: uri, headers: headers)
    }

    /// The `Cookie:` header the client library attaches for what the page answered with `hash` in its whoami.
    private func mintedCookie(_ responder: TokenPageResponder, user: String, hash: String) throws -> String {
        let now = Int64(Date().timeIntervalSince1970)  // Django checks the signer's timestamp against its clock
        let answer = responder.respond(
            to: self.head("/token?app=ios"),
            whoami: .answered(status: 200, userHeaderValues: [user], siteHeaderValues: [Self.hashHeader: [hash]]),
            now: now, nowMilliseconds: now * 1000)
        let location = try #require(answer.headers["location"].first, "\(answer.status)")
        #expect(location.contains("token_type=cookie&cookie_name=sessionid"))
        let token = try #require(try TokenCapture.fromCallback(URL(string: location)!, callback: "myapp://token"))
        #expect(token.cookie?.name == "sessionid")
        #expect(token.value.contains(":"), "Django's signer separates with ':', no bearer token")
        var request = URLRequest(url: URL(string: "https://example.com/api/me")!)
        try request.attach(token)
        #expect(request.value(forHTTPHeaderField: "Authorization") == nil)
        let header = try #require(request.value(forHTTPHeaderField: "Cookie"))
        #expect(header == "sessionid=" + token.value)
        return String(header.dropFirst("sessionid=".count))
    }

    @Test(.enabled(if: FrameworkScript.django.isInstalled, "Django is needed (scripts/install-deps.sh test)"))
    func djangoAuthenticatesTheMintedSessionWithTheRealAuthHash() throws {
        let logins = try FrameworkScript.django.run(
            secret: Self.secret, ops: [["op": "login", "user": "42", "login_at": 1_700_000_000]])
        let hash = try #require(logins[0]["auth_hash"] as? String)
        let responder = try self.responder()
        let minted = try self.mintedCookie(responder, user: "42", hash: hash)
        // A wrong hash (another password's: the user changed it) is refused by Django itself.
        let wrong = try self.mintedCookie(responder, user: "42", hash: String(repeating: "0", count: hash.count))
        let read = try FrameworkScript.django.run(
            secret: Self.secret, ops: [["op": "read", "cookie": minted], ["op": "read", "cookie": wrong]])
        #expect(read[0]["user"] as? String == "42", "\(read[0])")
        #expect(read[1]["user"] as? String == nil, "\(read[1])")
        // Another site's secret: Django refuses the signature.
        let other = try FrameworkScript.django.run(secret: "another site's secret", ops: [["op": "read", "cookie": minted]])
        #expect(other[0]["user"] as? String == nil)
    }

    @Test(.enabled(if: FrameworkScript.django.isInstalled, "Django is needed (scripts/install-deps.sh test)"))
    func aPKCECodeCarriesTheHashToItsRedemption() throws {
        let logins = try FrameworkScript.django.run(
            secret: Self.secret, ops: [["op": "login", "user": "42", "login_at": 1_700_000_000]])
        let hash = try #require(logins[0]["auth_hash"] as? String)
        let responder = try self.responder()
        let now = Int64(Date().timeIntervalSince1970)
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"  // RFC 7636's example pair
        let answer = responder.respond(
            to: self.head("/token?app=ios&code_challenge=\(challenge)&code_challenge_method=S256"),
            whoami: .answered(status: 200, userHeaderValues: ["42"], siteHeaderValues: [Self.hashHeader: [hash]]),
            now: now, nowMilliseconds: now * 1000)
        let location = try #require(answer.headers["location"].first)
        let code = try #require(location.split(separator: "#").last?.split(separator: "&").first { $0.hasPrefix("code=") })
        #expect(!location.contains(hash), "the hash is sealed in the code")
        let redeemed = responder.redeem(
            body: Array("grant_type=authorization_code&\(code)&code_verifier=dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk&app=ios".utf8),
            cutoffs: .empty, now: now + 1)
        #expect(redeemed.status == .ok)
        let token = try CodeRedemption.token(status: 200, body: Data(redeemed.body))
        #expect(token.cookie?.name == "sessionid")
        var request = URLRequest(url: URL(string: "https://example.com/api/me")!)
        try request.attach(token)
        let value = try #require(request.value(forHTTPHeaderField: "Cookie")).dropFirst("sessionid=".count)
        let read = try FrameworkScript.django.run(secret: Self.secret, ops: [["op": "read", "cookie": String(value)]])
        #expect(read[0]["user"] as? String == "42", "\(read[0])")
    }

    @Test func aWhoamiAnswerWithoutTheHashGetsNoCookie() throws {
        let responder = try self.responder()
        for values in [
            [], ["f00d1", "f00d2"], [""], [String(repeating: "f", count: SiteMint.maximumValueLength + 1)], ["f00d\u{7}3"],
        ] {
            let answer = responder.respond(
                to: self.head("/token?app=ios"),
                whoami: .answered(status: 200, userHeaderValues: ["42"], siteHeaderValues: [Self.hashHeader: values]),
                now: 1_700_000_000, nowMilliseconds: 1_700_000_000_000)
            #expect(answer.status == .badGateway, "\(values.count)")
            #expect(answer.headers["location"].isEmpty)
            #expect(answer.diagnostic?.contains(Self.hashHeader) == true)
            #expect(values.allSatisfy { $0.isEmpty || answer.diagnostic?.contains($0) == false }, "never the value")
        }
    }
}

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

/// PKCE (RFC 7636) on the token page through the real gateway over real TLS, with curl: the callback gets a
/// code, `POST` to the page redeems it with the verifier, and the token works at an API route; the code itself
/// is no token, a wrong verifier gets nothing, and an app with `pkce: required` must send a challenge.
@Suite(.serialized)
struct TokenPagePKCETests {
    /// RFC 7636 Appendix B.
    static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    static let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"

    /// Logs alice in at the demo RP; returns the session cookie's value.
    private func login(_ gateway: TokenPageHarness) throws -> String {
        let posted = try gateway.curl([
            "--data-urlencode", "user=alice", "--data-urlencode", "password=pw", "--data-urlencode", "return_to=/token",
            gateway.baseURL + "/login",
        ])
        #expect(posted.status == 303)
        return try #require(
            posted.headers("set-cookie").first { $0.hasPrefix("session=") }.map { String($0.dropFirst(8).prefix { $0 != ";" }) }
        )
    }

    private func redeem(_ gateway: TokenPageHarness, code: String, verifier: String = Self.verifier, app: String = "ios", extra: [String] = []) throws -> Curl.Result {
        try gateway.curl(
            extra + [
                "--data-urlencode", "grant_type=authorization_code", "--data-urlencode", "code=\(code)",
                "--data-urlencode", "code_verifier=\(verifier)", "--data-urlencode", "app=\(app)", gateway.baseURL + "/token",
            ]
        )
    }

    private func json(_ result: Curl.Result) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any], "\(result.body)")
    }

    @Test(arguments: ["--http1.1", "--http2"])
    func theCodeFlowEndToEnd(_ version: String) async throws {
        try await TokenPageHarness.with { gateway in
            let session = try self.login(gateway)
            let page = try gateway.curl([
                version, "-H", "Cookie: session=\(session)",
                gateway.baseURL + "/token?app=ios&state=S1&code_challenge=\(Self.challenge)&code_challenge_method=S256",
            ])
            #expect(page.status == 302, "\(page.body)")
            let location = try #require(page.header("location"))
            #expect(location.hasPrefix(TokenPageHarness.callback + "#code="))
            #expect(location.hasSuffix("&state=S1"))
            #expect(!location.contains("access_token"))
            let code = String(location.dropFirst((TokenPageHarness.callback + "#code=").count).prefix { $0 != "&" })

            // Redemption: no cookie, just the code and the verifier.
            let redeemed = try self.redeem(gateway, code: code, extra: [version])
            #expect(redeemed.status == 200, "\(redeemed.body)")
            #expect(redeemed.header("cache-control") == "no-store")
            #expect(redeemed.header("content-type") == "application/json")
            let object = try self.json(redeemed)
            #expect(object["token_type"] as? String == "bearer")
            let token = try #require(object["access_token"] as? String)
            let api = try gateway.curl([version, "-H", "Authorization: Bearer \(token)", gateway.baseURL + "/api/items"])
            #expect(api.status == 200)
            #expect(api.body.contains("\"user\":\"alice\""))

            // The code is no token.
            let asToken = try gateway.curl([version, "-H", "Authorization: Bearer \(code)", gateway.baseURL + "/api/items"])
            #expect(asToken.status == 401)

            // A replay with a wrong verifier gets nothing.
            let wrong = try self.redeem(gateway, code: code, verifier: String(repeating: "x", count: 43), extra: [version])
            #expect(wrong.status == 400)
            #expect(try self.json(wrong)["error"] as? String == "invalid_grant")
            #expect(!wrong.body.contains("access_token"))
            // Nor the right verifier for another app, nor a code from the past.
            #expect(try self.redeem(gateway, code: code, app: "android", extra: [version]).status == 400)
            gateway.clock.advance(by: 60)
            let late = try self.redeem(gateway, code: code, extra: [version])
            #expect(late.status == 400)
            #expect(try self.json(late)["error_description"] as? String == "the code has expired")

            // Neither the code, the verifier nor the token in a log line.
            for line in gateway.logLines.all {
                #expect(!line.contains(code) && !line.contains(Self.verifier) && !line.contains(token))
            }
            #expect(gateway.logLines.all.contains { $0.contains("token_page_code_redeemed") })
        }
    }

    /// The code the page puts in the callback for a logged-in browser.
    private func issueCode(_ gateway: TokenPageHarness, session: String, version: String) throws -> String {
        let page = try gateway.curl([
            version, "-H", "Cookie: session=\(session)",
            gateway.baseURL + "/token?app=ios&code_challenge=\(Self.challenge)&code_challenge_method=S256",
        ])
        #expect(page.status == 302, "\(page.body)")
        let location = try #require(page.header("location"))
        return String(location.dropFirst((TokenPageHarness.callback + "#code=").count).prefix { $0 != "&" })
    }

    /// RFC 6749 §4.1.2: a code used twice must be refused. A review found a code redeemable again and again
    /// within its 60 seconds, each time for a new token. The memory of redeemed codes is the process's, so a
    /// reload (a new configuration generation) between the two redemptions does not make it forget.
    @Test(arguments: ["--http1.1", "--http2"])
    func aCodeIsRedeemedOnceAcrossAReload(_ version: String) async throws {
        try await TokenPageHarness.with { gateway in
            let session = try self.login(gateway)
            let code = try self.issueCode(gateway, session: session, version: version)
            let first = try self.redeem(gateway, code: code, extra: [version])
            #expect(first.status == 200, "\(first.body)")
            let token = try #require(try self.json(first)["access_token"] as? String)

            func expectRefused(_ code: String) throws {
                let again = try self.redeem(gateway, code: code, extra: [version])
                #expect(again.status == 400, "\(again.body)")
                #expect(again.header("cache-control") == "no-store")
                let object = try self.json(again)
                #expect(object["error"] as? String == "invalid_grant")
                #expect(object["error_description"] as? String == "the code was already redeemed")
                #expect(object["access_token"] == nil)
            }
            try expectRefused(code)

            // Another code redeemed, then a reload: both stay used.
            let other = try self.issueCode(gateway, session: session, version: version)
            #expect(try self.redeem(gateway, code: other, extra: [version]).status == 200)
            try gateway.server.reload(configurationPath: gateway.directory + "/tokengate.yaml")
            #expect(gateway.server.generation == 2)
            try expectRefused(code)
            try expectRefused(other)
            // The page still works after the reload: a new code is redeemed once.
            let fresh = try self.issueCode(gateway, session: session, version: version)
            #expect(try self.redeem(gateway, code: fresh, extra: [version]).status == 200)
            try expectRefused(fresh)

            // The reason is in the access log; the code, the verifier and the token are not.
            #expect(gateway.logLines.all.filter { $0.contains("token_page_redeem_reused") }.count == 4)
            for line in gateway.logLines.all {
                #expect(!line.contains(code) && !line.contains(other) && !line.contains(Self.verifier) && !line.contains(token))
            }
        }
    }

    /// The app's side with the client library: a fresh verifier, the page URL with its challenge, the code from
    /// the callback, the redemption request as built, and the answer read into a stored token.
    @Test func theClientLibraryRedeemsTheCode() async throws {
        try await TokenPageHarness.with { gateway in
            let session = try self.login(gateway)
            let site = URL(string: gateway.baseURL)!
            let pkce = PKCEVerifier.random()
            let state = TokenPageURL.randomState()
            let page = try TokenPageURL(site: site, app: "android", state: state, pkce: pkce)
            let redirect = try gateway.curl(["-H", "Cookie: session=\(session)", page.url.absoluteString])
            #expect(redirect.status == 302, "\(redirect.body)")
            let callback = try #require(redirect.header("location").flatMap(URL.init(string:)))
            let delivery = try TokenCapture.deliveryFromCallback(
                callback,
                callback: TokenPageHarness.androidCallback,
                expectedState: state
            )
            guard case .code(let code) = delivery else {
                Issue.record("expected a code, got \(String(describing: delivery))")
                return
            }
            let answer = try gateway.send(try CodeRedemption.request(site: site, app: "android", code: code, verifier: pkce))
            var token: StoredToken? = try CodeRedemption.token(status: answer.status, body: Data(answer.body.utf8))
            var request = URLRequest(url: URL(string: gateway.baseURL + "/api/items")!)
            try request.attach(try #require(token), now: Date(timeIntervalSince1970: TimeInterval(gateway.clock.now)))
            let api = try gateway.send(request)
            #expect(api.status == 200)
            token = nil

            // Another verifier (an app that intercepted the callback and made its own) gets a refusal it can read.
            let thief = try gateway.send(try CodeRedemption.request(site: site, app: "android", code: code, verifier: .random()))
            do {
                _ = try CodeRedemption.token(status: thief.status, body: Data(thief.body.utf8))
                Issue.record("a wrong verifier got a token")
            } catch let error as TokengateClientError {
                #expect(error.code == .redemptionRefused)
                #expect(error.serverMessage == "the code_verifier does not match the code_challenge")
            }
        }
    }

    @Test func requiredRefusesAPageRequestWithoutAChallenge() async throws {
        try await TokenPageHarness.with { gateway in
            let session = try self.login(gateway)
            let refused = try gateway.curl(["-H", "Cookie: session=\(session)", gateway.baseURL + "/token?app=android&state=S"])
            #expect(refused.status == 400)
            #expect(try self.json(refused)["error"] as? String == "code_challenge_required")
            #expect(refused.header("location") == nil)
            let plain = try gateway.curl([
                "-H", "Cookie: session=\(session)",
                gateway.baseURL + "/token?app=android&code_challenge=\(Self.verifier)&code_challenge_method=plain",
            ])
            #expect(plain.status == 400)
            #expect(try self.json(plain)["error"] as? String == "invalid_code_challenge")
            let page = try gateway.curl([
                "-H", "Cookie: session=\(session)",
                gateway.baseURL + "/token?app=android&code_challenge=\(Self.challenge)&code_challenge_method=S256",
            ])
            #expect(page.header("location")?.hasPrefix(TokenPageHarness.androidCallback + "#code=") == true)
        }
    }

    @Test func redemptionBodiesAreFormsOfAFewKilobytes() async throws {
        try await TokenPageHarness.with { gateway in
            let asJSON = try gateway.curl(["-H", "Content-Type: application/json", "--data", "{}", gateway.baseURL + "/token"])
            #expect(asJSON.status == 400)
            // Two types, the form first: refused, not read as the first (the PKCE review found it read).
            let twoTypes = try OpenSSLClient.exchange(
                port: gateway.tlsPort,
                send: "POST /token HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                    + "Content-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\na=b"
            )
            #expect(twoTypes.hasPrefix("HTTP/1.1 400"), "\(twoTypes.prefix(200))")
            #expect(twoTypes.contains("application/x-www-form-urlencoded"), "\(twoTypes.prefix(600))")
            let large = "grant_type=authorization_code&code=" + String(repeating: "a", count: 5000)
            let tooLarge = try gateway.curl(["--data", large, gateway.baseURL + "/token"])
            #expect(tooLarge.status == 413)
            let chunked = try gateway.curl(["-H", "Transfer-Encoding: chunked", "--data", large, gateway.baseURL + "/token"])
            #expect(chunked.status == 413)
            // Found while reading as when announced: the page's answer, with its headers (a review found the
            // gateway's generic one).
            for answer in [tooLarge, chunked] {
                #expect(try self.json(answer)["error"] as? String == "invalid_request")
                #expect(answer.header("cache-control") == "no-store")
                #expect(answer.header("content-security-policy") != nil)
            }
            let empty = try gateway.curl(["-X", "POST", "-H", "Content-Type: application/x-www-form-urlencoded", gateway.baseURL + "/token"])
            #expect(empty.status == 400)
            #expect(try self.json(empty)["error"] as? String == "invalid_request")
        }
    }
}

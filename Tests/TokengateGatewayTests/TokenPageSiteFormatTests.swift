//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateClient
import TokengateTestSupport
import TokengateTokens

/// `mint: flask` on a token page, end to end: the page hands out Flask session cookies (api-only) instead of JWTs,
/// real Flask with Flask-Login (from PyPI, scripts/frameworks/flask_app.py) loads the user from them, and the gateway
/// accepts them as api tokens on a route reading the site's cookie format, cutoffs included.
@Suite(.serialized)
struct TokenPageSiteFormatTests {
    private func session(_ gateway: TokenPageHarness) throws -> String {
        let posted = try gateway.curl([
            "--data-urlencode", "user=alice", "--data-urlencode", "password=pw", gateway.baseURL + "/login",
        ])
        return try #require(
            posted.headers("set-cookie").first { $0.hasPrefix("session=") }.map { String($0.dropFirst(8).prefix { $0 != ";" }) })
    }

    private func api(_ gateway: TokenPageHarness, _ cookie: String) throws -> Curl.Result {
        try gateway.curl(["-H", "X-App-Session: \(cookie)", gateway.baseURL + "/api/me"])
    }

    @Test(.enabled(if: FrameworkScript.flask.isInstalled, "Flask and Flask-Login are needed (scripts/install-deps.sh test)"))
    func thePageMintsFlaskSessionsThatFlaskReads() async throws {
        try await TokenPageHarness.with(mintsFlask: true) { gateway in
            let session = try self.session(gateway)
            // The page's own delivery: the cookie, the title and the body hold the same Flask session.
            let page = try gateway.curl(["-H", "Cookie: session=\(session)", gateway.baseURL + "/token"])
            #expect(page.status == 200, "\(page.body)")
            let title = try #require(page.title)
            let token = try #require(TokenCapture.fromTitle(title), "the client library captures it").value
            #expect(token.split(separator: ".").count == 3 && !token.hasPrefix("eyJhbGci"), "a Flask session, not a JWT")
            let cookie = try #require(page.headers("set-cookie").first { $0.hasPrefix("auth_token=") })
            #expect(cookie.hasPrefix("auth_token=" + token + ";"))
            // The app's delivery, by the callback's fragment.
            let redirect = try gateway.curl(["-H", "Cookie: session=\(session)", gateway.baseURL + "/token?app=ios"])
            let location = try #require(redirect.header("location"))
            let capture = try TokenCapture.fromCallback(URL(string: location)!, callback: TokenPageHarness.callback)
            let appToken = try #require(capture?.value)

            // Flask's own login check loads alice from both; not from a tampered one, nor one of another secret.
            var tampered = Array(token.utf8)
            tampered[tampered.count - 3] = tampered[tampered.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            let read = try FrameworkScript.flask.run(
                secret: TokenPageHarness.flaskSecret,
                ops: [
                    ["op": "read", "cookie": token], ["op": "read", "cookie": appToken],
                    ["op": "read", "cookie": String(decoding: tampered, as: UTF8.self)],
                ])
            #expect(read[0]["user"] as? String == "alice", "\(read[0])")
            #expect(read[1]["user"] as? String == "alice", "\(read[1])")
            #expect(read[2]["user"] as? String == nil)
            let other = try FrameworkScript.flask.run(secret: "another site's secret", ops: [["op": "read", "cookie": token]])
            #expect(other[0]["user"] as? String == nil)
            // And Flask's own sessions are what the page mints: the gateway reads one Flask made the same way.
            let made = try FrameworkScript.flask.run(
                secret: TokenPageHarness.flaskSecret,
                ops: [["op": "login", "user": "bob", "login_at": gateway.clock.now, "api": true]])
            let flaskMade = try #require(made[0]["cookie"] as? String)
            #expect(try self.api(gateway, flaskMade).body.contains("\"user\":\"bob\""))

            // The gateway accepts the minted session as an api token on the site-format route...
            let accepted = try self.api(gateway, token)
            #expect(accepted.status == 200, "\(accepted.body)")
            #expect(accepted.body.contains("\"user\":\"alice\"") && accepted.body.contains("\"kind\":\"api\""), "\(accepted.body)")
            // ...until "disable mobile apps" cuts alice's api tokens off.
            gateway.clock.advance(by: 1)
            let cutoffs = gateway.cutoffs.load()
            gateway.cutoffs.store(
                CutoffSnapshot(
                    users: [CutoffUserKey("alice"): UserCutoffs(apiRevokedBefore: gateway.clock.now)],
                    generation: cutoffs.generation + 1))
            #expect(try self.api(gateway, token).status == 401)
            #expect(try self.api(gateway, appToken).status == 401)
            #expect(!gateway.logLines.all.contains { $0.contains(token) }, "no token in the log")
        }
    }
}

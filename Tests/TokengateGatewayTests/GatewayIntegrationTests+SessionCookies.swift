//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTestSupport
import TokengateTokens

/// A site's own login cookie as the token, end to end: the real framework (Rails 6.1, Flask, Django, Express with
/// keygrip) logs users in and sets its cookie; curl sends it through a real gateway socket; the gateway forwards
/// with the identity headers and without the cookie, or answers as it answers a bad JWT.
extension GatewayIntegrationTests {
    static let siteSecret = "tokengate-test-only-site-" + String(repeating: "c0ffee", count: 8)

    /// One framework, and how its issuer and cookie are named in the configuration.
    struct Site: Sendable, CustomStringConvertible {
        let script: FrameworkScript
        /// The issuer's block, less `name`, `kind` and the secret.
        let issuer: String
        let cookie: String
        /// cookie-session's `NAME.sig`, or nil.
        let signatureCookie: String?

        var description: String { self.script.name }

        static let all = [
            Site(
                script: .rails61,
                issuer: "format: rails, version: \"6.1\", cookie: _app_session, "
                    + "fields: { user_id: /user_id, login_time: /login_at, api_only: /api_only }",
                cookie: "_app_session", signatureCookie: nil),
            Site(
                script: .flask,
                issuer: "format: flask, fields: { user_id: /_user_id, login_time: /login_at, api_only: /api_only }",
                cookie: "session", signatureCookie: nil),
            Site(
                script: .django,
                issuer: "format: django, "
                    + "fields: { user_id: /_auth_user_id, login_time: /login_at, api_only: /api_only }",
                cookie: "sessionid", signatureCookie: nil),
            Site(
                script: .express,
                issuer: "format: cookie_session, "
                    + "fields: { user_id: /passport/user, login_time: /login_at, api_only: /api_only }",
                cookie: "session", signatureCookie: "session.sig"),
        ]

        /// The `Cookie` header for a login the framework answered with.
        func cookieHeader(_ login: [String: Any], value: String? = nil) -> String {
            var header = "theme=dark; \(self.cookie)=\(value ?? (login["cookie"] as? String ?? ""))"
            if let signatureCookie, let signature = login["sig"] as? String {
                header += "; \(signatureCookie)=\(signature)"
            }
            return header + "; lang=en"
        }
    }

    @Test(arguments: Site.all)
    func aSitesOwnLoginCookieIsTheTokenThroughTheGateway(_ site: Site) async throws {
        try #require(site.script.isInstalled, "\(site) is not installed (scripts/install-deps.sh test)")
        let now = Int64(Date().timeIntervalSince1970)
        let logins = try site.script.run(
            secret: Self.siteSecret,
            ops: [
                ["op": "login", "user": "42", "login_at": now - 100, "api": false],
                ["op": "login", "user": "7", "login_at": now - 100, "api": true],
                // Logged in three days ago: past the issuer's session_max_age of one day.
                ["op": "login", "user": "9", "login_at": now - 3 * 86_400, "api": false],
            ])
        let session = logins[0]
        let api = logins[1]
        let stale = logins[2]
        let sessionValue = try #require(session["cookie"] as? String)

        let harness = GatewayHarness()
        try FileManager.default.createDirectory(atPath: harness.directory, withIntermediateDirectories: true)
        try (Self.siteSecret + "\n").write(toFile: harness.directory + "/site.secret", atomically: true, encoding: .utf8)
        let headerRoute =
            site.signatureCookie == nil
            ? "  - { path_prefix: /mobile/, upstream: api, accept: [api, session], "
                + "session_cookie: { issuer: site, sources: [\"header:X-Site-Session\"] } }\n" : ""
        let routes = """
              - { path_prefix: /account/, upstream: api, accept: [session], session_cookie: site }
              - { path_prefix: /api/, upstream: api, accept: [api], sources: [authorization], session_cookie: site }
            \(headerRoute)  - { path_prefix: /, upstream: api, accept: none }
            """
        let sections = """
            issuers:
              - { name: site, kind: session_cookie, secret_file: site.secret, session_max_age: 1d, \(site.issuer) }
            """
        do {
            try await harness.start(routes: routes, sections: sections)
            try await self.checkSite(site, harness, session: session, api: api, stale: stale, now: now)
            // Neither the secret nor a cookie reaches a log line.
            for line in harness.logLines.all {
                #expect(!line.contains(Self.siteSecret), "the secret in a log line: \(line)")
                #expect(!line.contains(String(sessionValue.prefix(40))), "a cookie in a log line: \(line)")
            }
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    private func checkSite(
        _ site: Site, _ gateway: GatewayHarness, session: [String: Any], api: [String: Any], stale: [String: Any],
        now: Int64
    ) async throws {
        let sessionValue = try #require(session["cookie"] as? String)
        func get(_ path: String, cookie: String, _ extra: [String] = []) throws -> Curl.Result {
            try self.curl(gateway, ["-H", "Cookie: \(cookie)"] + extra + ["\(gateway.baseURL)\(path)"])
        }
        func echo(_ result: Curl.Result) throws -> (user: String?, headers: [String: String]) {
            let json = try #require(try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any])
            let pairs = (json["headers"] as? [[String]]) ?? []
            return (json["user"] as? String, Dictionary(pairs.map { ($0[0], $0[1]) }, uniquingKeysWith: { a, _ in a }))
        }

        // The framework's session cookie: forwarded as user 42's session, the login time as issued-at, the cookie
        // (and its signature cookie) taken out and the site's other cookies kept.
        let accepted = try get("/account/me", cookie: site.cookieHeader(session))
        #expect(accepted.status == 200, "\(site): \(accepted.body)")
        let seen = try echo(accepted)
        #expect(seen.user == "42")
        #expect(seen.headers["x-tokengate-token-kind"] == "session")
        #expect(seen.headers["x-tokengate-issued-at"] == String(now - 100))
        #expect(seen.headers["cookie"] == "theme=dark; lang=en", "\(site): \(seen.headers["cookie"] ?? "none")")
        #expect(!accepted.body.contains(sessionValue))

        // Tampered: the 401 a JWT with a bad signature gets, word for word.
        let tampered = Self.tamper(sessionValue)
        let refused = try get("/account/me", cookie: site.cookieHeader(session, value: tampered))
        #expect(refused.status == 401, "\(site): \(refused.body)")
        let badSignature = RejectionReason.badSignature.description
        #expect(
            refused.header("www-authenticate")
                == "Bearer realm=\"test.example\", error=\"invalid_token\", error_description=\"\(badSignature)\"")
        #expect(refused.body == "{\"error\":\"invalid_token\",\"error_description\":\"\(badSignature)\"}")
        // Garbage of the cookie's name is a 401 too, never a 500 or a hang.
        for junk in ["%", "--", "..", "a.b.c", String(repeating: "A", count: 3000)] {
            let result = try get("/account/me", cookie: site.cookieHeader(session, value: junk))
            #expect(result.status == 401, "\(site): \(junk.prefix(10)): \(result.status)")
        }

        // Logged in longer ago than session_max_age.
        let expired = try get("/account/me", cookie: site.cookieHeader(stale))
        #expect(expired.status == 401, "\(site): \(expired.body)")
        #expect(expired.body.contains(RejectionReason.expired.description))

        // The api-only flag makes an api token: refused where only sessions go (403 as for a JWT of the wrong
        // kind), accepted on the api route, which still takes a Bearer JWT too.
        let apiOnSession = try get("/account/me", cookie: site.cookieHeader(api))
        #expect(apiOnSession.status == 403, "\(site): \(apiOnSession.body)")
        let apiAccepted = try get("/api/items", cookie: site.cookieHeader(api))
        #expect(apiAccepted.status == 200, "\(site): \(apiAccepted.body)")
        #expect(try echo(apiAccepted).user == "7")
        #expect(try echo(apiAccepted).headers["x-tokengate-token-kind"] == "api")
        let jwt = try gateway.mint("alice")
        let bearer = try self.curl(gateway, ["-H", "Authorization: Bearer \(jwt)", "\(gateway.baseURL)/api/items"])
        #expect(bearer.status == 200)
        #expect(try echo(bearer).user == "alice")
        let both = try get("/api/items", cookie: site.cookieHeader(api), ["-H", "Authorization: Bearer \(jwt)"])
        #expect(both.status == 400, "two tokens are one too many: \(both.body)")

        // The CSRF rule of every cookie token: an unsafe request needs proof that it comes from the site itself.
        let crossSite = try get("/account/me", cookie: site.cookieHeader(session), ["-X", "POST", "--data", "x=1"])
        #expect(crossSite.status == 403, "\(site): \(crossSite.body)")
        let sameOrigin = try get(
            "/account/me", cookie: site.cookieHeader(session),
            ["-X", "POST", "--data", "x=1", "-H", "Sec-Fetch-Site: same-origin"])
        #expect(sameOrigin.status == 200, "\(site): \(sameOrigin.body)")

        // A cutoff after the login time ends the session; one at the login's very second does not.
        gateway.cutoffs.store(CutoffSnapshot(users: ["42": UserCutoffs(revokedBefore: now - 99)]))
        let revoked = try get("/account/me", cookie: site.cookieHeader(session))
        #expect(revoked.status == 401)
        #expect(revoked.body.contains(RejectionReason.revoked.description), "\(site): \(revoked.body)")
        gateway.cutoffs.store(CutoffSnapshot(users: ["42": UserCutoffs(revokedBefore: now - 100)]))
        #expect(try get("/account/me", cookie: site.cookieHeader(session)).status == 200)
        gateway.cutoffs.store(.empty)

        // From a header a client copies the cookie into (not for cookie-session, whose signature is a cookie).
        if site.signatureCookie == nil {
            let header = try self.curl(
                gateway, ["-H", "X-Site-Session: \(sessionValue)", "\(gateway.baseURL)/mobile/items"])
            #expect(header.status == 200, "\(site): \(header.body)")
            #expect(try echo(header).user == "42")
            #expect(try echo(header).headers["x-site-session"] == nil, "the header is stripped")
        } else {
            // cookie-session without its signature cookie, or with two.
            let value = "\(site.cookie)=\(sessionValue)"
            #expect(try get("/account/me", cookie: value).status == 401)
            let signature = try #require(session["sig"] as? String)
            let twice = "\(value); session.sig=\(signature); session.sig=\(signature)"
            #expect(try get("/account/me", cookie: twice).status == 400)
        }
    }

    /// One letter of the signed part changed to another letter, so the value keeps its encoding and only the
    /// authenticity check can catch it (never inside a `%XX` escape).
    static func tamper(_ value: String) -> String {
        var bytes = Array(value.utf8)
        var index = bytes.count / 3
        while index < bytes.count {
            let byte = bytes[index]
            let isLetter =
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            let escaped =
                (index >= 1 && bytes[index - 1] == UInt8(ascii: "%"))
                || (index >= 2 && bytes[index - 2] == UInt8(ascii: "%"))
            if isLetter, !escaped { break }
            index += 1
        }
        bytes[index] = bytes[index] == UInt8(ascii: "k") ? UInt8(ascii: "m") : UInt8(ascii: "k")
        return String(decoding: bytes, as: UTF8.self)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateClient

@testable import TokengateGateway

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The confirmation page (RFC 8252 §8.6) through the real gateway over real TLS, with curl: a custom-scheme app's
/// login waits for the user's "continue", which must come from the page itself, for this browser's session.
///
/// The harness's `consent` app (`tokengate-demo://consent`, `pkce: required`) is at the default for a custom
/// scheme (asked); `ios` is a custom-scheme app with `confirm: false`, `web` an https app at its default (not
/// asked), `web-confirm` an https app with `confirm: true`.
@Suite(.serialized)
struct TokenPageConfirmationTests {
    /// RFC 7636 Appendix B.
    static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    static let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    static let query = "app=consent&state=S1&code_challenge=\(challenge)&code_challenge_method=S256"

    /// Logs `user` in at the demo RP; returns the session cookie's value.
    private func login(_ gateway: TokenPageHarness, user: String = "alice") throws -> String {
        let posted = try gateway.curl([
            "--data-urlencode", "user=\(user)", "--data-urlencode", "password=pw", "--data-urlencode", "return_to=/token",
            gateway.baseURL + "/login",
        ])
        #expect(posted.status == 303)
        return try #require(
            posted.headers("set-cookie").first { $0.hasPrefix("session=") }.map { String($0.dropFirst(8).prefix { $0 != ";" }) }
        )
    }

    /// The confirmation page for `session`, the value and target of its "continue" form, and the confirmation
    /// cookie it set (`__Host-tokengate-confirm=…`, to send back with the click).
    private func page(
        _ gateway: TokenPageHarness,
        session: String,
        query: String = Self.query,
        extra: [String] = []
    ) throws -> (page: Curl.Result, value: String, action: String, cookie: String) {
        let page = try gateway.curl(extra + ["-H", "Cookie: session=\(session)", gateway.baseURL + "/token?" + query])
        #expect(page.status == 200, "\(page.body)")
        let body = page.body
        let value = try #require(body.range(of: "name=\"confirmation\" value=\"")).upperBound
        let action = try #require(body.range(of: "<form method=\"post\" action=\"")).upperBound
        let setCookie = try #require(page.headers("set-cookie").first { $0.hasPrefix("__Host-tokengate-confirm=") })
        return (
            page,
            String(body[value...].prefix { $0 != "\"" }),
            String(body[action...].prefix { $0 != "\"" }).replacingOccurrences(of: "&amp;", with: "&"),
            String(setCookie.prefix { $0 != ";" })
        )
    }

    /// A click on "continue" as a browser sends it (or as a forger tries to), with curl: `confirm` is the
    /// confirmation cookie pair, sent beside the session.
    private func click(
        _ gateway: TokenPageHarness,
        session: String?,
        confirm: String? = nil,
        action: String,
        body: String,
        headers: [String]? = nil,
        extra: [String] = []
    ) throws -> Curl.Result {
        var arguments = extra + ["--data-binary", body]
        for header in headers ?? ["Sec-Fetch-Site: same-origin", "Origin: \(gateway.baseURL)"] {
            arguments += ["-H", header]
        }
        let cookies = [session.map { "session=" + $0 }, confirm].compactMap { $0 }
        if !cookies.isEmpty { arguments += ["-H", "Cookie: " + cookies.joined(separator: "; ")] }
        return try gateway.curl(arguments + [gateway.baseURL + "/token" + action])
    }

    private func redeem(_ gateway: TokenPageHarness, code: String, extra: [String] = []) throws -> Curl.Result {
        try gateway.curl(
            extra + [
                "--data-urlencode", "grant_type=authorization_code", "--data-urlencode", "code=\(code)",
                "--data-urlencode", "code_verifier=\(Self.verifier)", "--data-urlencode", "app=consent",
                gateway.baseURL + "/token",
            ]
        )
    }

    @Test(arguments: ["--http1.1", "--http2"])
    func continueOnThePageDeliversTheCode(_ version: String) async throws {
        try await TokenPageHarness.with { gateway in
            let session = try self.login(gateway)
            let (page, value, action, confirm) = try self.page(gateway, session: session, extra: [version])
            // The page: the app's display name and the account, escaped; no code, no token, nothing to redirect;
            // the confirmation cookie only.
            #expect(page.header("location") == nil && page.headers("set-cookie").count == 1)
            #expect(page.header("set-cookie")?.hasSuffix("; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=300") == true)
            #expect(page.header("cache-control") == "no-store")
            #expect(page.header("x-frame-options") == "DENY")
            #expect(page.header("referrer-policy") == "same-origin")
            #expect(
                page.header("content-security-policy")
                    == "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self' tokengate-demo:")
            #expect(page.body.contains("<span id=\"app\">Demo &lt;App&gt;</span>"))
            #expect(page.body.contains("<strong id=\"account\">alice</strong>"))
            #expect(!page.body.contains("code=") && !page.body.contains("access_token") && !page.body.contains(session))
            #expect(action == "?" + Self.query + "&confirm=1")

            // A click right away is too soon (double-clickjacking): the page again, with a fresh value and cookie.
            let early = try self.click(gateway, session: session, confirm: confirm, action: action, body: "confirmation=" + value, extra: [version])
            #expect(early.status == 200 && early.body.contains("id=\"notice\"") && early.body.contains("id=\"continue\""), "\(early.body)")
            #expect(early.header("set-cookie")?.hasPrefix("__Host-tokengate-confirm=") == true && early.header("set-cookie")?.contains(confirm) == false)
            #expect(gateway.logLines.all.last { $0.contains("reason=") }?.contains("reason=token_page_confirm_too_soon") == true)
            gateway.clock.advance(by: 1)
            let clicked = try self.click(gateway, session: session, confirm: confirm, action: action, body: "confirmation=" + value, extra: [version])
            #expect(clicked.status == 303, "\(clicked.body)")
            #expect(clicked.header("set-cookie") == "__Host-tokengate-confirm=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0")
            let location = try #require(clicked.header("location"))
            #expect(location.hasPrefix(TokenPageHarness.consentCallback + "#code=") && location.hasSuffix("&state=S1"))
            let code = String(location.dropFirst((TokenPageHarness.consentCallback + "#code=").count).prefix { $0 != "&" })
            let redeemed = try self.redeem(gateway, code: code, extra: [version])
            #expect(redeemed.status == 200, "\(redeemed.body)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(redeemed.body.utf8)) as? [String: Any])
            let token = try #require(object["access_token"] as? String)
            let api = try gateway.curl([version, "-H", "Authorization: Bearer \(token)", gateway.baseURL + "/api/items"])
            #expect(api.status == 200 && api.body.contains("\"user\":\"alice\""))

            // The client library reads that callback as it always has: the app only waited longer.
            let fromLibrary = try TokenCapture.codeFromCallback(
                URL(string: location)!, callback: TokenPageHarness.consentCallback, expectedState: "S1")
            #expect(fromLibrary?.value == code)

            let lines = gateway.logLines.all
            #expect(lines.contains { $0.contains("reason=token_page_confirm_shown") })
            #expect(lines.contains { $0.contains("reason=token_page_issued_code") && $0.contains("user=alice") })
            for line in lines {
                #expect(!line.contains(value) && !line.contains(session) && !line.contains(code) && !line.contains(token))
                #expect(!line.contains(confirm.dropFirst("__Host-tokengate-confirm=".count)))
            }
        }
    }

    @Test func forgedClicksAreRefused() async throws {
        try await TokenPageHarness.with { gateway in
            let alice = try self.login(gateway)
            let bob = try self.login(gateway, user: "bob")
            let (_, value, action, alicesCookie) = try self.page(gateway, session: alice)
            let (_, bobsValue, _, bobsCookie) = try self.page(gateway, session: bob)
            // alice in another browser (a second later, so another session token): her value from there is not
            // this browser's. The second also lets the clicks below come late enough.
            gateway.clock.advance(by: 1)
            let aliceElsewhere = try self.login(gateway)
            #expect(aliceElsewhere != alice)
            let (_, _, _, elsewhereCookie) = try self.page(gateway, session: aliceElsewhere)

            func refused(_ result: Curl.Result, _ status: Int, _ reason: String, sourceLocation: SourceLocation = #_sourceLocation) {
                #expect(result.status == status, "\(result.body)", sourceLocation: sourceLocation)
                #expect(result.header("location") == nil, sourceLocation: sourceLocation)
                #expect(result.header("content-type") == "text/html; charset=utf-8", sourceLocation: sourceLocation)
                #expect(result.header("cache-control") == "no-store", sourceLocation: sourceLocation)
                #expect(result.body.contains("Nothing was sent to the app"), sourceLocation: sourceLocation)
                #expect(
                    gateway.logLines.all.last { $0.contains("reason=") }?.contains("reason=" + reason) == true,
                    sourceLocation: sourceLocation)
            }
            let site = gateway.baseURL
            refused(try self.click(gateway, session: alice, confirm: alicesCookie, action: action, body: "confirmation=" + bobsValue), 403, "token_page_confirm_mismatch")
            refused(try self.click(gateway, session: aliceElsewhere, confirm: elsewhereCookie, action: action, body: "confirmation=" + value), 403, "token_page_confirm_mismatch")
            // Without the page's cookie (another site's form: `SameSite=Strict` keeps it back), or with two.
            refused(try self.click(gateway, session: alice, action: action, body: "confirmation=" + value), 403, "token_page_confirm_no_cookie")
            refused(
                try self.click(gateway, session: alice, confirm: alicesCookie + "; " + bobsCookie, action: action, body: "confirmation=" + value),
                403, "token_page_confirm_no_cookie")
            refused(
                try self.click(gateway, session: alice, confirm: alicesCookie, action: action.replacingOccurrences(of: "S1", with: "S2"), body: "confirmation=" + value),
                403, "token_page_confirm_mismatch")
            refused(try self.click(gateway, session: alice, confirm: alicesCookie, action: action, body: "confirmation=AAAA"), 400, "token_page_confirm_malformed")
            refused(try self.click(gateway, session: alice, confirm: alicesCookie, action: action, body: "other=1"), 400, "token_page_confirm_bad_request")
            // Where the form came from, as the browser says it: another site's form (a top-level navigation, which
            // the page's check against other sites' subresources lets through), a sibling subdomain's, or one the
            // user did not submit from a page at all (`none`: a typed or opened address).
            for site in ["cross-site", "same-site", "none"] {
                let headers = ["Sec-Fetch-Site: \(site)", "Sec-Fetch-Mode: navigate", "Sec-Fetch-Dest: document"]
                refused(try self.click(gateway, session: alice, confirm: alicesCookie, action: action, body: "confirmation=" + value, headers: headers), 403, "token_page_confirm_cross_site")
            }
            for origin in ["https://evil.example", "null", site.replacingOccurrences(of: "https:", with: "http:")] {
                refused(
                    try self.click(gateway, session: alice, confirm: alicesCookie, action: action, body: "confirmation=" + value, headers: ["Sec-Fetch-Site: same-origin", "Origin: \(origin)"]),
                    403, "token_page_confirm_bad_origin")
            }
            // The body's shape, as for a redemption.
            refused(
                try self.click(gateway, session: alice, confirm: alicesCookie, action: action, body: "confirmation=" + value, headers: ["Content-Type: application/x-www-form-urlencoded", "Content-Type: text/plain"]),
                400, "token_page_confirm_bad_request")
            refused(
                try self.click(gateway, session: alice, confirm: alicesCookie, action: action, body: "confirmation=" + value + "&pad=" + String(repeating: "x", count: 1024)),
                413, "token_page_confirm_too_large")
            refused(
                try self.click(gateway, session: alice, confirm: alicesCookie, action: action, body: "confirmation=" + value + "&pad=" + String(repeating: "x", count: 1024), headers: ["Transfer-Encoding: chunked"]),
                413, "token_page_confirm_too_large")
            // Without a login, the click goes to the login (and back to the page), never to the app.
            let anonymous = try self.click(gateway, session: nil, confirm: alicesCookie, action: action, body: "confirmation=" + value)
            #expect(anonymous.status == 303)
            #expect(anonymous.header("location")?.hasPrefix("/login?return_to=%2Ftoken%3Fapp%3Dconsent") == true)
            // After its five minutes the value is no good.
            gateway.clock.advance(by: 300)
            refused(try self.click(gateway, session: alice, confirm: alicesCookie, action: action, body: "confirmation=" + value), 400, "token_page_confirm_expired")
            // The real click, with a fresh page, still works, and no header at all (an older web view) is fine too.
            let (_, fresh, _, freshCookie) = try self.page(gateway, session: alice)
            gateway.clock.advance(by: 1)
            let ok = try self.click(gateway, session: alice, confirm: freshCookie, action: action, body: "confirmation=" + fresh, headers: [])
            #expect(ok.status == 303 && ok.header("location")?.hasPrefix(TokenPageHarness.consentCallback + "#code=") == true)

            // Counted, by reason, as the page's other refusals are.
            let metrics = gateway.server.metrics.render()
            for (reason, count) in [
                ("token_page_confirm_mismatch", 3), ("token_page_confirm_cross_site", 3), ("token_page_confirm_bad_origin", 3),
                ("token_page_confirm_too_large", 2), ("token_page_confirm_expired", 1), ("token_page_confirm_malformed", 1),
                ("token_page_confirm_no_cookie", 2),
            ] {
                #expect(metrics.contains(#"tokengate_rejections_total{route="/token",reason="\#(reason)"} \#(count)"#), "\(reason)")
            }
            for line in gateway.logLines.all {
                #expect(!line.contains(value) && !line.contains(bobsValue) && !line.contains(alice) && !line.contains(bob))
                #expect(!line.contains(alicesCookie.dropFirst("__Host-tokengate-confirm=".count)))
            }
        }
    }

    @Test func cancelGoesToTheCallbackAsTheCancelLinkDoes() async throws {
        try await TokenPageHarness.with { gateway in
            let session = try self.login(gateway)
            let (page, _, _, _) = try self.page(gateway, session: session)
            #expect(page.body.contains("<form method=\"get\" action=\"\">"))
            // What the cancel form submits: its fields, as the query of the page's own path.
            let canceled = try gateway.curl(["-H", "Cookie: session=\(session)", gateway.baseURL + "/token?app=consent&cancel=1&state=S1"])
            #expect(canceled.status == 302)
            let location = try #require(canceled.header("location"))
            #expect(location == TokenPageHarness.consentCallback + "?status=unauthorized&message=user%20canceled&state=S1")
            do {
                _ = try TokenCapture.codeFromCallback(URL(string: location)!, callback: TokenPageHarness.consentCallback, expectedState: "S1")
                Issue.record("a cancel read as a code")
            } catch let error as TokengateClientError {
                #expect(error.code == .unauthorized)
            }
        }
    }

    @Test func httpsAppsAreNotAskedAndEitherDefaultCanBeOverridden() async throws {
        try await TokenPageHarness.with { gateway in
            let session = try self.login(gateway)
            func get(_ query: String) throws -> Curl.Result {
                try gateway.curl(["-H", "Cookie: session=\(session)", gateway.baseURL + "/token?" + query])
            }
            let web = try get("app=web&state=S1&code_challenge=\(Self.challenge)&code_challenge_method=S256")
            #expect(web.status == 302)
            #expect(web.header("location")?.hasPrefix(TokenPageHarness.webCallback + "#code=") == true)
            // A custom scheme with `confirm: false`: as before this change (and the configuration warns).
            let ios = try get("app=ios&state=S1&code_challenge=\(Self.challenge)&code_challenge_method=S256")
            #expect(ios.status == 302)
            #expect(ios.header("location")?.hasPrefix(TokenPageHarness.callback + "#code=") == true)
            // An https app with `confirm: true` is asked, and its form may go on to its own origin only.
            let (asked, value, action, confirm) = try self.page(gateway, session: session, query: "app=web-confirm&state=S1")
            gateway.clock.advance(by: 1)
            #expect(
                asked.header("content-security-policy")
                    == "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self' https://app.example")
            let clicked = try self.click(gateway, session: session, confirm: confirm, action: action, body: "confirmation=" + value)
            #expect(clicked.status == 303)
            #expect(clicked.header("location")?.hasPrefix(TokenPageHarness.webCallback + "#access_token=") == true)

            // The warning for `ios`, at a reload as at start.
            try gateway.server.reload(configurationPath: gateway.directory + "/tokengate.yaml")
            let warnings = gateway.logLines.all.filter { $0.contains("confirm is false on the custom-scheme callback") }
            #expect(warnings.count == 2, "ios and android: \(warnings)")
            #expect(warnings.contains { $0.contains("(ios)") && $0.contains(TokenPageHarness.callback) })
        }
    }

    /// `POST /token` without `confirm` in its query is a redemption, read exactly as before, even with a
    /// `confirmation` in its body; with it, never one.
    @Test func redemptionAndConfirmationStayApart() async throws {
        try await TokenPageHarness.with { gateway in
            let session = try self.login(gateway)
            let (_, value, action, confirm) = try self.page(gateway, session: session)
            let redemption = try gateway.curl(["-H", "Cookie: session=\(session)", "--data-binary", "confirmation=" + value, gateway.baseURL + "/token"])
            #expect(redemption.status == 400)
            #expect(redemption.header("content-type") == "application/json")
            #expect(redemption.body == #"{"error":"invalid_request","error_description":"grant_type is missing"}"#)
            let asConfirmation = try self.click(
                gateway, session: session, confirm: confirm, action: action,
                body: "grant_type=authorization_code&code=x&code_verifier=\(Self.verifier)&app=consent")
            #expect(asConfirmation.status == 400)
            #expect(asConfirmation.header("content-type") == "text/html; charset=utf-8")
            #expect(gateway.logLines.all.last { $0.contains("reason=") }?.contains("reason=token_page_confirm_bad_request") == true)
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTestSupport

/// The connected-apps page in a real browser, and attacked with curl, over the real gateway (the demo RP behind it,
/// real TLS on loopback, a SQLite store that keeps devices).
///
/// Two devices of alice get tokens from the token page (an app's redirect and the page's own delivery). Debian's
/// headless Chromium (scripts/browser/cdp_token_page.py, as for the token page) opens the connected-apps page, is
/// sent to the login form, logs in, sees both devices and presses "sign out" on one; the page comes back saying so.
/// Then that device's token gets `401` (`device_revoked`) on the API while the other device's token still passes.
@Suite(.serialized)
struct ConnectedAppsBrowserTests {
    typealias Tools = TokenPageBrowserTests.Tools

    /// What the script prints with `--path` and `--press`.
    struct Report: Decodable {
        struct Device: Decodable, Equatable {
            var device: String
            var app: String
            var created: String
            var refreshed: String
            var revoked: Bool
            var button: Bool
        }

        struct Page: Decodable {
            var href: String
            var title: String
            var notice: String?
            var html: String?
            var devices: [Device]?
        }

        struct Login: Decodable {
            var page: Page
        }

        struct Request: Decodable, Equatable {
            var url: String
            var method: String
        }

        var error: String?
        var login: Login?
        var tokenPage: Page?
        var after: Page?
        var crossSite: Page?
        var requests: [Request]?

        enum CodingKeys: String, CodingKey {
            case error, login, after, requests
            case tokenPage = "token_page"
            case crossSite = "cross_site"
        }
    }

    /// Logs alice in with curl (the demo RP's form) and has the token page mint one token by the `ios` app's
    /// redirect and one by the page itself: two devices.
    private func twoDevices(_ gateway: TokenPageHarness) throws -> (app: String, byHand: String) {
        let posted = try gateway.curl([
            "--data-urlencode", "user=alice", "--data-urlencode", "password=pw", "--data-urlencode", "return_to=/token",
            gateway.baseURL + "/login",
        ])
        let session = try #require(
            posted.headers("set-cookie").first { $0.hasPrefix("session=") }.map { String($0.dropFirst(8).prefix { $0 != ";" }) })
        let redirect = try gateway.curl(["-H", "Cookie: session=\(session)", gateway.baseURL + "/token?app=ios"])
        #expect(redirect.status == 302, "\(redirect.body)")
        let location = try #require(redirect.header("location"))
        let fragment = try #require(location.split(separator: "#").last)
        let app = try #require(
            fragment.split(separator: "&").first { $0.hasPrefix("access_token=") }.map { String($0.dropFirst(13)) })
        let page = try gateway.curl(["-H", "Cookie: session=\(session)", gateway.baseURL + "/token"])
        #expect(page.status == 200)
        let byHand = try #require(page.title.map { String($0.dropFirst("tokengate-token:".count)) })
        return (app, byHand)
    }

    /// The token's device (`did`), read from its payload.
    private func device(of token: String) throws -> String {
        var payload = String(token.split(separator: ".")[1]).replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
        payload += String(repeating: "=", count: (4 - payload.count % 4) % 4)
        let claims = try #require(try JSONSerialization.jsonObject(with: Data(base64Encoded: payload)!) as? [String: Any])
        return try #require(claims["did"] as? String)
    }

    private func apiStatus(_ gateway: TokenPageHarness, _ token: String) throws -> Int {
        try gateway.curl(["-H", "Authorization: Bearer \(token)", gateway.baseURL + "/api/me"]).status
    }

    private func browse(_ gateway: TokenPageHarness, _ options: [String]) async throws -> (ChildProcess.Result, Report) {
        let arguments = [
            "-k", "10", "120", "/usr/bin/env", "python3", TokenPageBrowserTests.script,
            "--chromium", try #require(Tools.found.chromium),
            "--base", gateway.baseURL, "--user", "alice", "--password", "pw",
            "--cert", gateway.certificatePath, "--timeout", "90",
            "--path", TokenPageHarness.connectedAppsPath,
        ] + options
        // Seconds of waiting: on a Dispatch thread, not the cooperative pool (see TokenPageBrowserTests.browse).
        let result = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try ChildProcess.run("/usr/bin/timeout", arguments) })
            }
        }
        let report = try #require(
            try? JSONDecoder().decode(Report.self, from: Data(result.stdout.utf8)),
            "the browser script printed no report (exit \(result.status)):\n\(result.stderr)")
        return (result, report)
    }

    @Test(.enabled(if: Tools.found.missing.isEmpty, Tools.skipReason), .timeLimit(.minutes(3)))
    func chromiumSignsOutOneDeviceAndOnlyItsTokenDies() async throws {
        try await TokenPageHarness.with(devices: true) { gateway in
            let tokens = try self.twoDevices(gateway)
            let phone = try self.device(of: tokens.app)
            let laptop = try self.device(of: tokens.byHand)
            #expect(phone != laptop)
            #expect(try self.apiStatus(gateway, tokens.app) == 200)
            #expect(try self.apiStatus(gateway, tokens.byHand) == 200)

            let (result, report) = try await self.browse(gateway, ["--press", "revoke-" + phone])
            #expect(result.status == 0, "the browser run failed: \(report.error ?? "?")\n\(result.stderr)")
            let login = try #require(report.login)
            #expect(login.page.href == gateway.baseURL + "/login?return_to=%2Ftoken%2Fapps")

            // Logged in: the page lists both devices, each with its button.
            let page = try #require(report.tokenPage)
            #expect(page.href == gateway.baseURL + "/token/apps")
            #expect(page.title == "Connected apps")
            let devices = try #require(page.devices)
            #expect(Set(devices.map(\.device)) == [phone, laptop])
            #expect(devices.first { $0.device == phone }?.app == "ios")
            #expect(devices.first { $0.device == laptop }?.app == "copied by hand")
            #expect(devices.allSatisfy { $0.button && !$0.revoked && $0.created.hasSuffix(" UTC") && $0.refreshed == "never" })
            let html = try #require(page.html)
            #expect(!html.contains(tokens.app) && !html.contains(tokens.byHand), "no token on the page")

            // The button posted the page's own form; the browser came back to the page, which says so.
            let after = try #require(report.after)
            #expect(after.href == gateway.baseURL + "/token/apps?done=revoked")
            #expect(after.notice?.hasPrefix("The device was signed out.") == true)
            let left = try #require(after.devices)
            #expect(left.first { $0.device == phone }.map { $0.revoked && !$0.button } == true)
            #expect(left.first { $0.device == laptop }.map { !$0.revoked && $0.button } == true)
            let requests = try #require(report.requests)
            #expect(requests.suffix(2) == [
                .init(url: gateway.baseURL + "/token/apps", method: "POST"),
                .init(url: gateway.baseURL + "/token/apps?done=revoked", method: "GET"),
            ])

            // The revoked device's token is refused at once; the other one still passes.
            let refused = try gateway.curl(["-H", "Authorization: Bearer \(tokens.app)", gateway.baseURL + "/api/me"])
            #expect(refused.status == 401)
            #expect(try self.apiStatus(gateway, tokens.byHand) == 200)
            let lines = gateway.logLines.all
            #expect(lines.contains { $0.contains("reason=device_revoked") })
            #expect(lines.contains { $0.contains("method=POST") && $0.contains("reason=connected_apps_device_revoked") })
            #expect(lines.contains { $0.contains("device revoked by its user") && $0.contains("user=alice") && $0.contains(phone) })
            #expect(!lines.contains { $0.contains(tokens.app) || $0.contains(tokens.byHand) }, "no token in the log")
        }
    }

    /// Another site's page, in the logged-in browser, submits a form to the page at once (with a real value of the
    /// page, for another browser): the browser marks it cross-site and sends no `SameSite=Strict` cookie, and the
    /// gateway refuses it before its body is read. Nothing changes.
    @Test(.enabled(if: Tools.found.missing.isEmpty, Tools.skipReason), .timeLimit(.minutes(3)))
    func chromiumSubmitsAnotherSitesFormAndIsRefused() async throws {
        try await TokenPageHarness.with(devices: true) { gateway in
            let tokens = try self.twoDevices(gateway)
            let posted = try gateway.curl([
                "--data-urlencode", "user=alice", "--data-urlencode", "password=pw", gateway.baseURL + "/login",
            ])
            let session = try #require(
                posted.headers("set-cookie").first { $0.hasPrefix("session=") }.map { String($0.prefix { $0 != ";" }) })
            let page = try gateway.curl(["-H", "Cookie: \(session)", gateway.baseURL + "/token/apps"])
            let disable = try #require(page.body.range(of: "value=\"disable_mobile_apps\""))
            let start = try #require(
                page.body.range(of: "name=\"confirmation\" value=\"", options: .backwards, range: page.body.startIndex..<disable.lowerBound))
            let value = String(page.body[start.upperBound...].prefix { $0 != "\"" })

            let (result, report) = try await self.browse(
                gateway, ["--cross-site-post", "action=disable_mobile_apps&confirmation=\(value)"])
            #expect(result.status == 0, "the browser run failed: \(report.error ?? "?")\n\(result.stderr)")
            #expect(report.tokenPage?.devices?.count == 2, "the browser was logged in and saw the page")
            let landed = try #require(report.crossSite)
            #expect(landed.href == gateway.baseURL + "/token/apps")
            #expect(landed.title == "The confirmation came from another site", "\(landed.title)")
            let requests = try #require(report.requests)
            #expect(requests.last == .init(url: gateway.baseURL + "/token/apps", method: "POST"))
            let lines = gateway.logLines.all
            #expect(lines.contains { $0.contains("method=POST") && $0.contains("reason=token_page_confirm_cross_site") })
            #expect(!lines.contains { $0.contains("reason=connected_apps_disabled") })
            #expect(try self.apiStatus(gateway, tokens.app) == 200, "nothing was disabled")
            #expect(try self.apiStatus(gateway, tokens.byHand) == 200)
        }
    }

    /// What another site can send: the gateway refuses it before anything changes, and the device keeps working.
    @Test(.timeLimit(.minutes(2)))
    func crossSitePostsAreRefused() async throws {
        try await TokenPageHarness.with(devices: true) { gateway in
            let tokens = try self.twoDevices(gateway)
            let phone = try self.device(of: tokens.app)
            let posted = try gateway.curl([
                "--data-urlencode", "user=alice", "--data-urlencode", "password=pw", gateway.baseURL + "/login",
            ])
            let session = try #require(
                posted.headers("set-cookie").first { $0.hasPrefix("session=") }.map { String($0.prefix { $0 != ";" }) })
            // The page, as alice's browser gets it: its confirmation cookie and the phone's button.
            let page = try gateway.curl(["-H", "Cookie: \(session)", gateway.baseURL + "/token/apps"])
            #expect(page.status == 200)
            #expect(page.header("content-security-policy")?.contains("frame-ancestors 'none'") == true)
            #expect(page.header("cache-control") == "no-store")
            let confirm = try #require(
                page.headers("set-cookie").first { $0.hasPrefix("__Host-tokengate-confirm=") }.map { String($0.prefix { $0 != ";" }) })
            let button = try #require(page.body.range(of: "name=\"device\" value=\"\(phone)\""))
            let formStart = try #require(page.body.range(of: "name=\"confirmation\" value=\"", options: .backwards, range: page.body.startIndex..<button.lowerBound))
            let value = String(page.body[formStart.upperBound...].prefix { $0 != "\"" })
            try await Task.sleep(for: .milliseconds(1100))  // A person reads the page first (the minimum delay).

            func post(_ fields: [String], _ body: String) throws -> Curl.Result {
                try gateway.curl(["-H", "Content-Type: application/x-www-form-urlencoded"] + fields.flatMap { ["-H", $0] }
                    + ["--data", body, gateway.baseURL + "/token/apps"])
            }
            let form = "action=revoke&device=\(phone)&confirmation=\(value)"
            // Another origin, with every cookie and the right value (a page of another site that got them all).
            let foreign = try post(["Cookie: \(session); \(confirm)", "Origin: https://evil.example"], form)
            #expect(foreign.status == 403, "\(foreign.body)")
            let crossSite = try post(["Cookie: \(session); \(confirm)", "Sec-Fetch-Site: cross-site"], form)
            #expect(crossSite.status == 403)
            // A cross-site form as a browser sends it: no Origin the page would accept, and no SameSite=Strict
            // cookie (the session cookie is Lax and comes along).
            let noCookie = try post(["Cookie: \(session)"], form)
            #expect(noCookie.status == 403)
            let nullOrigin = try post(["Cookie: \(session); \(confirm)", "Origin: null"], form)
            #expect(nullOrigin.status == 403)
            // Without the confirmation value, or with another button's.
            let noValue = try post(["Cookie: \(session); \(confirm)", "Origin: \(gateway.baseURL)"], "action=revoke&device=\(phone)")
            #expect(noValue.status == 400)
            let other = try post(["Cookie: \(session); \(confirm)", "Origin: \(gateway.baseURL)"], "action=disable_mobile_apps&confirmation=\(value)")
            #expect(other.status == 403)
            #expect(try self.apiStatus(gateway, tokens.app) == 200, "nothing was revoked")
            let lines = gateway.logLines.all
            #expect(lines.contains { $0.contains("reason=token_page_confirm_bad_origin") })
            // A cross-site POST that is no navigation is refused before the page sees it, as every token page request.
            #expect(lines.contains { $0.contains("reason=cross_site_token_page") })
            #expect(lines.contains { $0.contains("reason=connected_apps_no_cookie") })
            #expect(lines.contains { $0.contains("reason=connected_apps_bad_request") })
            #expect(lines.contains { $0.contains("reason=connected_apps_mismatch") })
            #expect(!lines.contains { $0.contains(value) }, "the confirmation value is never logged")

            // The same request from the page itself works: "disable mobile apps" ends both devices' tokens.
            let disable = try #require(page.body.range(of: "value=\"disable_mobile_apps\""))
            let disableStart = try #require(page.body.range(of: "name=\"confirmation\" value=\"", options: .backwards, range: page.body.startIndex..<disable.lowerBound))
            let disableValue = String(page.body[disableStart.upperBound...].prefix { $0 != "\"" })
            // The refusals cleared the cookie in a browser; curl keeps sending it, and the value is still bound to it.
            gateway.clock.advance(by: 1)  // The cutoff compares whole seconds: tokens from before it die.
            let done = try post(["Cookie: \(session); \(confirm)", "Origin: \(gateway.baseURL)", "Sec-Fetch-Site: same-origin"], "action=disable_mobile_apps&confirmation=\(disableValue)")
            #expect(done.status == 303, "\(done.body)")
            #expect(done.header("location") == "/token/apps?done=disabled")
            #expect(try self.apiStatus(gateway, tokens.app) == 401)
            #expect(try self.apiStatus(gateway, tokens.byHand) == 401)
            #expect(try gateway.curl(["-H", "Cookie: \(session)", gateway.baseURL + "/account/profile"]).status == 200, "the browser session stays")
        }
    }
}

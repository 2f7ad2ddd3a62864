//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateClient
import TokengateGateway
import TokengateTLS
import TokengateTestSupport
import TokengateTokens

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Issue 6 item 4: a real browser through the token page, as an app's embedded web view goes through it.
///
/// Debian's headless Chromium, driven over the Chrome DevTools Protocol by scripts/browser/cdp_token_page.py
/// (standard-library Python: it starts the browser in its own process group with a temporary profile, always
/// kills it and removes the profile, and bounds every wait), opens the token page of the real gateway (demo RP
/// behind it, real TLS on loopback), is sent to the login form, types the user and password and presses the
/// button, and lands on the token page. The script reports what the browser holds; this test checks it.
///
/// TLS is real and checked: Chromium trusts exactly the harness certificate's public key
/// (`--ignore-certificate-errors-spki-list`, a pin) rather than ignoring certificate errors, and the second
/// test shows that the same browser refuses the page when it pins a different key.
@Suite(.serialized)
struct TokenPageBrowserTests {
    /// What the script prints (scripts/browser/cdp_token_page.py, `drive`).
    struct Report: Decodable {
        struct Field: Decodable {
            var type: String
            var value: String
        }

        struct Form: Decodable {
            var action: String?
            var method: String
            var user: Field?
            var password: Field?
            var returnTo: Field?
            var button: Bool

            enum CodingKeys: String, CodingKey {
                case action, method, user, password, button
                case returnTo = "return_to"
            }
        }

        struct Page: Decodable {
            var href: String
            var title: String
        }

        struct Login: Decodable {
            var page: Page
            var form: Form?
            var typed: [TypedValue]?
        }

        /// `[user, password length]`: what the fields held after typing.
        enum TypedValue: Decodable, Equatable {
            case text(String)
            case number(Int)

            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let number = try? container.decode(Int.self) {
                    self = .number(number)
                } else {
                    self = .text(try container.decode(String.self))
                }
            }
        }

        /// Its description leaves out the title, the body and `document.cookie`, which may hold the token.
        struct TokenPage: Decodable, CustomStringConvertible {
            var href: String
            var title: String
            var readyState: String
            var cookie: String
            var bodyToken: String?
            /// With `--app`: the page's markup and its buttons' ids (the confirmation page).
            var html: String?
            var buttons: [String]?

            var description: String { "token page \(self.href) (\(self.readyState))" }

            enum CodingKeys: String, CodingKey {
                case href, title, readyState, cookie, html, buttons
                case bodyToken = "body_token"
            }
        }

        /// A 3xx the browser received (with `--app`). Its description leaves out the location, which may hold a
        /// code.
        struct Redirect: Decodable, CustomStringConvertible {
            var status: Int
            var location: String?

            var description: String { "\(self.status) to \(self.location.map { String($0.prefix(24)) + "…" } ?? "nowhere")" }
        }

        /// Its description leaves out the value, so a failed expectation never prints a token.
        struct Cookie: Decodable, CustomStringConvertible {
            var name: String
            var value: String
            var domain: String
            var path: String
            var httpOnly: Bool
            var secure: Bool
            var sameSite: String?

            var description: String {
                "\(self.name)=… domain=\(self.domain) path=\(self.path) httpOnly=\(self.httpOnly) "
                    + "secure=\(self.secure) sameSite=\(self.sameSite ?? "unset")"
            }
        }

        struct Request: Decodable, Equatable {
            var url: String
            var method: String
        }

        var error: String?
        var login: Login?
        var tokenPage: TokenPage?
        var cookies: [Cookie]?
        var requests: [Request]?
        var redirects: [Redirect]?
        var browser: String?
        var tls: String?
        var timings: [String: Int]?

        enum CodingKeys: String, CodingKey {
            case error, login, cookies, requests, redirects, browser, tls, timings
            case tokenPage = "token_page"
        }
    }

    /// The programs the test needs, found where Debian puts them; `missing` names what is not there.
    struct Tools {
        var chromium: String?
        var missing: [String]

        static let found: Tools = {
            let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
                + ["/usr/bin", "/usr/local/bin"]
            func locate(_ names: [String]) -> String? {
                for directory in directories {
                    for name in names where FileManager.default.isExecutableFile(atPath: directory + "/" + name) {
                        return directory + "/" + name
                    }
                }
                return nil
            }
            let chromium = locate(["chromium", "chromium-browser"])
            var missing: [String] = []
            if chromium == nil { missing.append("chromium (apt-get install chromium; scripts/install-deps.sh test)") }
            if locate(["python3"]) == nil { missing.append("python3") }
            if locate(["openssl"]) == nil { missing.append("openssl") }
            if !FileManager.default.isExecutableFile(atPath: "/usr/bin/timeout") { missing.append("/usr/bin/timeout") }
            return Tools(chromium: chromium, missing: missing)
        }()

        static var skipReason: Comment {
            Comment(rawValue: "a real browser is needed and is missing: " + Self.found.missing.joined(separator: ", "))
        }
    }

    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/browser/cdp_token_page.py").path

    /// Runs the browser once. The script bounds itself (`--timeout`); `timeout` is the backstop (TERM, which the
    /// script turns into killing the browser, then KILL, which the browser follows through PR_SET_PDEATHSIG).
    ///
    /// The run takes seconds, so it waits on a Dispatch thread, not on the cooperative pool: blocking a pool
    /// thread that long (2 on a 2-core machine) starves other suites running in parallel, e.g. the demo RP's
    /// cutoff writer in the end-to-end test, whose answer then misses the gateway's response timeout.
    ///
    /// - Parameter app: the script's `--app …` options (an app's login, and whether to press "continue").
    private func browse(
        _ gateway: TokenPageHarness,
        pinning certificate: String,
        app: [String] = []
    ) async throws -> (ChildProcess.Result, Report) {
        let arguments = [
            "-k", "10", "120", "/usr/bin/env", "python3", Self.script,
            "--chromium", try #require(Tools.found.chromium),
            "--base", gateway.baseURL,
            "--user", "alice", "--password", "pw",
            "--cert", certificate,
            "--timeout", "90",
        ] + app
        let result = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try ChildProcess.run("/usr/bin/timeout", arguments) })
            }
        }
        let report = try #require(
            try? JSONDecoder().decode(Report.self, from: Data(result.stdout.utf8)),
            "the browser script printed no report (exit \(result.status)):\n\(result.stderr)"
        )
        return (result, report)
    }

    @Test(.enabled(if: Tools.found.missing.isEmpty, Tools.skipReason), .timeLimit(.minutes(3)))
    func chromiumLogsInAndGetsTheTokenFromTheTokenPage() async throws {
        try await TokenPageHarness.with { gateway in
            let (result, report) = try await self.browse(gateway, pinning: gateway.certificatePath)
            #expect(result.status == 0, "the browser run failed: \(report.error ?? "?")\n\(result.stderr)")
            #expect(report.error == nil)
            #expect(report.tls == "pinned-spki")
            #expect(report.browser?.contains("Chrome/") == true)

            // Not logged in: the token page sent the browser to the login form, which rendered.
            let login = try #require(report.login)
            #expect(login.page.href == gateway.baseURL + "/login?return_to=%2Ftoken")
            let form = try #require(login.form, "no <form> on the login page")
            #expect(form.action == "/login")
            #expect(form.method == "post")
            #expect(form.user?.type == "text")
            #expect(form.password?.type == "password")
            #expect(form.returnTo?.type == "hidden")
            #expect(form.returnTo?.value == "/token")
            #expect(form.button)
            #expect(login.typed == [.text("alice"), .number(2)], "the typed user and password reached the fields")

            // Logged in: back on the token page, which the browser loaded completely.
            let page = try #require(report.tokenPage, "the browser did not get to the token page")
            #expect(page.href == gateway.baseURL + "/token", "the final URL is the token page, without a token")
            #expect(page.readyState == "complete")

            // The title carries an api token for alice, signed with the gateway's key.
            // (Comparisons involving the token are made into Booleans first, so a failure never prints it.)
            let titled = page.title.hasPrefix("tokengate-token:")
            #expect(titled)
            let token = try #require(TokenCapture.fromTitle(page.title), "the title holds no token")
            let verifier = TokenVerifier(keys: try KeySet.load(path: gateway.directory + "/public.jwks"))
            let cutoffs = gateway.cutoffs.load()
            switch verifier.verify(token.value, accept: .api, cutoffs: cutoffs, now: gateway.clock.now) {
            case .valid(let verified):
                #expect(verified.subject == "alice")
                #expect(verified.kind == .api)
            case .invalid(let reason):
                Issue.record("the title's token does not verify as an api token: \(reason.code)")
            }
            #expect(
                verifier.verify(token.value, accept: .session, cutoffs: cutoffs, now: gateway.clock.now)
                    == .invalid(.wrongKind),
                "an api-only token, not a session"
            )
            let bodyMatches = page.bodyToken == token.value
            #expect(bodyMatches, "the body shows the same token")

            // The cookie store holds it with the right flags, and it is the title's token.
            let cookies = try #require(report.cookies)
            let authCookies = cookies.filter { $0.name == "auth_token" }
            #expect(authCookies.count == 1)
            let cookie = try #require(authCookies.first)
            let cookieMatches = cookie.value == token.value
            #expect(cookieMatches, "the cookie and the title carry the same token")
            #expect(cookie.httpOnly)
            #expect(cookie.secure)
            #expect(cookie.sameSite == "Strict")
            #expect(cookie.path == "/")
            #expect(cookie.domain == "localhost", "a host-only cookie for the site")
            // The iOS glue reads the same store through HTTPCookie (docs/mobile.md).
            let httpCookies = cookies.compactMap { cookie in
                HTTPCookie(properties: [
                    .name: cookie.name, .value: cookie.value, .domain: cookie.domain, .path: cookie.path,
                    .secure: cookie.secure ? "TRUE" : "FALSE",
                ])
            }
            let capturedMatches = TokenCapture.fromCookies(httpCookies, domain: "localhost")?.value == token.value
            #expect(capturedMatches)

            // HttpOnly: page scripts cannot read it (nor the session).
            let scriptSeesName = page.cookie.contains("auth_token")
            let scriptSeesToken = page.cookie.contains(token.value)
            let scriptSeesSession = page.cookie.contains("session=")
            #expect(!scriptSeesName)
            #expect(!scriptSeesToken)
            #expect(!scriptSeesSession)

            // What the browser requested, in order; no URL ever held the token.
            let requests = try #require(report.requests)
            #expect(
                requests == [
                    .init(url: gateway.baseURL + "/token", method: "GET"),
                    .init(url: gateway.baseURL + "/login?return_to=%2Ftoken", method: "GET"),
                    .init(url: gateway.baseURL + "/login", method: "POST"),
                    .init(url: gateway.baseURL + "/token", method: "GET"),
                ]
            )
            let urlsWithToken = requests.filter { $0.url.contains(token.value) }.count
            #expect(urlsWithToken == 0, "a token in a URL")
            let signature = String(token.value.split(separator: ".").last ?? "")
            #expect(!result.stderr.contains(signature), "the script's diagnostics never show the token")
            #expect(!gateway.logLines.all.contains { $0.contains(signature) }, "nor the gateway's log")
            #expect(
                gateway.logLines.all.contains { $0.contains("reason=token_page_issued") && $0.contains("user=alice") },
                "the gateway issued the token to this browser"
            )
        }
    }

    /// RFC 8252 §8.6 in a real browser: an app's login (a custom-scheme app left at the default, which is asked)
    /// goes through the login form to the confirmation page, which shows the app and the account and holds no
    /// code; the button "continue" posts the page's form (with the browser's own `Sec-Fetch-Site` and `Origin`,
    /// which the gateway checks), and the browser is sent to the app's callback with a code, which redeems.
    @Test(.enabled(if: Tools.found.missing.isEmpty, Tools.skipReason), .timeLimit(.minutes(3)))
    func chromiumConfirmsAndTheAppGetsACode() async throws {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        try await TokenPageHarness.with { gateway in
            let (result, report) = try await self.browse(
                gateway, pinning: gateway.certificatePath,
                app: ["--app", "consent", "--state", "S1", "--code-challenge", challenge, "--confirm"])
            #expect(result.status == 0, "the browser run failed: \(report.error ?? "?")\n\(result.stderr)")
            #expect(report.error == nil)
            #expect(report.tls == "pinned-spki")

            let target = "/token?app=consent&state=S1&code_challenge=\(challenge)&code_challenge_method=S256"
            let login = try #require(report.login)
            #expect(login.page.href == gateway.baseURL + "/login?return_to=" + (target.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? ""))
            #expect(login.typed == [.text("alice"), .number(2)])

            // Logged in: the confirmation page, not the callback.
            let page = try #require(report.tokenPage, "the browser did not get to the confirmation page")
            #expect(page.href == gateway.baseURL + target)
            #expect(page.readyState == "complete")
            #expect(page.title == "Continue to Demo <App>?", "the display name, escaped in the markup, read back as text")
            #expect(page.buttons == ["continue", "cancel"])
            let html = try #require(page.html)
            #expect(html.contains("<span id=\"app\">Demo &lt;App&gt;</span>") && html.contains("<strong id=\"account\">alice</strong>"))
            #expect(!html.contains("#code=") && !html.contains("access_token") && !html.contains("tokengate-token:"))
            #expect(TokenCapture.fromTitle(page.title) == nil)

            // Continue: the page's own form, posted by the browser, answered with the callback and its code.
            let redirects = try #require(report.redirects)
            let callback = try #require(
                redirects.first { $0.location?.hasPrefix(TokenPageHarness.consentCallback + "#code=") == true },
                "no redirect to the app's callback: \(redirects)")
            #expect(callback.status == 303)
            let location = try #require(callback.location)
            #expect(location.hasSuffix("&state=S1"))
            let code = try #require(
                try TokenCapture.codeFromCallback(URL(string: location)!, callback: TokenPageHarness.consentCallback, expectedState: "S1"))
            let requests = try #require(report.requests)
            #expect(
                Array(requests.prefix(5)) == [
                    .init(url: gateway.baseURL + target, method: "GET"),
                    .init(url: login.page.href, method: "GET"),
                    .init(url: gateway.baseURL + "/login", method: "POST"),
                    .init(url: gateway.baseURL + target, method: "GET"),
                    .init(url: gateway.baseURL + target + "&confirm=1", method: "POST"),
                ]
            )
            // The confirmation cookie came and went: the answer to the click cleared it (`Max-Age=0`).
            let cookies = try #require(report.cookies)
            #expect(!cookies.contains { $0.name == "__Host-tokengate-confirm" }, "\(cookies.map(\.name))")
            #expect(cookies.contains { $0.name == "session" })
            // And the browser went on to the callback (which a headless browser cannot open): the page's
            // `form-action` let the form's redirect go there.
            #expect(requests.dropFirst(5).contains(.init(url: TokenPageHarness.consentCallback, method: "GET")), "\(requests.dropFirst(5))")
            let redeemed = try gateway.curl([
                "--data-urlencode", "grant_type=authorization_code", "--data-urlencode", "code=\(code.value)",
                "--data-urlencode", "code_verifier=\(verifier)", "--data-urlencode", "app=consent", gateway.baseURL + "/token",
            ])
            #expect(redeemed.status == 200, "\(redeemed.body)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(redeemed.body.utf8)) as? [String: Any])
            let token = try #require(object["access_token"] as? String)
            let verifierKeys = TokenVerifier(keys: try KeySet.load(path: gateway.directory + "/public.jwks"))
            switch verifierKeys.verify(token, accept: .api, cutoffs: gateway.cutoffs.load(), now: gateway.clock.now) {
            case .valid(let verified): #expect(verified.subject == "alice")
            case .invalid(let reason): Issue.record("the redeemed token does not verify: \(reason.code)")
            }
            let lines = gateway.logLines.all
            #expect(lines.contains { $0.contains("reason=token_page_confirm_shown") })
            #expect(lines.contains { $0.contains("method=POST") && $0.contains("reason=token_page_issued_code") && $0.contains("user=alice") })
            #expect(!lines.contains { $0.contains(code.value) || $0.contains(token) })
        }
    }

    /// The pin is what lets the first test in, not a blanket "ignore certificate errors": pinned to another
    /// key, the same browser refuses the gateway's certificate and never gets past the first request.
    @Test(.enabled(if: Tools.found.missing.isEmpty, Tools.skipReason), .timeLimit(.minutes(3)))
    func chromiumRefusesTheGatewayWhenItTrustsAnotherKey() async throws {
        try await TokenPageHarness.with { gateway in
            let other = try SelfSignedCertificate.generate(hostnames: ["localhost", "127.0.0.1"])
            let path = gateway.directory + "/other-cert.pem"
            try other.certificatePEM.write(toFile: path, atomically: true, encoding: .utf8)
            let (result, report) = try await self.browse(gateway, pinning: path)
            #expect(result.status == 1)
            #expect(report.error?.contains("net::ERR_CERT_AUTHORITY_INVALID") == true, "\(report.error ?? "no error")")
            #expect(report.tokenPage == nil)
            // The browser, not the gateway, broke off the handshake, and no request got through.
            let lines = gateway.logLines.all
            #expect(lines.contains { $0.contains("TLS connection failed") && $0.contains("certificate_unknown") })
            #expect(!lines.contains { $0.contains(" request ") || $0.contains("token_page_issued") })
        }
    }
}

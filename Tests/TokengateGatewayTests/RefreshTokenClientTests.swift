//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateClient
import TokengateTLS
import TokengateTestSupport
import TokengateTokens

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Refresh tokens driven by a real OAuth 2.0 client no one here wrote: Authlib's `OAuth2Session` (Debian's
/// python3-authlib) acting as the app against `tokengate serve`: the code flow with PKCE, the RFC 6749 §5.1 token
/// response, refresh (§6), rotation, and reuse detection (RFC 9700 §4.14.2), also when the replay goes to another
/// instance sharing the PostgreSQL store.
@Suite(.serialized)
struct RefreshTokenClientTests {
    /// One or more `serve` processes on one store, each with a token page whose app `refresher` has refresh tokens.
    private struct Fleet {
        let directory: String
        let ports: [Int]
        let adminPorts: [Int]
        let signer: TokenSigner

        init(instances: Int, cutoffs: String) throws {
            self.directory = NSTemporaryDirectory() + "tokengate-refresh-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: self.directory + "/data", withIntermediateDirectories: true)
            let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost"])
            try certificate.certificatePEM.write(toFile: self.directory + "/cert.pem", atomically: true, encoding: .utf8)
            try certificate.privateKeyPEM.write(toFile: self.directory + "/key.pem", atomically: true, encoding: .utf8)
            let keys = try KeyGenerator.generate(algorithm: .es256, keyID: "test-only-refresh")
            try keys.publicJWKS.write(toFile: self.directory + "/public.jwks", atomically: true, encoding: .utf8)
            try keys.privateJWKS.write(toFile: self.directory + "/private.jwks", atomically: true, encoding: .utf8)
            self.signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
            var ports: [Int] = []
            var adminPorts: [Int] = []
            for index in 0..<instances {
                let port = try GatewayIntegrationTests.unusedPort()
                let adminPort = try GatewayIntegrationTests.unusedPort()
                ports.append(port)
                adminPorts.append(adminPort)
                let yaml = """
                    listen:
                      - address: 127.0.0.1:\(port)
                        tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
                    admin: { address: 127.0.0.1:\(adminPort) }
                    keys: [ { jwks: public.jwks } ]
                    signing_key: { jwks: private.jwks }
                    \(cutoffs)
                    upstreams:
                      api: { targets: [ "http://127.0.0.1:9" ] }
                    routes:
                      - path_prefix: /token
                        kind: token_page
                        login: { session_cookie: session, login_url: /login }
                        apps:
                          - { name: old-app, callback: "tokengate-demo://old", pkce: required, confirm: false }
                          - name: refresher
                            callback: "tokengate-demo://refresh"
                            pkce: required
                            confirm: false
                            refresh_tokens: { access_token_lifetime: 5m, refresh_token_lifetime: 1d }
                      - { path_prefix: /, upstream: api, accept: [api] }
                    """
                try yaml.write(toFile: self.directory + "/tokengate-\(index).yaml", atomically: true, encoding: .utf8)
            }
            self.ports = ports
            self.adminPorts = adminPorts
        }

        func start(_ index: Int) throws -> Process {
            let serve = Process()
            serve.executableURL = URL(fileURLWithPath: ServeCommandTests.binary)
            serve.arguments = ["serve", "--config", self.directory + "/tokengate-\(index).yaml"]
            let log = self.directory + "/serve-\(index).log"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            serve.standardOutput = FileHandle(forWritingAtPath: log)
            serve.standardError = FileHandle(forWritingAtPath: log)
            try serve.run()
            return serve
        }

        func waitUntilReady(_ index: Int) async throws {
            for _ in 0..<300 {
                let ready = try? Curl.run(["--max-time", "1", "http://127.0.0.1:\(self.adminPorts[index])/readyz"], caFile: nil)
                if ready?.status == 200 { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            Issue.record("serve \(index) did not become ready")
        }

        func log(_ index: Int) -> String {
            (try? String(contentsOfFile: self.directory + "/serve-\(index).log", encoding: .utf8)) ?? ""
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: self.directory)
        }
    }

    /// The app, in Authlib: log in through the page (the browser's part is `requests` with the session cookie),
    /// redeem the code with the verifier, call the API, refresh, refresh again with the old token (reuse), and
    /// report what happened as JSON. `bases[1]` is where the replay goes (another instance, or the same one).
    static let client = #"""
        import json, sys, urllib.parse
        import requests
        from authlib.common.security import generate_token
        from authlib.integrations.requests_client import OAuth2Session
        from authlib.integrations.base_client import OAuthError

        first, second, cafile, session_cookie = sys.argv[1:5]
        out = {}
        client = OAuth2Session(client_id="refresher", token_endpoint_auth_method="none",
                               code_challenge_method="S256", redirect_uri="tokengate-demo://refresh")
        client.verify = cafile
        client.trust_env = False  # REQUESTS_CA_BUNDLE would replace the test's CA
        verifier = generate_token(64)
        url, state = client.create_authorization_url(first + "/token?app=refresher", code_verifier=verifier)
        page = requests.get(url, cookies={"session": session_cookie}, allow_redirects=False, verify=cafile)
        out["page_status"] = page.status_code
        callback = urllib.parse.urlparse(page.headers["location"])
        params = urllib.parse.parse_qs(callback.fragment)
        out["state_echoed"] = params["state"][0] == state
        out["code_in_query"] = bool(callback.query)
        token = client.fetch_token(first + "/token", grant_type="authorization_code", code=params["code"][0],
                                   code_verifier=verifier)
        out["first"] = {k: (v if k in ("token_type", "expires_in") else len(str(v))) for k, v in token.items()
                        if k != "expires_at"}
        def api(base, access):
            return requests.get(base + "/api", headers={"Authorization": "Bearer " + access}, verify=cafile)
        out["api_first"] = api(first, token["access_token"]).status_code
        refreshed = client.refresh_token(first + "/token")
        out["rotated"] = refreshed["refresh_token"] != token["refresh_token"]
        out["new_access"] = refreshed["access_token"] != token["access_token"]
        out["api_refreshed"] = api(first, refreshed["access_token"]).status_code
        # A stolen copy of the first refresh token, replayed (on the other instance).
        try:
            client.refresh_token(second + "/token", refresh_token=token["refresh_token"])
            out["replay"] = "accepted"
        except OAuthError as error:
            out["replay"] = error.error
        try:
            client.refresh_token(first + "/token", refresh_token=refreshed["refresh_token"])
            out["after_replay"] = "accepted"
        except OAuthError as error:
            out["after_replay"] = error.error
        import time
        def settled(base):
            # The other instance learns of the revocation by its notification: give it a moment, bounded.
            for _ in range(40):
                status = api(base, refreshed["access_token"]).status_code
                if status == 401:
                    break
                time.sleep(0.05)
            return status
        out["api_after_replay"] = [settled(first), settled(second)]
        forged = refreshed["refresh_token"][:-2] + ("AA" if not refreshed["refresh_token"].endswith("AA") else "BA")
        for name, value in [("forged", forged), ("oversized", "A" * 3000), ("empty_app", None)]:
            body = {"grant_type": "refresh_token", "refresh_token": value or refreshed["refresh_token"],
                    "client_id": "refresher" if value else "old-app"}
            answer = requests.post(first + "/token", data=body, verify=cafile)
            out[name] = [answer.status_code, answer.json().get("error")]
        print(json.dumps(out))
        """#

    private static func runClient(_ fleet: Fleet, first: Int, second: Int, session: String) throws -> [String: Any] {
        let bases = [first, second].map { "https://localhost:\(fleet.ports[$0])" }
        let result = try ChildProcess.run(
            "/usr/bin/timeout", ["60", "/usr/bin/python3", "-c", Self.client, bases[0], bases[1], fleet.directory + "/cert.pem", session])
        try #require(result.status == 0, "the Authlib client failed: \(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    private static func check(_ out: [String: Any], fleet: Fleet) {
        #expect(out["page_status"] as? Int == 302 && out["state_echoed"] as? Bool == true && out["code_in_query"] as? Bool == false)
        let first = out["first"] as? [String: Any]
        #expect(first?["token_type"] as? String == "bearer" && first?["expires_in"] as? Int == 300, "\(first ?? [:])")
        #expect(first?["refresh_token"] as? Int == RefreshTokenKey.textLength, "opaque and bounded")
        #expect(out["api_first"] as? Int == 502, "accepted (the upstream is closed)")
        #expect(out["rotated"] as? Bool == true && out["new_access"] as? Bool == true)
        #expect(out["api_refreshed"] as? Int == 502)
        #expect(out["replay"] as? String == "invalid_grant", "the used refresh token is refused")
        #expect(out["after_replay"] as? String == "invalid_grant", "the reuse revoked the device: its newest token too")
        let statuses = (out["api_after_replay"] as? [Any])?.compactMap { $0 as? Int }
        #expect(statuses == [401, 401], "the device's access token dies on every instance")
        func answer(_ name: String) -> String {
            guard let pair = out[name] as? [Any], pair.count == 2 else { return "missing" }
            return "\(pair[0] as? Int ?? 0) \(pair[1] as? String ?? "")"
        }
        #expect(answer("forged") == "400 invalid_grant")
        #expect(answer("oversized") == "400 invalid_grant")
        #expect(answer("empty_app") == "400 invalid_client", "an app without refresh tokens")
    }

    private static func requireClient() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let probe = try ChildProcess.run("/usr/bin/python3", ["-c", "import authlib.integrations.requests_client"])
        try #require(probe.status == 0, "install python3-authlib (scripts/install-deps.sh)")
    }

    @Test func authlibCodeFlowRefreshRotationAndReuseWithSQLite() async throws {
        try Self.requireClient()
        let fleet = try Fleet(instances: 1, cutoffs: "cutoffs: { sqlite: data/cutoffs.db }")
        defer { fleet.remove() }
        let serve = try fleet.start(0)
        defer { serve.terminate(); serve.waitUntilExit() }
        try await fleet.waitUntilReady(0)
        let session = try fleet.signer.mint(
            TokenClaims(subject: "alice", issuedAt: Int64(Date().timeIntervalSince1970) - 60, apiOnly: false))
        let out = try Self.runClient(fleet, first: 0, second: 0, session: session)
        Self.check(out, fleet: fleet)
        // Never a refresh token (nor any token) in the log.
        let log = fleet.log(0)
        #expect(!log.isEmpty && !log.contains(session))
        #expect(log.contains("token_page_refresh_reused"), "the reuse is in the access log by its reason code")
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["TOKENGATE_TEST_POSTGRES_URL"]?.isEmpty == false))
    func aReplayOnAnotherInstanceSharingPostgreSQLRevokesTheDevice() async throws {
        try Self.requireClient()
        let url = try #require(ProcessInfo.processInfo.environment["TOKENGATE_TEST_POSTGRES_URL"])
        let table = "tg_refresh_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(10).lowercased()
        let fleet = try Fleet(instances: 2, cutoffs: "cutoffs: { postgres: \"\(url)\", table: \(table), channel: \(table) }")
        defer { fleet.remove() }
        let first = try fleet.start(0)
        defer { first.terminate(); first.waitUntilExit() }
        try await fleet.waitUntilReady(0)
        let second = try fleet.start(1)
        defer { second.terminate(); second.waitUntilExit() }
        try await fleet.waitUntilReady(1)
        let session = try fleet.signer.mint(
            TokenClaims(subject: "bob", issuedAt: Int64(Date().timeIntervalSince1970) - 60, apiOnly: false))
        let out = try Self.runClient(fleet, first: 0, second: 1, session: session)
        Self.check(out, fleet: fleet)
        #expect(fleet.log(1).contains("token_page_refresh_reused"), "the replay reached the second instance")
    }

    // MARK: The client library

    /// `TokengateSession`'s transport: the request sent exactly as built, by curl.
    private static func curlTransport(_ fleet: Fleet) -> TokengateSession.Transport {
        let ca = fleet.directory + "/cert.pem"
        return { request in
            var arguments = ["--max-time", "5", "-X", request.httpMethod ?? "GET"]
            for (name, value) in (request.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
                arguments += ["-H", "\(name): \(value)"]
            }
            if let body = request.httpBody {
                arguments += ["--data-binary", String(decoding: body, as: UTF8.self)]
            }
            arguments.append(request.url!.absoluteString)
            let result = try Curl.run(arguments, caFile: ca)
            var fields: [String: String] = [:]
            for (name, value) in result.headers { fields[name] = value }
            let response = HTTPURLResponse(url: request.url!, statusCode: result.status, httpVersion: "HTTP/1.1", headerFields: fields)!
            return (Data(result.body.utf8), response)
        }
    }

    /// The app's login with the library: the page URL with PKCE, the browser's redirect, the code from the callback,
    /// the redemption's grant.
    private static func login(_ fleet: Fleet, session: String) throws -> TokenGrant {
        let site = URL(string: "https://localhost:\(fleet.ports[0])")!
        let pkce = PKCEVerifier.random()
        let state = TokenPageURL.randomState()
        let page = try TokenPageURL(site: site, app: "refresher", state: state, pkce: pkce)
        let browser = try Curl.run(["--max-time", "5", "-H", "Cookie: session=\(session)", page.url.absoluteString], caFile: fleet.directory + "/cert.pem")
        let callback = try #require(browser.header("location").flatMap(URL.init(string:)))
        let code = try #require(try TokenCapture.codeFromCallback(callback, callback: "tokengate-demo://refresh", expectedState: state))
        let redemption = try CodeRedemption.request(site: site, app: "refresher", code: code, verifier: pkce)
        let answer = try Curl.run(
            ["--max-time", "5", "-X", "POST", "-H", "Content-Type: application/x-www-form-urlencoded",
             "--data-binary", String(decoding: redemption.httpBody!, as: UTF8.self), redemption.url!.absoluteString],
            caFile: fleet.directory + "/cert.pem")
        return try RefreshGrant.grant(status: answer.status, body: Data(answer.body.utf8))
    }

    @Test func theClientLibraryRefreshesBeforeExpiryAndOnA401AndThenReportsLoginRequired() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let fleet = try Fleet(instances: 1, cutoffs: "cutoffs: { sqlite: data/cutoffs.db }")
        defer { fleet.remove() }
        let serve = try fleet.start(0)
        defer { serve.terminate(); serve.waitUntilExit() }
        try await fleet.waitUntilReady(0)
        let user = try fleet.signer.mint(
            TokenClaims(subject: "carol", issuedAt: Int64(Date().timeIntervalSince1970) - 60, apiOnly: false))
        let grant = try Self.login(fleet, session: user)
        let first = try #require(grant.refresh)
        #expect("\(first)" == "RefreshToken(<redacted>)" && !"\(grant)".contains(first.value))
        let site = URL(string: "https://localhost:\(fleet.ports[0])")!
        let api = URLRequest(url: site.appendingPathComponent("api/me"))

        // A clock 5 minutes ahead: the access token is about to expire, so the session refreshes first.
        let ahead = TokengateSession(
            site: site, app: "refresher", grant: grant, now: { Date().addingTimeInterval(290) }, transport: Self.curlTransport(fleet))
        let (_, response) = try await ahead.send(api)
        #expect(response.statusCode == 502, "sent with the refreshed token and accepted")
        let afterExpiry = try #require(await ahead.grant)
        #expect(afterExpiry.refresh != grant.refresh && afterExpiry.access != grant.access, "rotated")

        // A token the site refuses (here: altered), with a good refresh token: refreshed on the 401, sent once more.
        let broken = TokenGrant(access: StoredToken(value: String(afterExpiry.access.value.dropLast(2)) + "AA", expiresAt: nil), refresh: afterExpiry.refresh)
        let retrying = TokengateSession(site: site, app: "refresher", grant: broken, transport: Self.curlTransport(fleet))
        let (_, retried) = try await retrying.send(api)
        #expect(retried.statusCode == 502)
        let current = try #require(await retrying.grant)

        // The operator revokes the device: the next call gets 401, the refresh is refused, and the app is told to
        // log in again, with the grant dropped.
        let devices = try Curl.run(["--max-time", "5", "http://127.0.0.1:\(fleet.adminPorts[0])/admin/users/carol/devices"], caFile: nil)
        let listed = try #require(
            (try JSONSerialization.jsonObject(with: Data(devices.body.utf8)) as? [String: Any])?["devices"] as? [[String: Any]])
        #expect(listed.count == 1 && listed.first?["app"] as? String == "refresher", "one device across its refreshes")
        let device = try #require(listed.first?["device"] as? String)
        let revoke = try Curl.run(
            ["--max-time", "5", "-X", "POST", "http://127.0.0.1:\(fleet.adminPorts[0])/admin/users/carol/devices/\(device)/revoke"], caFile: nil)
        #expect(revoke.status == 200)
        let revoked = TokengateSession(site: site, app: "refresher", grant: current, transport: Self.curlTransport(fleet))
        await #expect(throws: TokengateClientError.self) {
            _ = try await revoked.send(api)
        }
        do {
            _ = try await revoked.send(api)
        } catch let error as TokengateClientError {
            #expect(error.code == .loginRequired)
        }
        #expect(await revoked.grant == nil)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTLS
import TokengateTestSupport
import TokengateTokens

/// A lost phone, end to end with the `tokengate` binary: `serve` with a SQLite store and a token page, curl as the
/// browser and the app, `tokengate revoke --device` and the admin API as the operator. One device's tokens die;
/// the user's other device, tokens minted without a device and the browser session keep working.
@Suite(.serialized)
struct DeviceRevocationTests {
    private struct Setup {
        let directory: String
        let port: Int
        let adminPort: Int
        let signer: TokenSigner
        var path: String { self.directory + "/tokengate.yaml" }

        init() throws {
            self.directory = NSTemporaryDirectory() + "tokengate-devices-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: self.directory + "/data", withIntermediateDirectories: true)
            let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost"])
            try certificate.certificatePEM.write(toFile: self.directory + "/cert.pem", atomically: true, encoding: .utf8)
            try certificate.privateKeyPEM.write(toFile: self.directory + "/key.pem", atomically: true, encoding: .utf8)
            let keys = try KeyGenerator.generate(algorithm: .edDSA, keyID: "test-only-devices")
            try keys.publicJWKS.write(toFile: self.directory + "/public.jwks", atomically: true, encoding: .utf8)
            try keys.privateJWKS.write(toFile: self.directory + "/private.jwks", atomically: true, encoding: .utf8)
            self.signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
            self.port = try GatewayIntegrationTests.unusedPort()
            self.adminPort = try GatewayIntegrationTests.unusedPort()
            let yaml = """
                listen:
                  - address: 127.0.0.1:\(self.port)
                    tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
                admin: { address: 127.0.0.1:\(self.adminPort) }
                keys: [ { jwks: public.jwks } ]
                signing_key: { jwks: private.jwks }
                cutoffs: { sqlite: data/cutoffs.db }
                upstreams:
                  api: { targets: [ "http://127.0.0.1:9" ] }
                routes:
                  - path_prefix: /token
                    kind: token_page
                    login: { session_cookie: session, login_url: /login }
                    token_lifetime: 1h
                    apps:
                      - { name: ios, callback: "tokengate-demo://token", confirm: false }
                  - { path_prefix: /, upstream: api, accept: [api, session], sources: [authorization, "cookie:session"] }
                """
            try yaml.write(toFile: self.path, atomically: true, encoding: .utf8)
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: self.directory)
        }

        func startServe() throws -> Process {
            let serve = Process()
            serve.executableURL = URL(fileURLWithPath: ServeCommandTests.binary)
            serve.arguments = ["serve", "--config", self.path]
            serve.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
            serve.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try serve.run()
            return serve
        }

        func waitUntilReady() async throws {
            for _ in 0..<200 {
                if (try? Curl.run(["--max-time", "1", "http://127.0.0.1:\(self.adminPort)/readyz"], caFile: nil))?.status == 200 {
                    return
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            Issue.record("serve did not become ready")
        }

        func curl(_ arguments: [String]) throws -> Curl.Result {
            try Curl.run(["--max-time", "5"] + arguments, caFile: self.directory + "/cert.pem")
        }

        /// What the app gets from the token page after the user's browser logged in: the token in the callback.
        func tokenFromPage(session: String) throws -> String {
            let answer = try self.curl(["-H", "Cookie: session=\(session)", "https://localhost:\(self.port)/token?app=ios"])
            let location = try #require(answer.header("location"), "status \(answer.status)")
            let fragment = try #require(location.split(separator: "#").last)
            for pair in fragment.split(separator: "&") where pair.hasPrefix("access_token=") {
                return String(pair.dropFirst("access_token=".count)).removingPercentEncoding!
            }
            Issue.record("no access_token in \(location.prefix(40))")
            return ""
        }

        /// 502: accepted (the upstream's port is closed); 401: refused.
        func status(_ token: String) throws -> Int {
            try self.curl(["-H", "Authorization: Bearer \(token)", "https://localhost:\(self.port)/"]).status
        }

        /// The browser's request with its session cookie.
        func browserStatus(_ session: String) throws -> Int {
            try self.curl(["-H", "Cookie: session=\(session)", "https://localhost:\(self.port)/"]).status
        }

        func admin(_ method: String, _ path: String) throws -> Curl.Result {
            try Curl.run(["--max-time", "5", "-X", method, "http://127.0.0.1:\(self.adminPort)" + path], caFile: nil)
        }

        func revoke(_ arguments: [String]) throws -> ChildProcess.Result {
            try ChildProcess.run("/usr/bin/timeout", ["60", ServeCommandTests.binary, "revoke", "--config", self.path] + arguments)
        }
    }

    /// The device id a token carries, read from its payload as any JWT reader would.
    private static func device(of token: String) throws -> String? {
        var part = String(token.split(separator: ".")[1]).replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
        while part.count % 4 != 0 { part += "=" }
        let payload = try #require(Data(base64Encoded: part))
        let claims = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
        return claims["did"] as? String
    }

    @Test func aLostPhoneIsCutOffAloneByTheCLIAndTheAdminAPI() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let setup = try Setup()
        defer { setup.remove() }
        var serve = try setup.startServe()
        defer { if serve.isRunning { serve.terminate(); serve.waitUntilExit() } }
        try await setup.waitUntilReady()

        let now = Int64(Date().timeIntervalSince1970)
        let session = try setup.signer.mint(TokenClaims(subject: "alice", issuedAt: now - 60, apiOnly: false))
        let phone = try setup.tokenFromPage(session: session)
        let tablet = try setup.tokenFromPage(session: session)
        let phoneID = try #require(try Self.device(of: phone))
        let tabletID = try #require(try Self.device(of: tablet))
        #expect(phoneID != tabletID && phoneID.utf8.count == 22, "a fresh device per login, made by the gateway")
        let legacy = try setup.signer.mint(TokenClaims(subject: "alice", issuedAt: now - 60, apiOnly: true))
        #expect(try Self.device(of: legacy) == nil)
        for token in [phone, tablet, legacy] {
            #expect(try setup.status(token) == 502, "accepted before any revocation")
        }
        #expect(try setup.browserStatus(session) == 502)

        // The operator looks the user's devices up, and revokes the lost phone.
        let listing = try setup.admin("GET", "/admin/users/alice/devices")
        #expect(listing.status == 200, "\(listing.body)")
        let listed = try #require(
            try JSONSerialization.jsonObject(with: Data(listing.body.utf8)) as? [String: Any])["devices"] as? [[String: Any]]
        #expect(Set(listed?.compactMap { $0["device"] as? String } ?? []) == [phoneID, tabletID])
        #expect(listed?.allSatisfy { $0["app"] as? String == "ios" && $0["revoked_at"] is NSNull } == true)

        let revoked = try setup.revoke(["--user", "alice", "--device", phoneID])
        #expect(revoked.status == 0 && revoked.stdout.contains("revoked device \(phoneID)"), "\(revoked.stdout) \(revoked.stderr)")
        // Another process wrote the store: the running gateway follows its feed within a poll.
        var refused = false
        for _ in 0..<100 where !refused {
            refused = try setup.status(phone) == 401
            if !refused { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(refused, "the phone's token is refused")
        let answer = try setup.curl(["-H", "Authorization: Bearer \(phone)", "https://localhost:\(setup.port)/"])
        #expect(answer.header("www-authenticate")?.contains("device") == true, "\(answer.header("www-authenticate") ?? "")")
        for token in [tablet, legacy] {
            #expect(try setup.status(token) == 502, "the other device and an old token live on")
        }
        #expect(try setup.browserStatus(session) == 502, "and the browser session")

        let again = try setup.revoke(["--user", "alice", "--device", phoneID])
        #expect(again.status == 0 && again.stdout.hasPrefix("unchanged"), "\(again.stdout)")
        let stranger = try setup.revoke(["--user", "bob", "--device", tabletID])
        #expect(stranger.status == 65 && stranger.stderr.contains("unknown_device"), "another user's device: \(stranger.stderr)")
        let bad = try setup.revoke(["--user", "alice", "--device", "not-a-device"])
        #expect(bad.status == 64, "\(bad.stderr)")

        // The admin API answers only once the snapshot enforces it: the very next request is refused.
        let viaAdmin = try setup.admin("POST", "/admin/users/alice/devices/\(tabletID)/revoke")
        #expect(viaAdmin.status == 200 && viaAdmin.body.contains("\"changed\":true"), "\(viaAdmin.body)")
        #expect(try setup.status(tablet) == 401)
        #expect(try setup.admin("POST", "/admin/users/bob/devices/\(tabletID)/revoke").status == 404)
        #expect(try setup.admin("POST", "/admin/users/alice/devices/AAAA/revoke").status == 400)

        // A restart loads the revoked devices from the store with the cutoffs.
        serve.terminate()
        serve.waitUntilExit()
        serve = try setup.startServe()
        try await setup.waitUntilReady()
        #expect(try setup.status(phone) == 401 && setup.status(tablet) == 401)
        #expect(try setup.status(legacy) == 502)
        // A new login on a new phone gets a new device, which works.
        let newPhone = try setup.tokenFromPage(session: session)
        #expect(try setup.status(newPhone) == 502)
        // "Disable mobile apps" still ends every app token at once, devices or not.
        try await Task.sleep(for: .seconds(1))
        let disabled = try setup.revoke(["--user", "alice", "--api-only"])
        #expect(disabled.status == 0, "\(disabled.stderr)")
        var allRefused = false
        for _ in 0..<100 where !allRefused {
            allRefused = try setup.status(newPhone) == 401 && setup.status(legacy) == 401
            if !allRefused { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(allRefused)
        #expect(try setup.browserStatus(session) == 502, "the browser session is no app")
    }
}

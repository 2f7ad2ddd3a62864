//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
@testable import TokengateGateway
import TokengateConfig
import TokengateTestSupport

/// Keys from a real OpenID provider: django-oauth-toolkit (PyPI) with OpenID Connect on, started on loopback by
/// the test behind TLS from a CA the test makes with the openssl CLI (so `ca_file` is what lets the gateway
/// trust it). The provider mints ID tokens through its own login, authorization code (PKCE) and token
/// endpoints (scripts/oidc-provider/mint.py); the tokens go to the real gateway's TLS socket with curl.
///
/// scripts/install-deps.sh installs the provider into `.build/oidc-provider` (a Python venv).
@Suite(.serialized)
struct IdentityProviderKeysTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let python = repository.appendingPathComponent(".build/oidc-provider/bin/python").path
    static let scripts = repository.appendingPathComponent("scripts/oidc-provider").path

    /// The provider's process, its state directory and TLS files.
    final class Provider: @unchecked Sendable {
        // @unchecked: driven by one test at a time.
        let directory: String
        var process: Process?
        var port = 0
        /// The `max-age` the provider puts on its key set.
        var jwksMaxAge = 3600

        init() throws {
            self.directory = NSTemporaryDirectory() + "tokengate-op-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
            // A CA of the test's own and a certificate for 127.0.0.1 it signed: nothing in the system store
            // vouches for the provider.
            let d = self.directory
            let steps: [[String]] = [
                ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "\(d)/ca.key",
                 "-out", "\(d)/ca.pem", "-days", "2", "-subj", "/CN=tokengate test provider CA"],
                ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "\(d)/op.key",
                 "-out", "\(d)/op.csr", "-subj", "/CN=127.0.0.1"],
                ["x509", "-req", "-in", "\(d)/op.csr", "-CA", "\(d)/ca.pem", "-CAkey", "\(d)/ca.key", "-CAcreateserial",
                 "-out", "\(d)/op.pem", "-days", "2", "-extfile", "\(d)/ext"],
            ]
            try "subjectAltName=IP:127.0.0.1\n".write(toFile: "\(d)/ext", atomically: true, encoding: .utf8)
            for step in steps {
                let result = try ChildProcess.run("/usr/bin/openssl", step)
                guard result.status == 0 else { throw ProviderError("openssl \(step[0]): \(result.stderr)") }
            }
        }

        var caFile: String { self.directory + "/ca.pem" }
        var issuer: String { "https://127.0.0.1:\(self.port)/o" }

        /// Starts the provider (on its previous port after the first start) and waits until it accepts.
        func start() throws {
            let output = self.directory + "/out-\(UUID().uuidString)"
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            if !FileManager.default.fileExists(atPath: self.directory + "/op.log") {
                _ = FileManager.default.createFile(atPath: self.directory + "/op.log", contents: nil)
            }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: IdentityProviderKeysTests.python)
            process.arguments = [
                IdentityProviderKeysTests.scripts + "/serve.py", "--state", self.directory + "/state",
                "--cert", self.directory + "/op.pem", "--key", self.directory + "/op.key", "--port", String(self.port),
                "--jwks-max-age", String(self.jwksMaxAge),
            ]
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
            let errors = try FileHandle(forWritingTo: URL(fileURLWithPath: self.directory + "/op.log"))
            errors.seekToEndOfFile()
            process.standardError = errors
            try process.run()
            self.process = process
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline {
                let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("listening ") }),
                    let port = Int(line.dropFirst("listening ".count))
                {
                    self.port = port
                    return
                }
                guard process.isRunning else { break }
                Thread.sleep(forTimeInterval: 0.1)
            }
            let log = (try? String(contentsOfFile: self.directory + "/op.log", encoding: .utf8)) ?? ""
            throw ProviderError("the provider did not start: \(log.suffix(2000))")
        }

        /// Kills the provider at once (SIGKILL: nothing it inherited can make it linger), as a crash would.
        func stop() {
            guard let process = self.process else { return }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            self.process = nil
        }

        /// The active key becomes inactive (still published) and a new one signs from the next start.
        func rotate() throws {
            let result = try ChildProcess.run(IdentityProviderKeysTests.python, [IdentityProviderKeysTests.scripts + "/rotate.py", self.directory + "/state"])
            guard result.status == 0 else { throw ProviderError("rotate: \(result.stderr)") }
        }

        /// An ID token for alice, through the provider's login, authorize and token endpoints.
        func mint() throws -> String {
            let result = try ChildProcess.run(IdentityProviderKeysTests.python, [IdentityProviderKeysTests.scripts + "/mint.py", self.issuer, self.caFile])
            guard result.status == 0 else { throw ProviderError("mint: \(result.stderr)") }
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func remove() {
            self.stop()
            try? FileManager.default.removeItem(atPath: self.directory)
        }
    }

    struct ProviderError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Skipped only outside CI when the provider is not installed; in CI (`CI` set) a missing provider fails.
    static var installed: Bool {
        FileManager.default.isExecutableFile(atPath: Self.python) || ProcessInfo.processInfo.environment["CI"] != nil
    }

    /// `tokens` for the provider's ID tokens: RS256 only (which binds keys without `alg`), its client as audience.
    func tokens(_ provider: Provider) -> String {
        "tokens: { algorithms: [RS256], issuer: \"\(provider.issuer)\", audience: tokengate-app }"
    }

    func get(_ gateway: GatewayHarness, _ token: String) throws -> Curl.Result {
        try Curl.run(["-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/both/x"], caFile: gateway.certificatePath)
    }

    /// Sends `token` until the answer is `status` (at most `seconds`); returns the last answer.
    func poll(_ gateway: GatewayHarness, _ token: String, until status: Int, seconds: Double = 20) async throws -> Curl.Result {
        let deadline = Date().addingTimeInterval(seconds)
        var last = try self.get(gateway, token)
        while last.status != status, Date() < deadline {
            try await Task.sleep(for: .milliseconds(200))
            last = try self.get(gateway, token)
        }
        return last
    }

    /// A metric's value from the gateway's exposition (0 when absent).
    func metric(_ gateway: GatewayHarness, _ name: String) -> Int {
        for line in gateway.server.metrics.render().split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            return Int(Double(line.split(separator: " ").last ?? "0") ?? 0)
        }
        return 0
    }

    /// `token` with its header's `kid` replaced: same payload and signature, a key no one published.
    func withKid(_ token: String, _ kid: String) -> String {
        let parts = token.split(separator: ".").map(String.init)
        let header = "{\"alg\":\"RS256\",\"kid\":\"\(kid)\",\"typ\":\"JWT\"}"
        let encoded = Data(header.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return [encoded, parts[1], parts[2]].joined(separator: ".")
    }

    /// Discovery through the provider's metadata: its ID tokens are accepted; a key rotation at the provider is
    /// picked up without a reload (the new `kid` triggers a fetch; the token is answered 503 until it is in,
    /// then 200), and tokens of the old key still pass while the provider publishes it. Then the provider goes
    /// down: the cached keys keep serving. A flood of made-up kids costs at most one fetch per `refetch_interval`
    /// and never gets a 200.
    @Test(.enabled(if: Self.installed, "scripts/install-deps.sh test installs the provider into .build/oidc-provider"))
    func providerTokensRotationAndOutage() async throws {
        let provider = try Provider()
        defer { provider.remove() }
        try provider.start()
        let harness = GatewayHarness()
        do {
            // The flood below is 100 failed tokens from one address: the default failed-token guard would answer
            // most of it `429` before a key is looked up (TrafficPolicyIntegrationTests covers that). Off here, so
            // that every request of the flood reaches the key set, which is what this test counts.
            try await harness.start(
                keys: "keys: [ { discovery: \"\(provider.issuer)\", ca_file: \"\(provider.caFile)\", refetch_interval: 1s } ]",
                tokens: self.tokens(provider),
                sections: "rate_limits: { failed_tokens: off }"
            )
            let first = try provider.mint()
            let accepted = try await self.poll(harness, first, until: 200)
            #expect(accepted.status == 200, "\(accepted.status) \(accepted.body)")
            // The same token with one signature byte changed: the provider's key does not verify it.
            var forged = Array(first.utf8)
            forged[forged.count - 10] = forged[forged.count - 10] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            let refused = try self.get(harness, String(decoding: forged, as: UTF8.self))
            #expect(refused.status == 401)
            #expect(refused.header("www-authenticate")?.contains("error=\"invalid_token\"") == true)

            // Rotation at the provider (a restart with a new active key, the old one still published).
            provider.stop()
            try provider.rotate()
            try provider.start()
            let second = try provider.mint()
            #expect(second.split(separator: ".")[0] != first.split(separator: ".")[0], "the new token names a new kid")
            let rotated = try await self.poll(harness, second, until: 200, seconds: 10)
            #expect(rotated.status == 200, "\(rotated.status) \(rotated.body)")
            #expect(try self.get(harness, first).status == 200)
            #expect(harness.server.generation == 1, "no reload happened")
            #expect(self.metric(harness, "tokengate_key_set_fetches_total") >= 2)
            #expect(self.metric(harness, "tokengate_key_set_keys") == 2)

            // The provider goes away: the keys fetched keep serving.
            provider.stop()
            #expect(try self.get(harness, second).status == 200)

            // A flood of made-up kids, the provider down: at most one fetch per second of flood, never a 200. (After
            // one refetch_interval, so that the rotation's own unknown-kid fetch no longer holds the window.)
            try await Task.sleep(for: .milliseconds(1100))
            let before = self.metric(harness, "tokengate_key_set_unknown_kid_fetches_total")
            let started = Date()
            var statuses: [Int: Int] = [:]
            for batch in 0..<4 {
                var arguments: [String] = []
                for index in 0..<25 {
                    if !arguments.isEmpty { arguments.append("--next") }
                    arguments += [
                        "-sS", "--cacert", harness.certificatePath, "-o", "/dev/null", "-w", "%{http_code}\n",
                        "-H", "Authorization: Bearer \(self.withKid(second, "made-up-\(batch)-\(index)"))",
                        "\(harness.baseURL)/both/x",
                    ]
                }
                let result = try ChildProcess.run("/usr/bin/curl", arguments)
                for line in result.stdout.split(separator: "\n") { statuses[Int(line) ?? 0, default: 0] += 1 }
            }
            let elapsed = Date().timeIntervalSince(started)
            let fetches = self.metric(harness, "tokengate_key_set_unknown_kid_fetches_total") - before
            #expect(statuses.values.reduce(0, +) == 100)
            #expect(statuses[200] == nil, "\(statuses)")
            #expect(Set(statuses.keys).isSubset(of: [401, 503]), "\(statuses)")
            #expect(fetches >= 1 && fetches <= Int(elapsed) + 2, "\(fetches) fetches in \(elapsed) s")
            // The keys fetched before still serve: failed fetches never drop a set inside max_stale.
            #expect(try self.get(harness, second).status == 200)
            let logs = harness.logLines.all.joined(separator: "\n")
            #expect(logs.contains("key set fetch failed"))
            #expect(!logs.contains(second) && !logs.contains(first), "no token in any log line")
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    /// `jwks_url` straight to the provider's key set: while the provider is down from the gateway's start,
    /// a token gets 503 `temporarily_unavailable` with a Bearer challenge, never 401; once the provider is up
    /// the same token passes, without a reload. Without `ca_file` the system store does not know the test's CA:
    /// the fetch fails on the certificate and tokens get 503.
    @Test(.enabled(if: Self.installed, "scripts/install-deps.sh test installs the provider into .build/oidc-provider"))
    func providerDownAtStartGives503() async throws {
        let provider = try Provider()
        defer { provider.remove() }
        provider.jwksMaxAge = 2
        try provider.start()
        let token = try provider.mint()
        provider.stop()
        let harness = GatewayHarness()
        do {
            let jwks = "\(provider.issuer)/.well-known/jwks.json"
            try await harness.start(
                routes: GatewayHarness.defaultRoutes,
                keys: """
                    keys:
                      - { jwks_url: "\(jwks)", ca_file: "\(provider.caFile)", refetch_interval: 1s, cache_min: 1s }
                    """,
                tokens: self.tokens(provider)
            )
            let down = try self.get(harness, token)
            #expect(down.status == 503, "\(down.status) \(down.body)")
            #expect(down.header("www-authenticate")?.hasPrefix("Bearer realm=\"test.example\"") == true)
            #expect(down.header("www-authenticate")?.contains("error=\"temporarily_unavailable\"") == true)
            #expect(down.body.contains("\"error\":\"temporarily_unavailable\""))

            try provider.start()
            let up = try await self.poll(harness, token, until: 200)
            #expect(up.status == 200, "\(up.status) \(up.body)")
            #expect(harness.server.generation == 1)
            #expect(self.metric(harness, "tokengate_key_set_fetch_failures_total") >= 1)

            // A SIGHUP's reload keeps an unchanged entry's keys: with the provider down again, the token still
            // passes under the new generation, with no fetch in between.
            provider.stop()
            try harness.server.reload(configurationPath: harness.directory + "/tokengate.yaml")
            #expect(harness.server.generation == 2)
            let reloaded = try self.get(harness, token)
            #expect(reloaded.status == 200, "\(reloaded.status) \(reloaded.body)")

            // The background refresh (max-age 2 s) brings a rotation in with no token asking for it.
            let unknownBefore = self.metric(harness, "tokengate_key_set_unknown_kid_fetches_total")
            try provider.rotate()
            try provider.start()
            let refreshDeadline = Date().addingTimeInterval(20)
            while self.metric(harness, "tokengate_key_set_keys") != 2, Date() < refreshDeadline {
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(self.metric(harness, "tokengate_key_set_keys") == 2)
            #expect(self.metric(harness, "tokengate_key_set_unknown_kid_fetches_total") == unknownBefore)

            // check-config --connect's fetch: the set as the gateway reads it.
            let configuration = try GatewayConfiguration.load(path: harness.directory + "/tokengate.yaml")
            let probe = await GatewayServer.probeKeySets(configuration)
            #expect(probe.ok)
            #expect(probe.lines.first?.contains("2 usable keys") == true, "\(probe.lines)")
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()

        // The same provider without ca_file: the system store does not vouch for the test's CA.
        let untrusting = GatewayHarness()
        do {
            try await untrusting.start(
                keys: "keys: [ { jwks_url: \"\(provider.issuer)/.well-known/jwks.json\", refetch_interval: 1s } ]",
                tokens: self.tokens(provider)
            )
            let refused = try await self.poll(untrusting, token, until: 200, seconds: 3)
            #expect(refused.status == 503)
            let configuration = try GatewayConfiguration.load(path: untrusting.directory + "/tokengate.yaml")
            let probe = await GatewayServer.probeKeySets(configuration)
            #expect(!probe.ok, "\(probe.lines)")
        } catch {
            await untrusting.stop()
            throw error
        }
        await untrusting.stop()
    }

    /// Hostile and odd key set answers, served as static files by Python's own `http.server` behind TLS from the
    /// test's CA: keys tokengate cannot use are skipped and logged with the URL and the `kid`; a set that
    /// publishes a private key, an answer over `max_bytes` and a redirect are refused, and `check-config
    /// --connect`'s fetch says why.
    @Test(.enabled(if: Self.installed, "scripts/install-deps.sh test installs the provider into .build/oidc-provider"))
    func hostileKeySetAnswers() async throws {
        let provider = try Provider()
        defer { provider.remove() }
        let root = provider.directory + "/www"
        try FileManager.default.createDirectory(atPath: root + "/moved", withIntermediateDirectories: true)
        // One usable RSA key (bound to RS256 by tokens.algorithms), an encryption key and an unknown type.
        try provider.start()
        let published = try Curl.run(["\(provider.issuer)/.well-known/jwks.json"], caFile: provider.caFile)
        provider.stop()
        let object = try #require(try JSONSerialization.jsonObject(with: Data(published.body.utf8)) as? [String: Any])
        var rsa = try #require((object["keys"] as? [[String: Any]])?.first)
        rsa.removeValue(forKey: "alg")
        var encryption = rsa
        encryption["kid"] = "enc-key"
        encryption["use"] = "enc"
        let odd: [String: Any] = ["kty": "ML-DSA", "kid": "post-quantum", "pub": "AAAA"]
        func write(_ name: String, _ keys: [[String: Any]]) throws {
            try JSONSerialization.data(withJSONObject: ["keys": keys]).write(to: URL(fileURLWithPath: root + "/" + name))
        }
        try write("mixed.json", [rsa, encryption, odd])
        var leaked = rsa
        leaked["d"] = "AQAB"
        leaked["kid"] = "leaked"
        try write("private.json", [rsa, leaked])
        try Data(repeating: UInt8(ascii: " "), count: 600 * 1024).write(to: URL(fileURLWithPath: root + "/big.json"))

        let serverScript = """
            import functools, http.server, ssl, sys, signal
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(sys.argv[2], sys.argv[3])
            server.socket = context.wrap_socket(server.socket, server_side=True)
            print("listening", server.server_address[1], flush=True)
            server.serve_forever()
            """
        let output = provider.directory + "/static.out"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = ["-c", serverScript, root, provider.directory + "/op.pem", provider.directory + "/op.key"]
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        var port = 0
        let deadline = Date().addingTimeInterval(20)
        while port == 0, Date() < deadline {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            port = text.split(separator: "\n").first.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
            try await Task.sleep(for: .milliseconds(100))
        }
        try #require(port != 0, "the static server did not start")
        let base = "https://127.0.0.1:\(port)"

        let harness = GatewayHarness()
        do {
            try await harness.start(
                keys: """
                    keys:
                      - { jwks_url: "\(base)/mixed.json", ca_file: "\(provider.caFile)" }
                      - { jwks_url: "\(base)/private.json", ca_file: "\(provider.caFile)" }
                      - { jwks_url: "\(base)/big.json", ca_file: "\(provider.caFile)" }
                      - { jwks_url: "\(base)/moved", ca_file: "\(provider.caFile)" }
                    """,
                tokens: "tokens: { algorithms: [RS256] }"
            )
            let configuration = try GatewayConfiguration.load(path: harness.directory + "/tokengate.yaml")
            let probe = await GatewayServer.probeKeySets(configuration)
            #expect(!probe.ok)
            #expect(probe.lines.count == 4)
            #expect(probe.lines[0].contains("1 usable key"), "\(probe.lines[0])")
            #expect(probe.lines[0].contains("kid enc-key") && probe.lines[0].contains("'use' is 'enc'"), "\(probe.lines[0])")
            #expect(probe.lines[0].contains("kid post-quantum"), "\(probe.lines[0])")
            #expect(probe.lines[1].contains("private key members"), "\(probe.lines[1])")
            #expect(!probe.lines[1].contains("1 usable"), "a set with a private key is refused whole")
            #expect(probe.lines[2].contains("at most 524288"), "\(probe.lines[2])")
            #expect(probe.lines[3].contains("301") && probe.lines[3].contains("redirects are not followed"), "\(probe.lines[3])")

            // serve logs each skipped key with the URL and the kid, and each refused set as a failed fetch.
            let logDeadline = Date().addingTimeInterval(10)
            var logs = ""
            while Date() < logDeadline {
                logs = harness.logLines.all.joined(separator: "\n")
                if logs.contains("kid=post-quantum"), logs.components(separatedBy: "key set fetch failed").count > 3 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let skipped = harness.logLines.all.filter { $0.contains("key set: key skipped") }
            #expect(skipped.contains { $0.contains("kid=enc-key") && $0.contains("source=\(base)/mixed.json") }, "\(skipped)")
            #expect(skipped.contains { $0.contains("kid=post-quantum") }, "\(skipped)")
            #expect(logs.components(separatedBy: "key set fetch failed").count - 1 >= 3, "private, big and moved")
            #expect(!logs.contains("AQAB\""), "no key material in the logs")
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }
}

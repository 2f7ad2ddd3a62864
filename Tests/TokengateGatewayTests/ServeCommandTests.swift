//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTLS
import TokengateTestSupport
import TokengateTokens

/// The `tokengate serve` binary itself, started the way an operator starts it: what it does when its
/// cutoff store is unreachable at start.
@Suite(.serialized)
struct ServeCommandTests {
    static let binary = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build/debug/tokengate").path

    private struct Setup {
        let directory: String
        let signer: TokenSigner
        let port: Int
        let adminPort: Int
    }

    /// A configuration whose PostgreSQL store is unreachable (nothing listens on the port), with a snapshot
    /// cache file next to it.
    private func setUp() throws -> Setup {
        let directory = NSTemporaryDirectory() + "tokengate-serve-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost"])
        try certificate.certificatePEM.write(toFile: directory + "/cert.pem", atomically: true, encoding: .utf8)
        try certificate.privateKeyPEM.write(toFile: directory + "/key.pem", atomically: true, encoding: .utf8)
        let keys = try KeyGenerator.generate(algorithm: .edDSA, keyID: "test-only")
        try keys.publicJWKS.write(toFile: directory + "/public.jwks", atomically: true, encoding: .utf8)
        let port = try GatewayIntegrationTests.unusedPort()
        let adminPort = try GatewayIntegrationTests.unusedPort()
        let closedPort = try GatewayIntegrationTests.unusedPort()
        let yaml = """
            listen:
              - address: 127.0.0.1:\(port)
                tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
            admin: { address: 127.0.0.1:\(adminPort) }
            keys: [ { jwks: public.jwks } ]
            cutoffs:
              postgres: "postgres://tokengate@127.0.0.1:\(closedPort)/tokengate?sslmode=disable"
              stale_after: 60s
              cache_file: cutoffs.cache
            upstreams:
              api: { targets: [ "http://127.0.0.1:9" ] }
            routes:
              - { path_prefix: /, upstream: api, accept: [api] }
            """
        try yaml.write(toFile: directory + "/tokengate.yaml", atomically: true, encoding: .utf8)
        return Setup(directory: directory, signer: try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8)), port: port, adminPort: adminPort)
    }

    /// Switches the setup's configuration to a JSON-file store (no database, no cache) and starts `serve` with it.
    private func serveWithJSONFileStore(_ setup: Setup) throws -> Process {
        let path = setup.directory + "/tokengate.yaml"
        var yaml = try String(contentsOfFile: path, encoding: .utf8)
        let start = yaml.range(of: "cutoffs:")!.lowerBound
        let end = yaml.range(of: "upstreams:")!.lowerBound
        yaml.replaceSubrange(start..<end, with: "cutoffs: { file: cutoffs.json }\n")
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        try "{}".write(toFile: setup.directory + "/cutoffs.json", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["serve", "--config", path]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        return process
    }

    /// The plain case an operator starts with: a JSON-file store, no cache. The process must stay up,
    /// serve, and exit 0 on SIGTERM.
    @Test func servesUntilSIGTERMAndExitsZero() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let process = try self.serveWithJSONFileStore(setup)
        var ready = false
        for _ in 0..<100 where !ready {
            try await Task.sleep(for: .milliseconds(100))
            ready = (try? Curl.run(["--max-time", "1", "https://localhost:\(setup.port)/"], caFile: setup.directory + "/cert.pem").status) == 401
        }
        #expect(ready, "serve did not come up")
        try await Task.sleep(for: .seconds(2))
        #expect(process.isRunning, "serve stopped by itself")
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0, "SIGTERM must end in exit 0")
    }

    /// Every admin endpoint answers a wrong method with 405 and `Allow`: `POST /metrics` returned the
    /// metrics, and the admin API's own `Allow` header was dropped on the way to the client.
    @Test func adminEndpointsAnswerAWrongMethodWith405AndAllow() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let process = try self.serveWithJSONFileStore(setup)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let admin = "http://127.0.0.1:\(setup.adminPort)"
        var ready = false
        for _ in 0..<100 where !ready {
            try await Task.sleep(for: .milliseconds(100))
            ready = (try? Curl.run(["--max-time", "1", admin + "/healthz"], caFile: nil).status) == 200
        }
        try #require(ready, "serve did not come up")
        for (method, endpoint, allow) in [
            ("POST", "/metrics", "GET, HEAD"), ("PUT", "/metrics", "GET, HEAD"), ("GET", "/admin/reload", "POST"),
            ("POST", "/admin/users/alice", "GET"), ("GET", "/admin/revoke-all", "POST"),
            ("POST", "/healthz", "GET, HEAD"), ("DELETE", "/readyz", "GET, HEAD"),
        ] {
            let answer = try Curl.run(["-X", method, admin + endpoint], caFile: nil)
            #expect(answer.status == 405, "\(method) \(endpoint): \(answer.status) \(answer.body.prefix(80))")
            #expect(answer.header("Allow") == allow, "\(method) \(endpoint)")
            #expect(answer.body.contains("\"error\":\"method_not_allowed\""), "\(method) \(endpoint): \(answer.body.prefix(80))")
        }
        let metrics = try Curl.run([admin + "/metrics"], caFile: nil)
        #expect(metrics.status == 200)
        let head = try Curl.run(["-I", admin + "/metrics"], caFile: nil)
        #expect(head.status == 200)
        for probe in ["/healthz", "/readyz"] {
            #expect(try Curl.run([admin + probe], caFile: nil).status == 200, "\(probe)")
            #expect(try Curl.run(["-I", admin + probe], caFile: nil).status == 200, "HEAD \(probe)")
        }
    }

    @Test func refusesToStartWithoutTheStoreOrAFreshCache() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let noCache = try ChildProcess.run("/usr/bin/timeout", ["60", Self.binary, "serve", "--config", setup.directory + "/tokengate.yaml"])
        #expect(noCache.status == 2, "\(noCache.stdout) \(noCache.stderr)")
        #expect(noCache.stderr.contains("refusing to start"), "\(noCache.stderr)")

        try CutoffSnapshot(users: ["bob": UserCutoffs(revokedBefore: 100)]).jsonData()
            .write(to: URL(fileURLWithPath: setup.directory + "/cutoffs.cache"))
        let old = Date(timeIntervalSinceNow: -3600)
        try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: setup.directory + "/cutoffs.cache")
        let stale = try ChildProcess.run("/usr/bin/timeout", ["60", Self.binary, "serve", "--config", setup.directory + "/tokengate.yaml"])
        #expect(stale.status == 2, "a cache older than stale_after must not be trusted: \(stale.stderr)")
    }

    @Test func startsFromAFreshCacheAndEnforcesItsCutoffs() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let now = Int64(Date().timeIntervalSince1970)
        try CutoffSnapshot(users: ["bob": UserCutoffs(revokedBefore: now - 50)]).jsonData()
            .write(to: URL(fileURLWithPath: setup.directory + "/cutoffs.cache"))

        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["serve", "--config", setup.directory + "/tokengate.yaml"]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let base = "https://localhost:\(setup.port)"
        var ready = false
        for _ in 0..<100 where !ready {
            try await Task.sleep(for: .milliseconds(100))
            ready = (try? Curl.run(["--max-time", "1", base + "/"], caFile: setup.directory + "/cert.pem").status) == 401
        }
        #expect(ready, "the gateway did not start from its cache file")
        let claims = { (user: String, iat: Int64) in
            TokenClaims(subject: user, issuedAt: iat, apiOnly: true, expiresAt: nil, notBefore: nil, issuer: nil, audience: nil)
        }
        let revoked = try setup.signer.mint(claims("bob", now - 100))
        let refused = try Curl.run(["-H", "Authorization: Bearer \(revoked)", base + "/x"], caFile: setup.directory + "/cert.pem")
        #expect(refused.status == 401, "a cutoff from the cache file must be enforced: \(refused.body)")
        #expect(refused.body.contains("revoked"))
        let readiness = try Curl.run(["http://127.0.0.1:\(setup.adminPort)/readyz"], caFile: nil)
        #expect(readiness.status == 503, "a gateway running on its cache is not ready: \(readiness.body)")
    }
}

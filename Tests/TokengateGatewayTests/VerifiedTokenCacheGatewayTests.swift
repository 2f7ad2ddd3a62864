//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateConfig
import TokengateTokens

@testable import TokengateGateway

/// The event loops' verified-token caches through a real gateway on loopback, with ES256 tokens sent by curl:
/// a token sent again is served from the cache and still meets every route, time and cutoff check; a flood of
/// distinct tokens stays within `tokens.verified_cache.entries`; a reload starts empty.
@Suite(.serialized)
struct VerifiedTokenCacheGatewayTests {
    /// The gateway's clock, moved by the test.
    final class TestClock: @unchecked Sendable {
        // @unchecked: every access holds `lock`.
        private let lock = NSLock()
        private var seconds = Int64(Date().timeIntervalSince1970)

        var now: Int64 {
            self.lock.lock()
            defer { self.lock.unlock() }
            return self.seconds
        }

        func advance(by delta: Int64) {
            self.lock.lock()
            self.seconds += delta
            self.lock.unlock()
        }
    }

    static let routes = """
          - { path_prefix: /api/, upstream: api, accept: [api], sources: [authorization] }
          - { path_prefix: /narrow/, upstream: api, accept: [api], sources: [authorization], algorithms: [EdDSA] }
          - { path_prefix: /account/, upstream: api, accept: [session], sources: [authorization] }
          - { path_prefix: /, upstream: api, accept: none }
        """

    static func tokensSection(entries: Int) -> String {
        "tokens: { clock_skew: 0s, verified_cache: { entries: \(entries) } }"
    }

    func get(_ gateway: GatewayHarness, _ path: String, token: String) throws -> Curl.Result {
        try Curl.run(["-H", "Authorization: Bearer \(token)", gateway.baseURL + path], caFile: gateway.certificatePath)
    }

    func cached(_ gateway: GatewayHarness) async throws -> Int {
        try await gateway.server.verifiedTokenCacheCounts().reduce(0, +)
    }

    @Test func cachedTokensMeetEveryCheckAndTheBoundHolds() async throws {
        let clock = TestClock()
        let es256 = try KeyGenerator.generate(algorithm: .es256, keyID: "test-only-es256")
        let signer = try TokenSigner(privateJWKS: Array(es256.privateJWKS.utf8))
        func mint(_ subject: String, expiresIn: Int64 = 100) throws -> String {
            try signer.mint(
                TokenClaims(subject: subject, issuedAt: clock.now - 5, apiOnly: true, expiresAt: clock.now + expiresIn)
            )
        }
        let gateway = GatewayHarness()
        do {
            try FileManager.default.createDirectory(atPath: gateway.directory, withIntermediateDirectories: true)
            try es256.publicJWKS.write(toFile: gateway.directory + "/es256.jwks", atomically: true, encoding: .utf8)
            try await gateway.start(
                routes: Self.routes,
                keys: "keys: [ { jwks: es256.jwks } ]",
                tokens: Self.tokensSection(entries: 8),
                now: { clock.now }
            )
            let token = try mint("alice")

            // Verified once, then served from the cache with the same identity.
            for _ in 0..<2 {
                let answer = try self.get(gateway, "/api/x", token: token)
                #expect(answer.status == 200, "\(answer.status) \(answer.body)")
                #expect(answer.body.contains(#""user":"alice""#), "\(answer.body)")
            }
            #expect(try await self.cached(gateway) == 1)

            // Routes that do not take it still refuse it.
            let narrow = try self.get(gateway, "/narrow/x", token: token)
            #expect(narrow.status == 401)
            #expect(narrow.header("www-authenticate")?.contains("The token algorithm is not allowed.") == true)
            #expect(try self.get(gateway, "/account/x", token: token).status == 403)

            // A revocation refuses it on the next request; lifting it lets the cached entry serve again.
            gateway.cutoffs.store(CutoffSnapshot(users: ["alice": UserCutoffs(revokedBefore: clock.now)]))
            let revoked = try self.get(gateway, "/api/x", token: token)
            #expect(revoked.status == 401)
            #expect(revoked.header("www-authenticate")?.contains(#"error="invalid_token""#) == true)
            gateway.cutoffs.store(.empty)
            #expect(try self.get(gateway, "/api/x", token: token).status == 200)

            // Once its `exp` passes, the cached token is refused.
            clock.advance(by: 100)
            let expired = try self.get(gateway, "/api/x", token: token)
            #expect(expired.status == 401)
            #expect(expired.header("www-authenticate")?.contains("expired") == true, "\(expired.headers)")

            // A flood of distinct valid tokens over one connection: every one is served, and no loop's cache
            // holds more than its 8 entries.
            var arguments: [String] = []
            for index in 0..<40 {
                if index > 0 { arguments.append("--next") }
                arguments += ["-o", "/dev/null", "-w", "%{http_code}\n", "-H", "Authorization: Bearer \(try mint("user-\(index)"))"]
                arguments += ["--cacert", gateway.certificatePath, gateway.baseURL + "/api/flood"]
            }
            let (code, stdout, stderr) = try Curl.process("/usr/bin/curl", ["-sS", "--max-time", "30"] + arguments)
            #expect(code == 0, "\(stderr)")
            #expect(stdout.split(separator: "\n").filter { $0 == "200" }.count == 40, "\(stdout)")
            let counts = try await gateway.server.verifiedTokenCacheCounts()
            #expect(counts.allSatisfy { $0 <= 8 }, "\(counts)")
            #expect(counts.reduce(0, +) >= 8, "the loop that served the flood is full: \(counts)")

            // A reload starts every loop empty; so does a configuration that turns the cache off.
            let path = gateway.directory + "/tokengate.yaml"
            try gateway.server.reload(configurationPath: path)
            #expect(try await self.cached(gateway) == 0)
            #expect(try self.get(gateway, "/api/x", token: try mint("bob")).status == 200)
            #expect(try await self.cached(gateway) == 1)
            let yaml = try String(contentsOfFile: path, encoding: .utf8)
            try yaml.replacingOccurrences(of: Self.tokensSection(entries: 8), with: Self.tokensSection(entries: 0))
                .write(toFile: path, atomically: true, encoding: .utf8)
            try gateway.server.reload(configurationPath: path)
            #expect(try await gateway.server.verifiedTokenCacheCounts().isEmpty)
            #expect(try self.get(gateway, "/api/x", token: try mint("carol")).status == 200)
        } catch {
            await gateway.stop()
            throw error
        }
        await gateway.stop()
    }
}

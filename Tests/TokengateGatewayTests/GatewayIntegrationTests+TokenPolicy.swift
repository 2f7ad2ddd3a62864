//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateGateway
import TokengateTokens

/// The token policy keys a route or the `tokens` section sets, met through real TLS with curl: a route's
/// `algorithms` and `require_claims`, a list of `tokens.audience`, a `keys` entry's `alg` for a JWK Set, and
/// a gateway without keys whose routes take no token.
extension GatewayIntegrationTests {
    /// Starts a gateway after writing `files` (name → contents) next to its configuration.
    private func withPolicyGateway(
        routes: String,
        keys: String,
        tokens: String = "",
        files: [String: String] = [:],
        _ body: (GatewayHarness) async throws -> Void
    ) async throws {
        let harness = GatewayHarness()
        do {
            try FileManager.default.createDirectory(atPath: harness.directory, withIntermediateDirectories: true)
            for (name, text) in files {
                try text.write(toFile: harness.directory + "/" + name, atomically: true, encoding: .utf8)
            }
            try await harness.start(routes: routes, keys: keys, tokens: tokens)
            try await body(harness)
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    private func get(_ gateway: GatewayHarness, _ path: String, token: String) throws -> Curl.Result {
        try self.curl(gateway, ["-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)\(path)"])
    }

    private func claims(_ subject: String, expiresAt: Int64? = nil, audience: String? = nil) -> TokenClaims {
        TokenClaims(
            subject: subject,
            issuedAt: Int64(Date().timeIntervalSince1970) - 5,
            apiOnly: true,
            expiresAt: expiresAt,
            audience: audience
        )
    }

    /// `routes[].algorithms: [HS512]` turns away an HS256 token the gateway's key set and `tokens.algorithms`
    /// allow, with the answer a globally disallowed algorithm gets; `require_claims: [exp]` turns away a token
    /// without `exp`. Other routes are untouched. Before, both keys were parsed and ignored: both tokens went
    /// through.
    @Test func routeAlgorithmsAndRequiredClaimsAreEnforced() async throws {
        let hs512 = try KeyGenerator.generate(algorithm: .hs512, keyID: "test-only-hs512")
        let routes = """
              - { path_prefix: /narrow/, upstream: api, accept: [api], algorithms: [HS512] }
              - { path_prefix: /exp/, upstream: api, accept: [api], require_claims: [exp] }
              - { path_prefix: /api/, upstream: api, accept: [api] }
              - { path_prefix: /, upstream: api, accept: none }
            """
        try await self.withPolicyGateway(
            routes: routes,
            keys: "keys: [ { jwks: public.jwks }, { jwks: hs512.jwks } ]",
            files: ["hs512.jwks": hs512.publicJWKS]
        ) { gateway in
            let hs256Token = try gateway.mint("alice")
            let hs512Token = try TokenSigner(privateJWKS: Array(hs512.privateJWKS.utf8)).mint(self.claims("bob"))

            let narrowed = try self.get(gateway, "/narrow/x", token: hs256Token)
            #expect(narrowed.status == 401, "\(narrowed.status) \(narrowed.body)")
            #expect(narrowed.header("www-authenticate")?.contains("The token algorithm is not allowed.") == true)
            #expect(try self.get(gateway, "/narrow/x", token: hs512Token).status == 200)
            #expect(try self.get(gateway, "/api/x", token: hs256Token).status == 200, "other routes keep every algorithm")
            #expect(try self.get(gateway, "/api/x", token: hs512Token).status == 200)

            let withoutExp = try self.get(gateway, "/exp/x", token: hs256Token)
            #expect(withoutExp.status == 401, "\(withoutExp.status) \(withoutExp.body)")
            #expect(withoutExp.header("www-authenticate")?.contains("The token lacks a required claim.") == true)
            let inAnHour = Int64(Date().timeIntervalSince1970) + 3600
            let withExp = try gateway.signer.mint(self.claims("alice", expiresAt: inAnHour))
            #expect(try self.get(gateway, "/exp/x", token: withExp).status == 200)
            let expired = try gateway.signer.mint(self.claims("alice", expiresAt: inAnHour - 7200))
            #expect(try self.get(gateway, "/exp/x", token: expired).status == 401)

            let metrics = gateway.server.metrics.render()
            #expect(metrics.contains(#"tokengate_rejections_total{route="/narrow/",reason="alg_not_allowed"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"tokengate_rejections_total{route="/exp/",reason="missing_claim"} 1"#))
        }
    }

    /// `tokens.audience: [web, mobile]`: a token for either audience passes. Before, only the first was
    /// checked and a `mobile` token got 401.
    @Test func anyConfiguredAudienceIsAccepted() async throws {
        try await self.withPolicyGateway(
            routes: GatewayHarness.defaultRoutes,
            keys: "keys: [ { jwks: public.jwks } ]",
            tokens: "tokens: { audience: [web, mobile] }"
        ) { gateway in
            for audience in ["web", "mobile"] {
                let token = try gateway.signer.mint(self.claims("alice", audience: audience))
                let result = try self.get(gateway, "/api/x", token: token)
                #expect(result.status == 200, "aud \(audience): \(result.status) \(result.body)")
            }
            for audience in ["other", nil] {
                let token = try gateway.signer.mint(self.claims("alice", audience: audience))
                #expect(try self.get(gateway, "/api/x", token: token).status == 401, "aud \(audience ?? "absent")")
            }
        }
    }

    /// A `keys` entry's `alg` binds the JWKs of its set that carry none: a 64-byte HMAC JWK without `alg`
    /// under `alg: HS512` verifies HS512 tokens only. Before, the entry's `alg` was dropped and the key
    /// verified HS256 and HS384 tokens made with the same secret too.
    @Test func aKeysEntryAlgBindsJWKsWithoutTheirOwn() async throws {
        let generated = try KeyGenerator.generate(algorithm: .hs512, keyID: "test-only-plain")
        let withoutAlg = generated.publicJWKS.replacingOccurrences(of: #""alg" : "HS512","#, with: "")
        try #require(withoutAlg != generated.publicJWKS)
        try await self.withPolicyGateway(
            routes: GatewayHarness.defaultRoutes,
            keys: "keys: [ { jwks: plain.jwks, alg: HS512 } ]",
            files: ["plain.jwks": withoutAlg]
        ) { gateway in
            let hs512Token = try TokenSigner(privateJWKS: Array(generated.privateJWKS.utf8)).mint(self.claims("alice"))
            #expect(try self.get(gateway, "/api/x", token: hs512Token).status == 200)
            let sameSecretHS256 = generated.privateJWKS.replacingOccurrences(of: "HS512", with: "HS256")
            let hs256Token = try TokenSigner(privateJWKS: Array(sameSecretHS256.utf8)).mint(self.claims("alice"))
            let refused = try self.get(gateway, "/api/x", token: hs256Token)
            #expect(refused.status == 401, "\(refused.status) \(refused.body)")
            #expect(refused.header("www-authenticate")?.contains("The token algorithm is not allowed.") == true)
        }
    }

    /// No `keys` at all is a valid configuration while no route takes a token (docs/configuration.md). Before,
    /// the gateway refused to start: "keys: no verification key is configured".
    @Test func aGatewayWithoutKeysServesRoutesThatTakeNoToken() async throws {
        try await self.withPolicyGateway(
            routes: "  - { path_prefix: /, upstream: api, accept: none }",
            keys: ""
        ) { gateway in
            let result = try self.curl(gateway, ["\(gateway.baseURL)/open"])
            #expect(result.status == 200, "\(result.status) \(result.body)")
        }
    }
}

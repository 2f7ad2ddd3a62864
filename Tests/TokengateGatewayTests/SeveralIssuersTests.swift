//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
@testable import TokengateGateway
import TokengateConfig
import TokengateTestSupport
import TokengateTokens

/// Two issuers on one gateway, over real sockets: the real OpenID provider of ``IdentityProviderKeysTests``
/// (django-oauth-toolkit, RS256 ID tokens, keys by discovery) as `kind: jwt` issuer `idp`, and the top-level
/// HS256 keys of the token page as `tokens`. Routes name the issuers they accept; the token's `iss` picks the
/// keys that check it; cutoffs are per issuer.
@Suite(.serialized)
struct SeveralIssuersTests {
    typealias Provider = IdentityProviderKeysTests.Provider

    static let routes = """
          - { path_prefix: /both/, upstream: api, accept: [api, session], issuers: [tokens, idp] }
          - { path_prefix: /page/, upstream: api, accept: [api, session], issuers: [tokens] }
          - { path_prefix: /idp/, upstream: api, accept: [api], issuers: [idp] }
          - { path_prefix: /, upstream: api, accept: none }
        """

    func issuers(_ provider: Provider) -> String {
        """
        issuers:
          - name: idp
            kind: jwt
            token_kind: api
            tokens: { issuer: "\(provider.issuer)", algorithms: [RS256], audience: tokengate-app }
            keys: [ { discovery: "\(provider.issuer)", ca_file: "\(provider.caFile)", refetch_interval: 1s } ]
        rate_limits: { failed_tokens: off }
        """
    }

    func get(_ gateway: GatewayHarness, _ path: String, _ token: String) throws -> Curl.Result {
        try Curl.run(["-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)\(path)"], caFile: gateway.certificatePath)
    }

    /// The `error_description`'s reason code the gateway puts in its answer, via the access log's reason.
    func refusal(_ result: Curl.Result) -> String {
        "\(result.status) \(result.header("www-authenticate") ?? "")"
    }

    static func base64URL(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func payload(_ token: String) throws -> [String: Any] {
        var part = String(token.split(separator: ".")[1])
            .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while part.count % 4 != 0 { part += "=" }
        let data = try #require(Data(base64Encoded: part))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// An HS256 token over `header` and `payload`, its HMAC keyed with `secret`, computed by the openssl CLI.
    static func hs256(header: String, payload: String, secret: [UInt8]) throws -> String {
        let input = Self.base64URL(Array(header.utf8)) + "." + Self.base64URL(Array(payload.utf8))
        let directory = NSTemporaryDirectory() + "tokengate-hmac-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try input.write(toFile: directory + "/input", atomically: true, encoding: .utf8)
        let hexKey = secret.map { String(format: "%02x", $0) }.joined()
        let result = try ChildProcess.run(
            "/usr/bin/openssl", ["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:\(hexKey)", "-binary",
                                 "-out", directory + "/mac", directory + "/input"])
        guard result.status == 0 else { throw IdentityProviderKeysTests.ProviderError("openssl: \(result.stderr)") }
        let mac = try Data(contentsOf: URL(fileURLWithPath: directory + "/mac"))
        return input + "." + Self.base64URL(mac)
    }

    @Test(.enabled(if: IdentityProviderKeysTests.installed, "scripts/install-deps.sh test installs the provider"))
    func providerAndTokenPageIssuersOnOneGateway() async throws {
        let provider = try Provider()
        defer { provider.remove() }
        try provider.start()
        let harness = GatewayHarness()
        do {
            try await harness.start(routes: Self.routes, keys: "keys: [ { jwks: public.jwks } ]", sections: self.issuers(provider))
            let idpToken = try provider.mint()
            let idpClaims = try Self.payload(idpToken)
            let user = try #require(idpClaims["sub"] as? String)
            // The token page's issuer's token for the same user id: same name, another issuer.
            let pageToken = try harness.mint(user)

            // The provider's keys come by discovery: 503 until the first fetch is in.
            var both = try self.get(harness, "/both/x", idpToken)
            let deadline = Date().addingTimeInterval(20)
            while both.status == 503, Date() < deadline {
                try await Task.sleep(for: .milliseconds(200))
                both = try self.get(harness, "/both/x", idpToken)
            }
            #expect(both.status == 200, "\(both.status) \(both.body)")
            #expect(try self.get(harness, "/both/x", pageToken).status == 200)
            // The access log names the issuer by its configured name, never by the token's iss.
            #expect(harness.logLines.all.contains { $0.contains("issuer=idp") })
            #expect(harness.logLines.all.contains { $0.contains("issuer=tokens") })
            for line in harness.logLines.all {
                guard let range = line.range(of: "issuer=") else { continue }
                let value = line[range.upperBound...].prefix { $0 != " " && $0 != "\n" }
                #expect(["idp", "tokens"].contains(String(value)), "\(line)")
            }

            // Each refused on the route that names only the other.
            let idpOnPage = try self.get(harness, "/page/x", idpToken)
            #expect(idpOnPage.status == 401)
            #expect(idpOnPage.header("www-authenticate")?.contains("error=\"invalid_token\"") == true)
            #expect(Self.logged(harness, "issuer_not_accepted"), "\(self.refusal(idpOnPage))")
            #expect(try self.get(harness, "/page/x", pageToken).status == 200)
            let pageOnIdp = try self.get(harness, "/idp/x", pageToken)
            #expect(pageOnIdp.status == 401)
            #expect(try self.get(harness, "/idp/x", idpToken).status == 200)

            let now = Int64(Date().timeIntervalSince1970)
            // An iss no issuer has, signed with the page's own key: refused before any key is tried.
            let stranger = try harness.signer.mint(
                TokenClaims(subject: user, issuedAt: now - 5, apiOnly: true, expiresAt: nil, notBefore: nil,
                            issuer: "https://elsewhere.example", audience: nil))
            let strangerAnswer = try self.get(harness, "/both/x", stranger)
            #expect(strangerAnswer.status == 401)
            #expect(Self.logged(harness, "unknown_issuer"))

            // Attack: a token naming the provider, signed with the token page's HMAC secret (its own kid, HS256).
            // The provider's keys alone check it: never a 200.
            let claimsProvider = try harness.signer.mint(
                TokenClaims(subject: user, issuedAt: now - 5, apiOnly: true, expiresAt: nil, notBefore: nil,
                            issuer: provider.issuer, audience: "tokengate-app"))
            let claimsProviderAnswer = try self.get(harness, "/both/x", claimsProvider)
            #expect([401, 503].contains(claimsProviderAnswer.status), "\(claimsProviderAnswer.status)")

            // Attack: algorithm confusion. The provider's RS256 key's kid with alg HS256, the HMAC keyed with the
            // provider's published key set (what an attacker can download) as the secret.
            let header = try #require(
                String(data: Data(base64Encoded: Self.padded(String(idpToken.split(separator: ".")[0])))!, encoding: .utf8))
            let kid = try #require(
                (try JSONSerialization.jsonObject(with: Data(header.utf8)) as? [String: Any])?["kid"] as? String)
            let jwks = try Curl.run(["\(provider.issuer)/.well-known/jwks.json"], caFile: provider.caFile)
            var confusedPayload = idpClaims
            confusedPayload["iat"] = now - 5
            let payloadText = String(decoding: try JSONSerialization.data(withJSONObject: confusedPayload), as: UTF8.self)
            for secret in [Array(jwks.body.utf8), Array(kid.utf8)] {
                let confused = try Self.hs256(
                    header: "{\"alg\":\"HS256\",\"kid\":\"\(kid)\",\"typ\":\"JWT\"}", payload: payloadText, secret: secret)
                let answer = try self.get(harness, "/both/x", confused)
                #expect(answer.status == 401, "\(answer.status)")
            }
            #expect(Self.logged(harness, "alg_not_allowed"))

            // Cutoffs per issuer: the provider's user revoked, the page's user of the same id untouched.
            harness.cutoffs.store(CutoffSnapshot(users: [
                CutoffUserKey(IssuerScopedUser.key(issuer: "idp", user: user)): UserCutoffs(revokedBefore: now + 60),
            ]))
            #expect(try self.get(harness, "/both/x", idpToken).status == 401)
            #expect(try self.get(harness, "/both/x", pageToken).status == 200)
            // And the other way: the bare id is the token page issuer's user only.
            harness.cutoffs.store(CutoffSnapshot(users: [CutoffUserKey(user): UserCutoffs(revokedBefore: now + 60)]))
            #expect(try self.get(harness, "/both/x", pageToken).status == 401)
            #expect(try self.get(harness, "/both/x", idpToken).status == 200)
            harness.cutoffs.store(.empty)
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    /// Whether some access log line holds `reason` (the gateway logs each refusal's reason code).
    static func logged(_ harness: GatewayHarness, _ reason: String) -> Bool {
        harness.logLines.all.contains { $0.contains("reason=\(reason)") }
    }

    static func padded(_ text: String) -> String {
        var part = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while part.count % 4 != 0 { part += "=" }
        return part
    }
}

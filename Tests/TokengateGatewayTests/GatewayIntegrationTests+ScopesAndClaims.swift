//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateDemo
import TokengateGateway
@testable import TokengateTokens

/// A route's `require_scopes` and `forward_claims` through the real TLS socket with curl, over HTTP/1.1 and
/// HTTP/2: the 403 challenge RFC 6750 §3 describes, the claims the backend gets, and what a client may not add.
extension GatewayIntegrationTests {
    private static let scopeRoutes = """
          - { path_prefix: /orders/, upstream: api, accept: [api], require_scopes: [orders:read, orders:write] }
          - { path_prefix: /profile/, upstream: api, accept: [api], forward_claims: { email: X-Tokengate-Email, groups: X-Groups, verified: X-Email-Verified } }
          - { path_prefix: /api/, upstream: api, accept: [api] }
          - { path_prefix: /, upstream: api, accept: none }
        """

    /// An HS256 token with any payload, signed by the harness's key (the gateway's `public.jwks`).
    private func signed(_ gateway: GatewayHarness, _ extra: String, subject: String = "alice") throws -> String {
        let header = #"{"alg":"HS256","typ":"JWT","kid":"test-only-hs"}"#
        let iat = Int64(Date().timeIntervalSince1970) - 5
        let payload = #"{"sub":"\#(subject)","iat":\#(iat),"api_only":true\#(extra)}"#
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        return input + "." + Base64URL.encode(try gateway.signer.key.sign(Array(input.utf8)))
    }

    private func echoHeaders(_ result: Curl.Result) throws -> [[String]] {
        let echo = try #require(try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any])
        return (echo["headers"] as? [[String]]) ?? []
    }

    @Test func aTokenWithoutTheRouteScopesGets403WithTheScopeChallenge() async throws {
        try await self.withGateway(routes: Self.scopeRoutes) { gateway in
            let enough = try self.signed(gateway, #","scope":"openid orders:read orders:write""#)
            let asArray = try self.signed(gateway, #","scp":["orders:write","orders:read"]"#)
            let readOnly = try self.signed(gateway, #","scope":"openid orders:read""#)
            for version in ["--http1.1", "--http2"] {
                for token in [enough, asArray] {
                    let result = try self.curl(gateway, [version, "-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/orders/1"])
                    #expect(result.status == 200, "\(version): \(result.body)")
                }
                let before = gateway.backend.requestsReceived
                let refused = try self.curl(gateway, [version, "-H", "Authorization: Bearer \(readOnly)", "\(gateway.baseURL)/orders/1"])
                #expect(refused.status == 403, "\(version): \(refused.status) \(refused.body)")
                #expect(
                    refused.header("www-authenticate")
                        == #"Bearer realm="test.example", error="insufficient_scope", "#
                        + #"error_description="The token does not grant the scope this resource requires.", "#
                        + #"scope="orders:read orders:write""#,
                    "\(version): \(refused.headers)")
                let body = try #require(try JSONSerialization.jsonObject(with: Data(refused.body.utf8)) as? [String: String])
                #expect(body["error"] == "insufficient_scope")
                #expect(gateway.backend.requestsReceived == before, "a refused request reached the backend")
            }
            // The same token is fine where no scope is required, and a dead token stays a 401 on the scope route.
            let plain = try self.curl(gateway, ["-H", "Authorization: Bearer \(readOnly)", "\(gateway.baseURL)/api/x"])
            #expect(plain.status == 200)
            let forged = readOnly.dropLast(4) + "AAAA"
            let bad = try self.curl(gateway, ["-H", "Authorization: Bearer \(forged)", "\(gateway.baseURL)/orders/1"])
            #expect(bad.status == 401)
        }
    }

    @Test func forwardedClaimsReachTheBackendAndClientCopiesNever() async throws {
        try await self.withGateway(routes: Self.scopeRoutes) { gateway in
            let token = try self.signed(gateway, #","email":"al\u00efce@example.org","groups":["staff","ops"],"verified":true"#)
            for version in ["--http1.1", "--http2"] {
                let result = try self.curl(gateway, [
                    version, "-H", "Authorization: Bearer \(token)", "-H", "X-Tokengate-Email: mallory@example.org",
                    "-H", "x-groups: admin", "-H", "X-Email-Verified: true", "\(gateway.baseURL)/profile/me",
                ])
                #expect(result.status == 200, "\(version): \(result.body)")
                let headers = try self.echoHeaders(result)
                #expect(headers.filter { $0[0] == "x-tokengate-email" }.map { $0[1] } == ["alïce@example.org"], "\(version): \(headers)")
                #expect(headers.filter { $0[0] == "x-groups" }.map { $0[1] } == ["staff ops"], "\(version): \(headers)")
                #expect(headers.filter { $0[0] == "x-email-verified" }.map { $0[1] } == ["true"], "\(version): \(headers)")
            }
            // A token without the claims: the client's copies are removed all the same, nothing is made up.
            let bare = try self.signed(gateway, "")
            let result = try self.curl(gateway, [
                "-H", "Authorization: Bearer \(bare)", "-H", "X-Groups: admin", "-H", "X-Email-Verified: true",
                "\(gateway.baseURL)/profile/me",
            ])
            #expect(result.status == 200, "\(result.body)")
            let names = try self.echoHeaders(result).map { $0[0] }
            #expect(!names.contains("x-groups") && !names.contains("x-email-verified"), "\(names)")
            #expect(names.contains("x-tokengate-user"))
            // A route that forwards no claim leaves a client's X-Groups alone: the name is the route's only there.
            let other = try self.curl(gateway, ["-H", "Authorization: Bearer \(bare)", "-H", "X-Groups: admin", "\(gateway.baseURL)/api/x"])
            #expect(try self.echoHeaders(other).contains(["x-groups", "admin"]))
        }
    }

    @Test func aClaimNoHeaderCanCarryIsRefusedNotForwarded() async throws {
        try await self.withGateway(routes: Self.scopeRoutes) { gateway in
            let before = gateway.backend.requestsReceived
            for extra in [
                #","email":"a@example.org\r\nX-Tokengate-User: root""#, #","email":"a\u0000b""#,
                #","groups":["ops",{"admin":true}]"#,
                #","email":""# + String(repeating: "e", count: 1025) + #"""#,
            ] {
                let token = try self.signed(gateway, extra)
                let result = try self.curl(gateway, ["-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/profile/me"])
                #expect(result.status == 401, "\(extra.prefix(40)): \(result.status) \(result.body)")
                #expect(result.header("www-authenticate")?.contains(#"error="invalid_token""#) == true)
                #expect(result.body.contains("A token claim cannot be forwarded as a header value."), "\(result.body)")
                // Where the claim is not forwarded the same token is fine.
                let elsewhere = try self.curl(gateway, ["-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/api/x"])
                #expect(elsewhere.status == 200, "\(extra.prefix(40))")
            }
            #expect(gateway.backend.requestsReceived == before + 4, "only the /api/ requests reached the backend")
            let lines = gateway.logLines.all.joined(separator: "\n")
            #expect(lines.contains("unforwardable_claim"), "the refusal's reason is logged")
            #expect(!lines.contains("X-Tokengate-User: root"), "a claim value is never logged")
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateConfig

/// A route's `require_scopes` and `forward_claims`: what decodes, and every name refused at load.
@Suite struct ScopesAndClaimsConfigurationTests {
    /// The minimal configuration with one route given as a flow mapping's inner text.
    func yaml(_ route: String) -> String {
        let base = minimalYAML.components(separatedBy: "routes:")[0]
        return base + "routes:\n  - { path_prefix: /api/, upstream: api, accept: [api], \(route) }\n"
    }

    @Test func decodesScopesAndClaimsInOrder() throws {
        let configuration = try parse(
            self.yaml("require_scopes: [orders:read, write], forward_claims: { email: X-Tokengate-Email, groups: X-Groups }"))
        let route = try #require(configuration.routes.first)
        #expect(route.requiredScopes == ["orders:read", "write"])
        #expect(
            route.forwardClaims == [
                ForwardedClaim(claim: "email", header: "X-Tokengate-Email"), ForwardedClaim(claim: "groups", header: "X-Groups"),
            ])
        let plain = try #require(try parse(minimalYAML).routes.first)
        #expect(plain.requiredScopes.isEmpty && plain.forwardClaims.isEmpty)
    }

    @Test func refusesWhatCannotBeCheckedOrForwarded() {
        let cases: [(String, String)] = [
            ("require_scopes: [\"two words\"]", "not a scope name"),
            ("require_scopes: ['quo\"te']", "not a scope name"),
            ("require_scopes: [read, read]", "listed twice"),
            ("require_scopes: []", "at least one scope"),
            ("require_scopes: read", "expected a list"),
            ("forward_claims: { email: X-Tokengate-User }", "owns or removes"),
            ("forward_claims: { email: x-tokengate-key-id }", "owns or removes"),
            ("forward_claims: { email: Authorization }", "owns or removes"),
            ("forward_claims: { email: Host }", "owns or removes"),
            ("forward_claims: { email: X-Forwarded-For }", "owns or removes"),
            ("forward_claims: { email: Transfer-Encoding }", "owns or removes"),
            ("forward_claims: { email: Connection }", "owns or removes"),
            ("forward_claims: { email: X_Email }", "not a header name"),
            ("forward_claims: { email: \"X Email\" }", "not a header name"),
            ("forward_claims: { email: \"X-Email:\" }", "not a header name"),
            ("forward_claims: { email: X-Email, name: x-email }", "carries two claims"),
            ("forward_claims: { sub: X-Sub }", "checked by the gateway"),
            ("forward_claims: { exp: X-Exp }", "checked by the gateway"),
            ("forward_claims: { iss: X-Iss }", "checked by the gateway"),
            ("forward_claims: { api_only: X-Api }", "checked by the gateway"),
            ("forward_claims: {}", "at least one claim"),
            ("forward_claims: [email]", "expected a mapping"),
        ]
        for (route, expected) in cases {
            let error = parseError(self.yaml(route))
            #expect(error?.description.contains(expected) == true, "\(route): \(String(describing: error))")
            #expect(error?.description.contains("routes[0]") == true, "\(route): \(String(describing: error))")
        }
    }

    @Test func aRouteWithoutTokensTakesNeither() {
        let base = minimalYAML.components(separatedBy: "routes:")[0]
        for key in ["require_scopes: [read]", "forward_claims: { email: X-Email }"] {
            let error = parseError(base + "routes:\n  - { path_prefix: /, upstream: api, accept: none, \(key) }\n")
            #expect(error?.description.contains("takes no token") == true, "\(String(describing: error))")
        }
    }

    @Test func boundsPerRoute() {
        let scopes = (0...16).map { "s\($0)" }.joined(separator: ", ")
        #expect(parseError(self.yaml("require_scopes: [\(scopes)]"))?.description.contains("at most 16") == true)
        let claims = (0...16).map { "c\($0): X-C\($0)" }.joined(separator: ", ")
        #expect(parseError(self.yaml("forward_claims: { \(claims) }"))?.description.contains("at most 16") == true)
    }
}

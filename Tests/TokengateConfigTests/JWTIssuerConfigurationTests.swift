//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateConfig

/// `kind: jwt` items of `issuers:` and a route's `issuers:`, in a whole configuration.
@Suite struct JWTIssuerConfigurationTests {
    static let idp = """
          - name: idp
            kind: jwt
            default: true
            token_kind: api
            token_kind_claim: app_only
            tokens:
              issuer: https://login.example.com/o
              audience: [shop-api]
              algorithms: [RS256, ES256]
              claims: { user: sub }
              clock_skew: 30s
            keys: [ { discovery: https://login.example.com/o } ]
        """
    static let partner = """
          - name: partner
            kind: jwt
            tokens: { issuer: partner, algorithms: [HS256] }
            keys: [ { hmac_env: PARTNER_SECRET, alg: HS256 } ]
        """

    func yaml(keys: String = "keys: [ { hmac_env: PAGE_SECRET, alg: HS256 } ]", tokens: String = "",
              issuers: String, routes: String) -> String {
        """
        listen: [ { address: 127.0.0.1:8443, tls: { certificates: [ { cert: c.pem, key: k.pem } ] } } ]
        \(keys)
        \(tokens)
        cutoffs: { file: cutoffs.json }
        upstreams: { app: { targets: [ "http://127.0.0.1:9000" ] } }
        issuers:
        \(issuers)
        routes:
        \(routes)
        """
    }

    func problems(_ yaml: String) throws -> [ConfigurationError] {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/test.yaml"
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        do {
            _ = try GatewayConfiguration.loadReportingEveryProblem(path: path, checkFiles: false, environment: .none)
            return []
        } catch {
            return error.errors
        }
    }

    @Test func anIssuerHasItsOwnKeysAndSettings() throws {
        let configuration = try parse(self.yaml(
            tokens: "tokens: { issuer: https://shop.example.com }",
            issuers: Self.idp + "\n" + Self.partner,
            routes: """
                  - { path_prefix: /both/, upstream: app, accept: [api], issuers: [tokens, idp] }
                  - { path_prefix: /page/, upstream: app, accept: [api, session] }
                  - { path_prefix: /, upstream: app, accept: none }
                """))
        #expect(configuration.jwtIssuers.keys.sorted() == ["idp", "partner"])
        let idp = try #require(configuration.jwtIssuers["idp"])
        #expect(idp.tokens.issuer == "https://login.example.com/o")
        #expect(idp.tokens.audience == ["shop-api"])
        #expect(idp.tokens.algorithms == [.rs256, .es256])
        #expect(idp.tokens.claims.user == "sub")
        #expect(idp.tokens.clockSkew == .seconds(30))
        #expect(idp.isDefault)
        #expect(idp.tokenKind == .api)
        #expect(idp.tokenKindClaim == "app_only")
        guard case .remote(let remote) = idp.keys.first?.source else {
            Issue.record("expected a fetched key set, got \(String(describing: idp.keys.first))")
            return
        }
        #expect(remote.kind == .discovery)
        let partner = try #require(configuration.jwtIssuers["partner"])
        #expect(!partner.isDefault)
        #expect(partner.tokenKind == .api)
        #expect(partner.tokenKindClaim == nil)
        #expect(partner.keys.first?.algorithm == .hs256)
        // The top-level pair is untouched by the issuers: it stays the token page's issuer.
        #expect(configuration.tokens.issuer == "https://shop.example.com")
        #expect(configuration.keys.first?.algorithm == .hs256)

        let both = configuration.routes[0]
        #expect(both.issuers == ["tokens", "idp"])
        #expect(both.acceptedIssuers(topLevelKeys: true, jwtIssuers: configuration.jwtIssuers) == ["tokens", "idp"])
        // Without `issuers`, a route accepts what it did before the list had a JWT issuer: the top-level keys'.
        let page = configuration.routes[1]
        #expect(page.issuers == nil)
        #expect(page.acceptedIssuers(topLevelKeys: true, jwtIssuers: configuration.jwtIssuers) == ["tokens"])
        #expect(page.acceptedIssuers(topLevelKeys: false, jwtIssuers: configuration.jwtIssuers) == ["idp", "partner"])
    }

    @Test func aGatewayWithoutTopLevelKeysServesItsIssuersRoutes() throws {
        let configuration = try parse(self.yaml(
            keys: "",
            issuers: Self.partner,
            routes: """
                  - { path_prefix: /api/, upstream: app, accept: [api] }
                  - { path_prefix: /, upstream: app, accept: none }
                """))
        #expect(configuration.keys.isEmpty)
        #expect(configuration.routes[0].acceptedIssuers(topLevelKeys: false, jwtIssuers: configuration.jwtIssuers)
            == ["partner"])
        // Naming the top-level issuer needs top-level keys.
        let error = parseError(self.yaml(
            keys: "", issuers: Self.partner,
            routes: "  - { path_prefix: /api/, upstream: app, accept: [api], issuers: [tokens] }"))
        #expect(error?.code == .missingKey)
        #expect(error?.message.contains("top-level keys") == true, "\(String(describing: error))")
    }

    @Test func refusalsOfOneIssuer() {
        let cases: [(String, ConfigurationError.Code, String)] = [
            ("{ name: a, kind: jwt, keys: [ { hmac_env: S, alg: HS256 } ] }", .missingKey, "tokens"),
            ("{ name: a, kind: jwt, tokens: { audience: x }, keys: [ { hmac_env: S, alg: HS256 } ] }",
             .missingKey, "tokens.issuer"),
            ("{ name: a, kind: jwt, tokens: { issuer: a } }", .missingKey, "keys"),
            ("{ name: a, kind: jwt, tokens: { issuer: a }, keys: [] }", .missingKey, "key source"),
            ("{ name: a, kind: jwt, tokens: { issuer: a, verified_cache: { entries: 5 } }, keys: [ { hmac_env: S, alg: HS256 } ] }",
             .conflict, "verified_cache"),
            ("{ name: a, kind: jwt, token_kind: browser, tokens: { issuer: a }, keys: [ { hmac_env: S, alg: HS256 } ] }",
             .invalidValue, "api or session"),
            ("{ name: a, kind: jwt, token_kind_claim: sub, tokens: { issuer: a }, keys: [ { hmac_env: S, alg: HS256 } ] }",
             .conflict, "token_kind_claim"),
            ("{ name: a, kind: jwt, format: rails, tokens: { issuer: a }, keys: [ { hmac_env: S, alg: HS256 } ] }",
             .unknownKey, "expected one of: name, kind, default, tokens, keys"),
            ("{ name: a, kind: jwt, tokens: { issuer: a, algorithms: [RS256] }, keys: [ { hmac_env: S, alg: HS256 } ] }",
             .conflict, "HS256"),
            ("{ name: a, kind: jwt, tokens: { issuer: 'https://a.example' }, keys: [ { discovery: 'https://b.example' } ] }",
             .conflict, "discovery"),
            ("{ name: a, kind: oidc, tokens: { issuer: a }, keys: [ { hmac_env: S, alg: HS256 } ] }",
             .invalidValue, "session_cookie or jwt"),
            ("{ name: a, tokens: { issuer: a }, keys: [ { hmac_env: S, alg: HS256 } ] }", .missingKey, "kind"),
            ("{ name: tokens, kind: jwt, tokens: { issuer: a }, keys: [ { hmac_env: S, alg: HS256 } ] }",
             .conflict, "top-level"),
        ]
        for (item, code, fragment) in cases {
            let error = parseError(self.yaml(
                issuers: "  - \(item)", routes: "  - { path_prefix: /, upstream: app, accept: none }"))
            #expect(error?.code == code, "\(item): \(String(describing: error))")
            #expect(error?.message.contains(fragment) == true, "\(item): \(String(describing: error?.message))")
        }
    }

    @Test func everyProblemAcrossIssuersAndRoutesIsListed() throws {
        let yaml = self.yaml(
            tokens: "tokens: { issuer: page }",
            issuers: """
                  - { name: a, kind: jwt, default: true, tokens: { issuer: same }, keys: [ { hmac_env: A, alg: HS256 } ] }
                  - { name: b, kind: jwt, default: true, tokens: { issuer: same }, keys: [ { hmac_env: B, alg: HS256 } ] }
                  - { name: c, kind: jwt, tokens: { issuer: page }, keys: [ { hmac_env: C, alg: HS256 } ] }
                  - { name: shop, kind: session_cookie, format: flask, secret_env: S, fields: { user_id: /u, login_time: /t } }
                """,
            routes: """
                  - { path_prefix: /x/, upstream: app, accept: [api], issuers: [a, bb] }
                  - { path_prefix: /y/, upstream: app, accept: [api], issuers: [shop] }
                  - { path_prefix: /z/, upstream: app, accept: [api], issuers: [] }
                  - { path_prefix: /w/, upstream: app, accept: [api], issuers: [a, a] }
                  - { path_prefix: /v/, upstream: app, accept: none, issuers: [a] }
                  - { path_prefix: /, upstream: app, accept: none }
                """)
        let problems = try self.problems(yaml)
        let messages = problems.map(\.message)
        let expected: [(ConfigurationError.Code, String)] = [
            (.duplicate, "issuers a and b have the same tokens.issuer"),
            (.duplicate, "issuers a and b are both default"),
            (.duplicate, "the top-level tokens.issuer is the same"),
            (.unknownReference, "unknown issuer 'bb'"),
            (.conflict, "shop is a session_cookie issuer"),
            (.missingKey, "name at least one issuer"),
            (.duplicate, "a is listed twice"),
            (.conflict, "accept: none takes no token, so it has no issuers"),
        ]
        #expect(problems.count == expected.count, "\(messages)")
        for (code, fragment) in expected {
            let match = problems.first { $0.message.contains(fragment) }
            #expect(match?.code == code, "\(fragment): \(messages)")
        }
    }

    @Test func aDefaultIssuerNeedsTheTopLevelTokensToCarryIss() {
        let error = parseError(self.yaml(
            issuers: Self.idp, routes: "  - { path_prefix: /, upstream: app, accept: none }"))
        #expect(error?.code == .conflict)
        #expect(error?.message.contains("set the top-level tokens.issuer") == true, "\(String(describing: error))")
    }

    @Test func aConfigurationWithoutJWTIssuersIsUnchanged() throws {
        let configuration = try parse(minimalYAML)
        #expect(configuration.jwtIssuers.isEmpty)
        #expect(configuration.routes.allSatisfy { $0.issuers == nil })
    }
}

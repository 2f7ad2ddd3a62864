//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateConfig

/// The `issuers:` list and a route's `session_cookie:`, in a whole configuration.
@Suite struct RouteSessionCookieTests {
    static let issuers = """
        issuers:
          - { name: shop, kind: session_cookie, format: rails, version: "7.1", cookie: _shop_session, secret_env: SHOP_SECRET,
              fields: { user_id: /user_id, login_time: /login_at, api_only: /api_only } }
          - { name: api-site, kind: session_cookie, format: cookie_session, secret_file: k,
              fields: { user_id: /passport/user, login_time: /login_at } }
        """

    func configuration(routes: String, keys: String = "keys: [ { jwks: public.jwks } ]", issuers: String = Self.issuers)
        throws -> GatewayConfiguration
    {
        let yaml = """
            listen: [ { address: 127.0.0.1:8443, tls: { certificates: [ { cert: c.pem, key: k.pem } ] } } ]
            \(keys)
            cutoffs: { file: cutoffs.json }
            upstreams: { app: { targets: [ "http://127.0.0.1:9000" ] } }
            \(issuers)
            routes:
            \(routes)
            """
        return try GatewayConfiguration(yaml: yaml, sourcePath: "/etc/tokengate/tokengate.yaml", checkFiles: false)
    }

    func error(routes: String, keys: String = "keys: [ { jwks: public.jwks } ]", issuers: String = Self.issuers)
        -> ConfigurationError?
    {
        do {
            _ = try self.configuration(routes: routes, keys: keys, issuers: issuers)
            return nil
        } catch let error as ConfigurationError {
            return error
        } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test func aRouteReadsTheIssuersCookieAndNoJWTUnlessItListsSources() throws {
        let configuration = try self.configuration(
            routes: """
                  - { path_prefix: /account/, upstream: app, accept: [session], session_cookie: shop }
                  - { path_prefix: /api/, upstream: app, accept: [api], sources: [authorization],
                      session_cookie: { issuer: shop, sources: ["header:X-Shop-Session", "cookie:_shop_session"] } }
                """)
        #expect(configuration.sessionCookieIssuers.keys.sorted() == ["api-site", "shop"])
        #expect(configuration.sessionCookieIssuers["shop"]?.cookieName == "_shop_session")
        let account = configuration.routes[0]
        #expect(account.sources == [])
        #expect(account.sessionCookie == RouteSessionCookie(issuer: "shop", sources: [.cookie("_shop_session")]))
        #expect(account.allSources == [.cookie("_shop_session")])
        let api = configuration.routes[1]
        #expect(api.allSources == [.authorization, .header("X-Shop-Session"), .cookie("_shop_session")])
    }

    @Test func aCookieOnlyRouteNeedsNoKeys() throws {
        let configuration = try self.configuration(
            routes: "  - { path_prefix: /, upstream: app, accept: [session], session_cookie: shop }", keys: "")
        #expect(configuration.keys.isEmpty)
        // A JWT source still needs a key.
        let error = self.error(
            routes: "  - { path_prefix: /, upstream: app, accept: [session], sources: [authorization], session_cookie: shop }",
            keys: "")
        #expect(error?.code == .missingKey)
    }

    @Test func refusals() {
        let cases: [(String, ConfigurationError.Code, String)] = [
            ("session_cookie: nosuch", .unknownReference, "unknown issuer 'nosuch'"),
            ("session_cookie: shpo", .unknownReference, "did you mean 'shop'"),
            ("session_cookie: { issuer: shop, sources: [authorization] }", .invalidValue, "cookie:NAME or header:NAME"),
            ("session_cookie: { issuer: shop, sources: [\"form:t\"] }", .invalidValue, "cookie:NAME or header:NAME"),
            ("session_cookie: { issuer: api-site, sources: [\"header:X-S\"] }", .conflict, "signature cookie"),
            ("session_cookie: { issuer: shop, secret: x }", .unknownKey, "expected one of: issuer, sources"),
            (
                "sources: [\"cookie:_shop_session\"], session_cookie: shop", .duplicate,
                "both a JWT source and the session cookie's"
            ),
        ]
        for (extra, code, text) in cases {
            let error = self.error(routes: "  - { path_prefix: /, upstream: app, accept: [session], \(extra) }")
            #expect(error?.code == code, "\(extra): \(String(describing: error))")
            #expect(error?.message.contains(text) == true, "\(extra): \(String(describing: error))")
        }
        let none = self.error(routes: "  - { path_prefix: /, upstream: app, accept: none, session_cookie: shop }")
        #expect(none?.code == .conflict)
    }

    @Test func issuerNamesAreCheckedAndUnique() {
        let item = "kind: session_cookie, format: flask, secret_env: S, fields: { user_id: /u, login_time: /t }"
        let route = "  - { path_prefix: /, upstream: app, accept: none }"
        let duplicate = self.error(routes: route, issuers: "issuers: [ { name: a, \(item) }, { name: a, \(item) } ]")
        #expect(duplicate?.code == .duplicate)
        let badName = self.error(routes: route, issuers: "issuers: [ { name: \"a b\", \(item) } ]")
        #expect(badName?.code == .invalidValue)
        let noName = self.error(routes: route, issuers: "issuers: [ { \(item) } ]")
        #expect(noName?.code == .missingKey)
        let noKind = self.error(
            routes: route, issuers: "issuers: [ { name: a, format: flask, secret_env: S, fields: { user_id: /u, login_time: /t } } ]")
        #expect(noKind?.code == .missingKey)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateDemo
import TokengateGateway
import TokengateTestSupport
import TokengateTokens

/// The `forward_auth` listeners as the front proxies use them: checks in each proxy's documented request shape
/// sent straight to the check endpoint with the real `curl` (Traefik and Envoy, which Debian does not package),
/// and the real nginx (`auth_request`) and Caddy (`forward_auth`) in front of a gateway's check endpoint and a
/// backend, with `curl` as the client.
@Suite(.serialized)
struct ForwardAuthTests {
    /// Three check listeners: the X-Forwarded-* shape (Caddy, Traefik), nginx's, Envoy's with a path prefix, and one
    /// whose trusted peers exclude loopback. Ports: ``GatewayHarness/extraPorts`` in that order.
    static let listeners = """
          - address: 127.0.0.1:0
            forward_auth: { headers: forwarded, trusted_peers: [ 127.0.0.1/32 ] }
          - address: 127.0.0.1:0
            forward_auth: { headers: nginx, trusted_peers: [ 127.0.0.1/32, "::1/128" ] }
          - address: 127.0.0.1:0
            forward_auth: { headers: envoy, path_prefix: /authz, trusted_peers: [ 127.0.0.1/32 ] }
          - address: 127.0.0.1:0
            forward_auth: { headers: forwarded, trusted_peers: [ 10.0.0.0/8 ] }
        """

    func withGateway(_ body: (GatewayHarness) async throws -> Void) async throws {
        let harness = GatewayHarness()
        do {
            try await harness.start(listeners: Self.listeners)
            try await body(harness)
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    /// `curl` against a check listener over plain HTTP with `headers`.
    func check(_ port: Int, path: String = "/check", method: String = "GET", _ headers: [String]) throws -> Curl.Result {
        try Curl.run(["-X", method, "http://127.0.0.1:\(port)\(path)"] + headers.flatMap { ["-H", $0] }, caFile: nil)
    }

    /// Traefik's ForwardAuth request (its documentation: `X-Forwarded-Method`, `-Proto`, `-Host`, `-Uri`, `-For`,
    /// with the client's headers), and Caddy's `forward_auth`, which sends the same.
    func traefik(_ uri: String, method: String = "GET", host: String = "app.example", proto: String = "https", _ more: [String] = []) -> [String] {
        ["X-Forwarded-Method: \(method)", "X-Forwarded-Proto: \(proto)", "X-Forwarded-Host: \(host)", "X-Forwarded-Uri: \(uri)",
         "X-Forwarded-For: 203.0.113.9"] + more
    }

    func expiredToken(_ harness: GatewayHarness) throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return try harness.signer.mint(
            TokenClaims(subject: "alice", issuedAt: now - 600, apiOnly: true, expiresAt: now - 60, notBefore: nil, issuer: nil, audience: nil))
    }

    @Test func checksInTheForwardedShapeRunTheProxiedRequestsChecks() async throws {
        try await withGateway { gateway in
            let port = gateway.extraPorts[0]
            let token = try gateway.mint("alice")
            let allowed = try check(port, traefik("/api/items?page=2", ["Authorization: Bearer \(token)"]))
            #expect(allowed.status == 200)
            #expect(allowed.header("x-tokengate-user") == "alice")
            #expect(allowed.header("x-tokengate-token-kind") == "api")
            #expect(allowed.header("x-tokengate-key-id") == "test-only-hs")
            #expect(allowed.body.isEmpty)

            let none = try check(port, traefik("/api/items"))
            #expect(none.status == 401)
            #expect(none.header("www-authenticate") == "Bearer realm=\"test.example\"")
            #expect(none.header("x-tokengate-user") == nil)

            let forged = try check(port, traefik("/api/items", ["Authorization: Bearer \(token.dropLast(2))xx"]))
            #expect(forged.status == 401)
            #expect(forged.header("www-authenticate")?.contains("error=\"invalid_token\"") == true)

            let expired = try check(port, traefik("/api/items", ["Authorization: Bearer \(try expiredToken(gateway))"]))
            #expect(expired.status == 401)
            #expect(expired.body.contains("invalid_token"))

            let now = Int64(Date().timeIntervalSince1970)
            let bob = try gateway.mint("bob", issuedAt: now - 100)
            gateway.cutoffs.store(CutoffSnapshot(users: ["bob": UserCutoffs(revokedBefore: now - 50)]))
            let cut = try check(port, traefik("/api/items", ["Authorization: Bearer \(bob)"]))
            #expect(cut.status == 401)
            #expect(cut.header("x-tokengate-user") == nil)

            // The token in the original URL: refused as on a proxied request, and never logged.
            let inURL = try check(port, traefik("/api/items?access_token=\(token)"))
            #expect(inURL.status == 400)
            #expect(inURL.body.contains("token_in_url") || inURL.body.contains("URL"))

            // Kinds: a session token on an api route.
            let session = try gateway.mint("carol", apiOnly: false)
            let wrongKind = try check(port, traefik("/api/items", ["Authorization: Bearer \(session)"]))
            #expect(wrongKind.status == 403)
            #expect(wrongKind.header("www-authenticate")?.contains("insufficient_scope") == true)

            // The CSRF rule with the original method and host: a cookie on a POST needs proof of the same site.
            let cookie = "Cookie: session=\(session)"
            let crossSite = try check(port, traefik("/account/settings", method: "POST", [cookie]))
            #expect(crossSite.status == 403)
            #expect(crossSite.body.contains("cross-site"))
            let sameSite = try check(port, traefik("/account/settings", method: "POST", [cookie, "Origin: https://app.example"]))
            #expect(sameSite.status == 200)
            #expect(sameSite.header("x-tokengate-user") == "carol")
            let safeMethod = try check(port, traefik("/account/settings", [cookie]))
            #expect(safeMethod.status == 200)

            // A public route passes with no identity: a proxy that copies the fields clears the client's own.
            let publicRoute = try check(port, traefik("/index.html", ["X-Tokengate-User: mallory"]))
            #expect(publicRoute.status == 200)
            #expect(publicRoute.header("x-tokengate-user") == nil)

            // What the front proxy says must be whole and believable.
            #expect(try check(port, traefik("/api/items", proto: "http", ["Authorization: Bearer \(token)"])).status == 403)
            let twice = try check(port, traefik("/api/items", ["X-Forwarded-Uri: /index.html", "Authorization: Bearer \(token)"]))
            #expect(twice.status == 400)
            #expect(twice.header("x-tokengate-user") == nil)
            #expect(try check(port, ["X-Forwarded-Method: GET", "X-Forwarded-Proto: https", "X-Forwarded-Uri: /"]).status == 400)
            let dotted = try check(port, traefik("/public/../api/items"))
            #expect(dotted.status == 400)  // Refused as on a proxied request: a backend could read another route's path.
            #expect(dotted.header("x-tokengate-user") == nil)

            // A check body is never read: the check is answered as if there were none.
            let withBody = try Curl.run(
                ["-X", "POST", "--data-binary", "access_token=\(token)", "http://127.0.0.1:\(port)/check"]
                    + traefik("/api/items", method: "POST").flatMap { ["-H", $0] },
                caFile: nil)
            #expect(withBody.status == 401)

            // A peer that is not a trusted front proxy gets nothing checked.
            let untrusted = try check(gateway.extraPorts[3], traefik("/api/items", ["Authorization: Bearer \(token)"]))
            #expect(untrusted.status == 403)
            #expect(untrusted.body.contains("front proxies"))
            #expect(untrusted.header("x-tokengate-user") == nil)

            let lines = gateway.logLines.all.filter { $0.contains("mode=check") }
            #expect(lines.count >= 15)
            #expect(!gateway.logLines.all.contains { $0.contains(token) || $0.contains(session) })
            #expect(lines.contains { $0.contains("status=200") && $0.contains("user=alice") && $0.contains("path=/api/items") })
            #expect(lines.contains { $0.contains("reason=untrusted_peer") })
            let metrics = gateway.server.metrics.render()
            #expect(metrics.contains("tokengate_forward_auth_checks_total{route=\"/api/\",outcome=\"allowed\"}"))
            #expect(metrics.contains("tokengate_forward_auth_checks_total{route=\"/api/\",outcome=\"no_token\"}"))
            #expect(metrics.contains("tokengate_forward_auth_checks_total{route=\"-\",outcome=\"untrusted_peer\"}"))
            #expect(metrics.contains("tokengate_forward_auth_check_duration_seconds_count"))
            // Checks are not proxied requests.
            #expect(!metrics.contains("tokengate_requests_total"))
        }
    }

    /// The nginx shape by hand (what `deploy/forward-auth/nginx.conf` sets), and Envoy's `ext_authz` HTTP request:
    /// the original method and `path_prefix` + path, the original `Host`, and the allowed headers.
    @Test func checksInTheNginxAndEnvoyShapes() async throws {
        try await withGateway { gateway in
            let token = try gateway.mint("alice")
            let nginx = gateway.extraPorts[1]
            let shape = ["Host: app.example", "X-Original-Method: DELETE", "X-Original-URI: /api/items/7", "X-Forwarded-Proto: https"]
            let allowed = try check(nginx, path: "/_tokengate", shape + ["Authorization: Bearer \(token)"])
            #expect(allowed.status == 200)
            #expect(allowed.header("x-tokengate-user") == "alice")
            #expect(try check(nginx, path: "/_tokengate", shape).status == 401)
            // The client's X-Forwarded-Uri is not what this listener reads: it cannot pick the path checked.
            let picked = try check(nginx, path: "/_tokengate", shape + ["X-Forwarded-Uri: /index.html"])
            #expect(picked.status == 401)

            let envoy = gateway.extraPorts[2]
            let ext = ["Host: app.example", "X-Forwarded-Proto: https", "Authorization: Bearer \(token)"]
            let passed = try check(envoy, path: "/authz/api/items?x=1", method: "PUT", ext)
            #expect(passed.status == 200)
            #expect(passed.header("x-tokengate-user") == "alice")
            #expect(try check(envoy, path: "/authz/api/items", method: "PUT", ["Host: app.example", "X-Forwarded-Proto: https"]).status == 401)
            #expect(try check(envoy, path: "/api/items", ext).status == 400)
            #expect(try check(envoy, path: "/authzapi/items", ext).status == 400)
            let lines = gateway.logLines.all.filter { $0.contains("mode=check") && $0.contains("method=PUT") }
            #expect(lines.contains { $0.contains("path=/api/items") && $0.contains("status=200") })
        }
    }

    // MARK: The real front proxies.

    /// What the backend behind a front proxy saw: its echo's header list.
    func backendHeaders(_ result: Curl.Result) -> [(String, String)] {
        guard let data = result.body.data(using: .utf8),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let headers = json["headers"] as? [[String]]
        else { return [] }
        return headers.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
    }

    /// The scenarios every front proxy is put through; `through` runs `curl` against the proxy with extra
    /// arguments. `deniedStatus` is what the proxy makes of tokengate's `400` (nginx: 500).
    func runScenarios(_ gateway: GatewayHarness, deniedStatus: Int, through: ([String]) throws -> Curl.Result) throws {
        let token = try gateway.mint("alice")
        let spoof = ["-H", "X-Tokengate-User: mallory", "-H", "X-Tokengate-Token-Kind: session"]
        let passed = try through(["-H", "Authorization: Bearer \(token)"] + spoof + ["/api/items"])
        #expect(passed.status == 200, "\(passed.body) \(passed.stderr)")
        let seen = backendHeaders(passed)
        #expect(seen.filter { $0.0 == "x-tokengate-user" }.map(\.1) == ["alice"])
        #expect(seen.filter { $0.0 == "x-tokengate-token-kind" }.map(\.1) == ["api"])
        #expect(!seen.contains { $0.0 == "authorization" }, "the front proxy strips the token")
        #expect(!passed.body.contains(token))

        let none = try through(["/api/items"])
        #expect(none.status == 401)
        #expect(none.header("www-authenticate") == "Bearer realm=\"test.example\"")
        let forged = try through(["-H", "Authorization: Bearer \(token.dropLast(2))xx", "/api/items"])
        #expect(forged.status == 401)
        #expect(forged.header("www-authenticate")?.contains("error=\"invalid_token\"") == true)
        let expired = try through(["-H", "Authorization: Bearer \(try expiredToken(gateway))", "/api/items"])
        #expect(expired.status == 401)
        #expect(expired.header("www-authenticate")?.contains("expired") == true)
        let now = Int64(Date().timeIntervalSince1970)
        let bob = try gateway.mint("bob", issuedAt: now - 100)
        gateway.cutoffs.store(CutoffSnapshot(users: ["bob": UserCutoffs(revokedBefore: now - 50)]))
        let cut = try through(["-H", "Authorization: Bearer \(bob)", "/api/items"])
        #expect(cut.status == 401)
        #expect(cut.header("www-authenticate")?.contains("invalid_token") == true)

        // The token in the URL never reaches the backend.
        let inURL = try through(["/api/items?access_token=\(token)"])
        #expect(inURL.status == deniedStatus)
        #expect(!inURL.body.contains("\"path\""))

        // A public route: passed, and the client's identity fields still do not reach the backend.
        let open = try through(spoof + ["/index.html"])
        #expect(open.status == 200)
        #expect(!backendHeaders(open).contains { $0.1 == "mallory" || $0.1 == "session" })
        #expect(backendHeaders(open).contains { $0.0 == "host" })

        // The checks were logged as checks, with the original path, and no token anywhere.
        let lines = gateway.logLines.all.filter { $0.contains("mode=check") }
        #expect(lines.contains { $0.contains("path=/api/items") && $0.contains("user=alice") && $0.contains("status=200") })
        #expect(!gateway.logLines.all.contains { $0.contains(token) })
    }

    @Test func nginxAuthRequestInFront() async throws {
        try await withGateway { gateway in
            let proxy = try FrontProxy.nginx(directory: gateway.directory, checkPort: gateway.extraPorts[1], backendPort: gateway.backend.port)
            defer { proxy.stop() }
            try runScenarios(gateway, deniedStatus: 500) { arguments in
                var arguments = arguments
                let path = arguments.removeLast()
                return try Curl.run(arguments + ["https://localhost:\(proxy.port)\(path)"], caFile: gateway.certificatePath)
            }
        }
    }

    @Test func caddyForwardAuthInFront() async throws {
        try await withGateway { gateway in
            let proxy = try FrontProxy.caddy(directory: gateway.directory, checkPort: gateway.extraPorts[0], backendPort: gateway.backend.port)
            defer { proxy.stop() }
            try runScenarios(gateway, deniedStatus: 400) { arguments in
                var arguments = arguments
                let path = arguments.removeLast()
                return try Curl.run(arguments + ["https://localhost:\(proxy.port)\(path)"], caFile: gateway.certificatePath)
            }
        }
    }
}

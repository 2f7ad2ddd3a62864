//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateDemo
import TokengateGateway
import TokengateTestSupport

/// The traffic policy through real sockets: PROXY protocol headers from Python and curl, `X-Forwarded-For`
/// behind a trusted proxy, IP rules, CORS preflights and responses, rate limits — over HTTP/1.1 and HTTP/2.
@Suite(.serialized) struct TrafficPolicyIntegrationTests {
    /// Opens a connection, sends a PROXY header naming `source` (v1 text or v2 binary), then TLS and one
    /// HTTP/1.1 request; prints the status code and the body. `v1-plain` sends the request in the clear after
    /// a v1 header, as a misconfigured health check behind the balancer would.
    static let proxyClient = #"""
        import socket, ssl, struct, sys
        port, ca, version, source, path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        if version == "v1":
            raw.sendall(f"PROXY TCP4 {source} 127.0.0.1 40000 {port}\r\n".encode())
        elif version == "v2":
            block = socket.inet_aton(source) + socket.inet_aton("127.0.0.1") + struct.pack("!HH", 40000, port)
            tlv = b"\x05\x00\x03abc"
            raw.sendall(b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11]) + struct.pack("!H", len(block + tlv)) + block + tlv)
        elif version == "garbage":
            raw.sendall(b"PROXY TCP4 not-an-address\r\n")
        elif version == "v1-plain":
            raw.sendall(f"PROXY TCP4 {source} 127.0.0.1 40000 {port}\r\n".encode())
            raw.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while True:
                chunk = raw.recv(65536)
                if not chunk:
                    break
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            print(head.split(b" ")[1].decode() if head else "closed")
            print(body.decode())
            sys.exit(0)
        context = ssl.create_default_context(cafile=ca)
        try:
            tls = context.wrap_socket(raw, server_hostname="localhost")
            tls.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while True:
                chunk = tls.recv(65536)
                if not chunk:
                    break
                data += chunk
        except (ssl.SSLError, ConnectionError, OSError) as error:
            print("closed", type(error).__name__)
            sys.exit(0)
        head, _, body = data.partition(b"\r\n\r\n")
        print(head.split(b" ")[1].decode())
        print(body.decode())
        """#

    private func proxied(_ gateway: GatewayHarness, _ version: String, _ source: String, _ path: String) throws -> (String, String) {
        let result = try ChildProcess.run(
            "/usr/bin/python3", ["-c", Self.proxyClient, String(gateway.tlsPort), gateway.certificatePath, version, source, path])
        let lines = result.stdout.split(separator: "\n", maxSplits: 1).map(String.init)
        return (lines.first ?? "", lines.count > 1 ? lines[1] : "")
    }

    private func forwardedFor(_ body: String) -> [String] {
        guard let echo = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else { return [] }
        return ((echo["headers"] as? [[String]]) ?? []).filter { $0[0] == "x-forwarded-for" }.map { $0[1] }
    }

    private func withGateway(
        routes: String = GatewayHarness.defaultRoutes,
        top: String = "",
        listener: String = "",
        _ body: (GatewayHarness) async throws -> Void
    ) async throws {
        let gateway = GatewayHarness()
        do {
            try await gateway.start(routes: routes, limits: top, listener: listener)
            try await body(gateway)
        } catch {
            await gateway.stop()
            throw error
        }
        await gateway.stop()
    }

    private func curl(_ gateway: GatewayHarness, _ arguments: [String]) throws -> Curl.Result {
        try Curl.run(arguments, caFile: gateway.certificatePath)
    }

    // MARK: The client address.

    @Test func aListedBalancersProxyHeaderGivesTheClientAddress() async throws {
        try await self.withGateway(listener: "proxy_protocol: { from: [ 127.0.0.1 ] }\n    ip_rules: { deny: [ 192.0.2.0/24 ] }") { gateway in
            for version in ["v1", "v2"] {
                let (status, body) = try self.proxied(gateway, version, "198.51.100.23", "/about")
                #expect(status == "200", "\(version): \(body)")
                #expect(self.forwardedFor(body) == ["198.51.100.23"], "\(version): \(body)")
                let (denied, deniedBody) = try self.proxied(gateway, version, "192.0.2.7", "/about")
                #expect(denied == "403", "\(version): the listener's rule is judged on the PROXY address")
                #expect(deniedBody.contains("\"error\":\"forbidden\""), "\(deniedBody)")
            }
            let (garbage, _) = try self.proxied(gateway, "garbage", "-", "/about")
            #expect(garbage.hasPrefix("closed"), "a broken header closes the connection")
            let (missing, _) = try self.proxied(gateway, "none", "-", "/about")
            #expect(missing.hasPrefix("closed"), "a listed balancer must send the header")
            // curl's v1 header (its own address) over both protocols.
            for version in ["--http1.1", "--http2"] {
                let result = try self.curl(gateway, [version, "--haproxy-protocol", "\(gateway.baseURL)/about"])
                #expect(result.status == 200, "\(version): \(result.stderr)")
                #expect(self.forwardedFor(result.body) == ["127.0.0.1"], "\(version): \(result.body)")
            }
            let lines = gateway.logLines.all.filter { $0.contains("request") && $0.contains("client=198.51.100.23") }
            #expect(lines.count == 2, "the access log has the PROXY address: \(gateway.logLines.all.suffix(6))")
            // Plain HTTP after the header: the TLS port's readable 400, logged with the header's address too.
            let (plain, plainBody) = try self.proxied(gateway, "v1-plain", "198.51.100.24", "/about")
            #expect(plain == "400", "\(plainBody)")
            #expect(plainBody.contains("\"error\":\"tls_required\""), "\(plainBody)")
            let plainLines = gateway.logLines.all.filter { $0.contains("plain_http_on_tls_port") }
            #expect(plainLines.count == 1 && plainLines[0].contains("client=198.51.100.24"), "\(plainLines)")
        }
    }

    @Test func aPeerOutsideTheListIsNeverReadAsABalancer() async throws {
        try await self.withGateway(listener: "proxy_protocol: { from: [ 10.0.0.0/8 ] }") { gateway in
            let (status, _) = try self.proxied(gateway, "v1", "198.51.100.23", "/about")
            #expect(status.hasPrefix("closed") || status == "400", "a header from an unlisted peer is not believed: \(status)")
            let direct = try self.curl(gateway, ["\(gateway.baseURL)/about"])
            #expect(direct.status == 200)
            #expect(self.forwardedFor(direct.body) == ["127.0.0.1"])
        }
    }

    @Test func behindATrustedProxyTheRightmostUntrustedEntryIsTheClient() async throws {
        let routes = """
              - { path_prefix: /closed/, upstream: api, accept: none, ip_rules: { deny: [ 198.51.100.0/24 ] } }
              - { path_prefix: /, upstream: api, accept: none }
            """
        try await self.withGateway(routes: routes, top: "trusted_proxies: [ 127.0.0.1 ]") { gateway in
            for version in ["--http1.1", "--http2"] {
                let result = try self.curl(gateway, [version, "-H", "X-Forwarded-For: 6.6.6.6, 198.51.100.9", "\(gateway.baseURL)/about"])
                #expect(result.status == 200)
                #expect(self.forwardedFor(result.body) == ["198.51.100.9, 127.0.0.1"], "\(version): \(result.body)")
                let closed = try self.curl(gateway, [version, "-H", "X-Forwarded-For: 198.51.100.9", "\(gateway.baseURL)/closed/x"])
                #expect(closed.status == 403, "\(version): the route's rule is judged on the forwarded address")
                #expect(closed.header("content-type") == "application/json")
                let spoofed = try self.curl(gateway, [version, "-H", "X-Forwarded-For: 198.51.100.9, 203.0.113.1", "\(gateway.baseURL)/closed/x"])
                #expect(spoofed.status == 200, "\(version): only the rightmost untrusted entry counts")
            }
            // The access log's `client` is the same address: never the proxy's, never an entry left of it.
            let requests = gateway.logLines.all.filter { $0.contains("request_id=") }
            #expect(requests.filter { $0.contains("client=198.51.100.9") }.count == 4, "\(requests)")
            #expect(requests.filter { $0.contains("client=203.0.113.1") }.count == 2, "\(requests)")
            #expect(!requests.contains { $0.contains("client=127.0.0.1") || $0.contains("client=6.6.6.6") }, "\(requests)")
        }
    }

    // MARK: CORS.

    static let corsRoutes = """
          - path_prefix: /api/
            upstream: api
            accept: [api]
            sources: [authorization, "cookie:auth_token"]
            cors: { origins: [ "https://app.example" ], methods: [ GET, PUT ], headers: [ authorization ], expose_headers: [ x-request-id ], credentials: true, max_age: 10m }
          - { path_prefix: /other/, upstream: api, accept: [api], sources: ["cookie:auth_token"] }
          - { path_prefix: /, upstream: api, accept: none }
        """

    @Test func aPreflightIsAnsweredWithoutAToken() async throws {
        try await self.withGateway(routes: Self.corsRoutes) { gateway in
            for version in ["--http1.1", "--http2"] {
                let preflight = try self.curl(gateway, [
                    version, "-X", "OPTIONS", "-H", "Origin: https://app.example", "-H", "Access-Control-Request-Method: PUT",
                    "-H", "Access-Control-Request-Headers: authorization", "\(gateway.baseURL)/api/items",
                ])
                #expect(preflight.status == 204, "\(version): \(preflight.body)")
                #expect(preflight.header("access-control-allow-origin") == "https://app.example")
                #expect(preflight.header("access-control-allow-methods") == "GET, PUT")
                #expect(preflight.header("access-control-allow-headers") == "authorization")
                #expect(preflight.header("access-control-allow-credentials") == "true")
                #expect(preflight.header("access-control-max-age") == "600")
                #expect(preflight.header("content-length") == nil && preflight.body.isEmpty)
                let unknown = try self.curl(gateway, [
                    version, "-X", "OPTIONS", "-H", "Origin: https://evil.example", "-H", "Access-Control-Request-Method: PUT",
                    "\(gateway.baseURL)/api/items",
                ])
                #expect(unknown.status == 403, "\(version)")
                #expect(!unknown.headers.contains { $0.0.lowercased().hasPrefix("access-control-") }, "\(unknown.headers)")
            }
            #expect(gateway.backend.requestsReceived == 0, "no preflight reached the backend")
        }
    }

    @Test func actualResponsesCarryTheHeadersForAllowedOriginsOnly() async throws {
        try await self.withGateway(routes: Self.corsRoutes) { gateway in
            let token = try gateway.mint("alice")
            for version in ["--http1.1", "--http2"] {
                let allowed = try self.curl(gateway, [
                    version, "-H", "Origin: https://app.example", "-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/api/items",
                ])
                #expect(allowed.status == 200)
                #expect(allowed.header("access-control-allow-origin") == "https://app.example", "\(version): \(allowed.headers)")
                #expect(allowed.header("access-control-expose-headers") == "x-request-id")
                #expect(allowed.headers.filter { $0.0.lowercased() == "access-control-allow-origin" }.count == 1)
                let refused = try self.curl(gateway, [version, "-H", "Origin: https://app.example", "\(gateway.baseURL)/api/items"])
                #expect(refused.status == 401)
                #expect(refused.header("access-control-allow-origin") == "https://app.example", "a page may read the 401")
                let unknown = try self.curl(gateway, [
                    version, "-H", "Origin: https://evil.example", "-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/api/items",
                ])
                #expect(unknown.status == 200)
                #expect(unknown.header("access-control-allow-origin") == nil && unknown.header("vary") == "origin")
            }
        }
    }

    @Test func anOriginAllowedWithCredentialsPassesTheCrossSiteCookieRule() async throws {
        try await self.withGateway(routes: Self.corsRoutes) { gateway in
            let token = try gateway.mint("alice")
            func post(_ path: String, origin: String) throws -> Curl.Result {
                try self.curl(gateway, [
                    "-X", "PUT", "-H", "Origin: \(origin)", "-H", "Sec-Fetch-Site: cross-site", "-H", "Cookie: auth_token=\(token)",
                    "\(gateway.baseURL)\(path)",
                ])
            }
            #expect(try post("/api/items", origin: "https://app.example").status == 200)
            let other = try post("/api/items", origin: "https://evil.example")
            #expect(other.status == 403 && other.body.contains("cross-site"), "\(other.body)")
            let otherRoute = try post("/other/items", origin: "https://app.example")
            #expect(otherRoute.status == 403, "the exception is the route's alone")
        }
    }

    // MARK: Rate limits.

    @Test func aRouteLimitAnswers429WithRetryAfter() async throws {
        let routes = """
              - { path_prefix: /h1/, upstream: api, accept: none, rate_limits: [ { key: client, rate: 1/m, burst: 2 } ] }
              - { path_prefix: /h2/, upstream: api, accept: none, rate_limits: [ { key: route, rate: 1/m, burst: 2 } ] }
              - { path_prefix: /user/, upstream: api, accept: [api], rate_limits: [ { key: user, rate: 1/h, burst: 1 } ] }
              - { path_prefix: /, upstream: api, accept: none }
            """
        try await self.withGateway(routes: routes) { gateway in
            for (version, path) in [("--http1.1", "/h1/x"), ("--http2", "/h2/x")] {
                let statuses = try (0..<3).map { _ in try self.curl(gateway, [version, "\(gateway.baseURL)\(path)"]) }
                #expect(statuses.map(\.status) == [200, 200, 429], "\(version)")
                let limited = statuses[2]
                #expect(limited.header("retry-after").flatMap(Int.init).map { (55...60).contains($0) } == true, "\(limited.headers)")
                #expect(limited.body.contains("\"error\":\"rate_limited\""), "\(limited.body)")
            }
            #expect(try self.curl(gateway, ["\(gateway.baseURL)/about"]).status == 200, "other routes are not limited")
            let alice = try gateway.mint("alice")
            let bob = try gateway.mint("bob")
            func get(_ token: String) throws -> Int {
                try self.curl(gateway, ["-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/user/x"]).status
            }
            #expect(try [get(alice), get(alice), get(bob)] == [200, 429, 200], "per verified user")
            let metrics = gateway.server.metrics.render()
            #expect(metrics.contains("reason=\"rate_limit_client\""), "counted as a rejection by reason")
        }
    }

    @Test func theTokenPageIsGuardedPerClient() async throws {
        let gateway = GatewayHarness()
        let routes = """
              - path_prefix: /token
                kind: token_page
                login: { session_cookie: session, login_url: /login }
                apps: [ { name: ios, callback: "x-demo://token", confirm: false } ]
              - { path_prefix: /, upstream: api, accept: none }
            """
        do {
            try await gateway.start(
                routes: routes, limits: "rate_limits: { token_page: { rate: 1/h, burst: 3 } }",
                keys: "keys: [ { jwks: public.jwks } ]\nsigning_key: { jwks: private.jwks }")
            let statuses = try (0..<4).map { index in
                try self.curl(gateway, [index % 2 == 0 ? "--http1.1" : "--http2", "\(gateway.baseURL)/token?app=ios"]).status
            }
            #expect(statuses[0] != 429 && statuses[1] != 429 && statuses[2] != 429, "\(statuses)")
            #expect(statuses[3] == 429, "the fourth page request in the burst: \(statuses)")
            #expect(try self.curl(gateway, ["\(gateway.baseURL)/about"]).status == 200, "other routes are not guarded")
        } catch {
            await gateway.stop()
            throw error
        }
        await gateway.stop()
    }

    @Test func failedTokenChecksAreLimitedPerClient() async throws {
        try await self.withGateway(top: "rate_limits: { failed_tokens: { rate: 1/h, burst: 2 } }") { gateway in
            let good = try gateway.mint("alice")
            func get(_ token: String) throws -> Int {
                try self.curl(gateway, ["-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/api/x"]).status
            }
            #expect(try get(good) == 200)
            #expect(try get("eyJhbGciOiJIUzI1NiJ9.e30.bad") == 401)
            #expect(try get("eyJhbGciOiJIUzI1NiJ9.e30.bad") == 401)
            #expect(try get(good) == 429, "no more token checks for this client for now")
            #expect(try self.curl(gateway, ["\(gateway.baseURL)/about"]).status == 200, "a public route is not guarded")
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateDemo
@testable import TokengateGateway

/// The request target, `Host`, declared body sizes and abandoned requests, met the way an attacker sends
/// them: real TLS on loopback, `curl --path-as-is` and raw bytes through `openssl s_client`.
extension GatewayIntegrationTests {
    private func echoedPath(_ body: String) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["path"] as? String
    }

    /// `/%61pi/a` is `/api/a` to every backend that decodes percent-escapes: it must meet the `/api/` route's
    /// token check, not the public `/` route.
    @Test func encodedUnreservedCharactersAreDecodedBeforeRouting() async throws {
        try await self.withGateway { gateway in
            let token = try gateway.mint("alice")
            for path in ["/%61pi/a", "/%61%70%69/a", "/a%50i/a"] {
                let anonymous = try self.curl(gateway, ["--path-as-is", "\(gateway.baseURL)\(path)"])
                #expect(anonymous.status == (path == "/a%50i/a" ? 200 : 401), "\(path): \(anonymous.status) \(anonymous.body)")
            }
            let authorized = try self.curl(gateway, ["--path-as-is", "-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/%61pi/a?q=%61"])
            #expect(authorized.status == 200)
            #expect(self.echoedPath(authorized.body) == "/api/a", "the backend must see the path that was routed: \(authorized.body)")
            let session = try self.curl(gateway, ["--path-as-is", "\(gateway.baseURL)/%61ccount/x"])
            #expect(session.status == 401, "\(session.body)")
            let dotted = try self.curl(gateway, ["--path-as-is", "\(gateway.baseURL)/open/a%2Eb%7e"])
            #expect(dotted.status == 200)
            #expect(self.echoedPath(dotted.body) == "/open/a.b~", "\(dotted.body)")
            // Over HTTP/2 the same.
            let h2 = try self.curl(gateway, ["--http2", "--path-as-is", "\(gateway.baseURL)/%61pi/a"])
            #expect(h2.status == 401, "\(h2.body)")
        }
    }

    /// A prefix may hold `@`, `:` and the sub-delims, which clients encode (`encodeURIComponent` turns `@` into
    /// `%40`) and backends decode: `/v1/users/%40me/x` is `/v1/users/@me/x` to the backend, so it must meet that
    /// route's token check. Before, only unreserved escapes were decoded, and it went through the public `/`
    /// route without a token.
    @Test func encodedReservedPathCharactersAreDecodedBeforeRouting() async throws {
        let routes = """
              - { path_prefix: "/v1/users/@me/", upstream: api, accept: [api], sources: [authorization] }
              - { path_prefix: "/v1/jobs:run", upstream: api, accept: [api], sources: [authorization] }
              - { path_prefix: "/v1/a!$&'()*+,=", upstream: api, accept: [api], sources: [authorization] }
              - { path_prefix: /, upstream: api, accept: none }
            """
        try await self.withGateway(routes: routes) { gateway in
            for path in ["/v1/users/%40me/settings", "/v1/jobs%3Arun", "/v1/jobs%3arun", "/v1/a%21%24%26%27%28%29%2A%2B%2C%3D/x"] {
                let anonymous = try self.curl(gateway, ["--path-as-is", "\(gateway.baseURL)\(path)"])
                #expect(anonymous.status == 401, "\(path): \(anonymous.status) \(anonymous.body)")
                let h2 = try self.curl(gateway, ["--http2", "--path-as-is", "\(gateway.baseURL)\(path)"])
                #expect(h2.status == 401, "HTTP/2 \(path): \(h2.status) \(h2.body)")
            }
            let token = try gateway.mint("alice")
            let authorized = try self.curl(
                gateway, ["--path-as-is", "-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/v1/users/%40me/settings?q=%40"]
            )
            #expect(authorized.status == 200)
            #expect(self.echoedPath(authorized.body) == "/v1/users/@me/settings", "the backend sees the routed path: \(authorized.body)")
            // What a prefix cannot hold stays encoded and is forwarded as sent: `;`, `%`, `?`, `#`, `{`, a space.
            let kept = try self.curl(gateway, ["--path-as-is", "\(gateway.baseURL)/open/%3B%25%3F%23%7B%20"])
            #expect(kept.status == 200)
            #expect(self.echoedPath(kept.body) == "/open/%3B%25%3F%23%7B%20", "\(kept.body)")
        }
    }

    /// Windows and IIS trim dots and spaces that end a segment: `/api./items` is `/api/items` to them, and
    /// must not reach it through the public route.
    @Test func segmentsEndingInDotsOrSpacesCannotReachAnotherRoute() async throws {
        try await self.withGateway { gateway in
            for path in ["/api./items", "/api%20/items", "/api.%20/items", "/api%2E/items", "/api%09/items"] {
                for version in ["--http1.1", "--http2"] {
                    let result = try self.curl(gateway, [version, "--path-as-is", "\(gateway.baseURL)\(path)"])
                    #expect(result.status == 400, "\(version) \(path): \(result.status) \(result.body)")
                    #expect(result.body.contains("segment ending in dots or spaces"), "\(result.body)")
                }
            }
            let refusals = gateway.logLines.all.filter { $0.contains("reason=ambiguous_path") }
            #expect(refusals.count == 10, "\(refusals)")
            #expect(refusals.allSatisfy { $0.contains("route=/api/") }, "counted under the route aimed at: \(refusals)")
            // Where trimming changes nothing about the route, the path goes through as sent.
            let open = try self.curl(gateway, ["--path-as-is", "\(gateway.baseURL)/wiki/U.S."])
            #expect(open.status == 200)
            #expect(self.echoedPath(open.body) == "/wiki/U.S.", "\(open.body)")
            let token = try gateway.mint("alice")
            let api = try self.curl(gateway, ["--path-as-is", "-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/api/items."])
            #expect(api.status == 200, "\(api.body)")
        }
    }

    @Test func pathParametersFragmentsAndBrokenEscapesAreRefused() async throws {
        try await self.withGateway { gateway in
            let refused = [
                "/open;x", "/api;x/a", "/open/..;/api/a", "/open/.;/a", "/%zz", "/open%", "/open%2", "/%2e%2e/api/a",
                "/open/%2e/a", "/open/%2F", "/open//a",
            ]
            for path in refused {
                let result = try self.curl(gateway, ["--path-as-is", "\(gateway.baseURL)\(path)"])
                #expect(result.status == 400, "\(path): \(result.status) \(result.body)")
                #expect(result.body.contains("the request target"), "\(path): the answer says what is wrong: \(result.body)")
            }
            let h2 = try self.curl(gateway, ["--http2", "--path-as-is", "\(gateway.baseURL)/open/..;/api/a"])
            #expect(h2.status == 400)
            // curl drops a fragment before sending; a raw request keeps it.
            let fragment = try OpenSSLClient.exchange(
                port: gateway.tlsPort,
                send: "GET /open#/../api/a HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            )
            #expect(fragment.hasPrefix("HTTP/1.1 400"), "\(fragment.prefix(300))")
            #expect(fragment.contains("fragment"))
            let connect = try OpenSSLClient.exchange(port: gateway.tlsPort, send: "CONNECT localhost:443 HTTP/1.1\r\nHost: localhost:443\r\nConnection: close\r\n\r\n")
            #expect(connect.hasPrefix("HTTP/1.1 405"), "\(connect.prefix(200))")
            let asterisk = try OpenSSLClient.exchange(port: gateway.tlsPort, send: "OPTIONS * HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            #expect(asterisk.hasPrefix("HTTP/1.1 400") && asterisk.contains("absolute path"), "\(asterisk.prefix(300))")
            #expect(gateway.backend.requestsReceived == 0, "nothing refused may reach the backend")
        }
    }

    /// The token belongs in a header, a cookie or a body: in the path it is refused on token routes, and it
    /// never reaches the access log on any route.
    @Test func aTokenInThePathIsRefusedOnTokenRoutesAndNeverLogged() async throws {
        try await self.withGateway { gateway in
            let token = try gateway.mint("alice")
            let inPath = try self.curl(gateway, ["-H", "Authorization: Bearer \(token)", "\(gateway.baseURL)/api/items/\(token)"])
            #expect(inPath.status == 400)
            #expect(inPath.body.contains("URL"), "\(inPath.body)")
            let hiddenInQuery = try self.curl(gateway, ["\(gateway.baseURL)/api/items?x=1;access_token=\(token)"])
            #expect(hiddenInQuery.status == 400, "\(hiddenInQuery.body)")
            let publicLink = try self.curl(gateway, ["\(gateway.baseURL)/open/verify/\(token)"])
            #expect(publicLink.status == 200, "a public route may carry a token-shaped link")
            // Refused paths are logged as sent: an encoded token in one must not slip through.
            let encoded = "%65" + token.dropFirst()
            for path in ["/open;\(encoded)", "/open/x//\(encoded)", "/api/items?\(token)"] {
                let refused = try self.curl(gateway, ["--path-as-is", "\(gateway.baseURL)\(path)"])
                #expect(refused.status == 400, "\(path.prefix(20)): \(refused.status)")
            }
            let viaH2 = try self.curl(gateway, ["--http2", "--path-as-is", "\(gateway.baseURL)/open;\(encoded)"])
            #expect(viaH2.status == 400)
            let idLikeAToken = try self.curl(gateway, ["-H", "X-Request-Id: \(token)", "\(gateway.baseURL)/open/id"])
            #expect(idLikeAToken.status == 200 && !idLikeAToken.body.contains(token), "a token-shaped request id is replaced")
            let ownID = try self.curl(gateway, ["-H", "X-Request-Id: trace-42", "\(gateway.baseURL)/open/id"])
            #expect(ownID.body.contains("trace-42"), "a plain request id is kept: \(ownID.body)")
            let requestLines = gateway.logLines.all.filter { $0.contains(" request ") || $0.hasPrefix("info request") }
            #expect(requestLines.count >= 3, "\(requestLines)")
            let signature = String(token.split(separator: ".")[2])
            #expect(!gateway.logLines.all.contains { $0.contains(signature) }, "a token reached the log")
            #expect(requestLines.contains { $0.contains("path=/open/verify/[token]") }, "\(requestLines)")
            #expect(requestLines.contains { $0.contains("path=/api/items/[token]") }, "\(requestLines)")
            #expect(requestLines.filter { $0.contains("path=\(AccessLogPath.withheld)") }.count >= 3, "\(requestLines)")
        }
    }

    /// RFC 9112 §3.2.2: the absolute form is accepted when its authority is the request's `Host`, and then
    /// meets every check an origin-form path meets.
    @Test func theAbsoluteFormIsTakenWhenItsAuthorityIsTheHost() async throws {
        try await self.withGateway { gateway in
            func send(_ target: String, host: String = "localhost") throws -> String {
                try OpenSSLClient.exchange(port: gateway.tlsPort, send: "GET \(target) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
            }
            let plain = try send("https://localhost/open/a?x=1")
            #expect(plain.hasPrefix("HTTP/1.1 200"), "\(plain.prefix(200))")
            #expect(plain.contains("\"path\":\"/open/a\""), "\(plain)")
            let bare = try send("HTTPS://LocalHost:443", host: "localhost:443")
            #expect(bare.hasPrefix("HTTP/1.1 200") && bare.contains("\"path\":\"/\""), "\(bare.prefix(400))")
            #expect(try send("https://localhost/%61pi/a").hasPrefix("HTTP/1.1 401"), "the decoded path meets the /api/ route")
            #expect(try send("https://localhost/open/..;/api/a").hasPrefix("HTTP/1.1 400"))
            let other = try send("https://evil.example/open")
            #expect(other.hasPrefix("HTTP/1.1 400") && other.contains("differs from the Host field"), "\(other.prefix(300))")
            #expect(gateway.backend.requestsReceived == 2)
        }
    }

    @Test func anInvalidHostIsRefused() async throws {
        try await self.withGateway { gateway in
            for host in ["a@localhost", "local host", "localhost/evil", "localhost:99999", "localhost:8x", "a\"b<c>", ":443", "[::1"] {
                let output = try OpenSSLClient.exchange(
                    port: gateway.tlsPort,
                    send: "GET /open HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n"
                )
                #expect(output.hasPrefix("HTTP/1.1 400"), "\(host): \(output.prefix(200))")
            }
            #expect(gateway.backend.requestsReceived == 0)
            for host in ["localhost", "localhost:443", "127.0.0.1:8443", "[::1]:443", "api.example.com"] {
                let output = try OpenSSLClient.exchange(
                    port: gateway.tlsPort,
                    send: "GET /open HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n"
                )
                #expect(output.hasPrefix("HTTP/1.1 200"), "\(host): \(output.prefix(200))")
            }
            let h2 = try self.curl(gateway, ["--http2", "-H", "Host: a@localhost", "\(gateway.baseURL)/open"])
            #expect(h2.status == 400, "\(h2.body)")
        }
    }

    /// A `Content-Length` over the body limit is answered `413` at once: no `100 Continue`, nothing forwarded.
    @Test func aDeclaredBodyOverTheLimitIsRefusedBeforeTheBackend() async throws {
        try await self.withGateway(limits: "limits: { max_body_bytes: 1KiB }") { gateway in
            let token = try gateway.mint("alice")
            for (path, auth) in [("/open", ""), ("/api/x", "Authorization: Bearer \(token)\r\n")] {
                let output = try OpenSSLClient.exchange(
                    port: gateway.tlsPort,
                    send: "POST \(path) HTTP/1.1\r\nHost: localhost\r\n\(auth)Content-Length: 200000\r\nExpect: 100-continue\r\n\r\n"
                )
                #expect(output.hasPrefix("HTTP/1.1 413"), "\(path): \(output.prefix(200))")
                #expect(!output.contains("100 Continue"), "\(path)")
            }
            #expect(gateway.backend.requestsReceived == 0, "a refused body reached the backend")
        }
    }

    /// `http://host:<TLS port>/`: a readable `400` in plain HTTP, not a TLS alert; TLS clients are unaffected.
    @Test func plainHTTPOnTheTLSPortGetsAReadableAnswer() async throws {
        try await self.withGateway { gateway in
            let plain = try Curl.run(["http://127.0.0.1:\(gateway.tlsPort)/open"], caFile: nil)
            #expect(plain.status == 400, "\(plain.status) \(plain.stderr)")
            #expect(plain.body.contains("tls_required") && plain.body.contains("HTTPS"), "\(plain.body)")
            let tls = try self.curl(gateway, ["\(gateway.baseURL)/open"])
            #expect(tls.status == 200)
            #expect(gateway.backend.requestsReceived == 1)
            #expect(gateway.logLines.all.contains { $0.contains(" request ") && $0.contains("reason=plain_http_on_tls_port") })
        }
    }

    /// A forwarded request the client abandons still gets its access line.
    @Test func aRequestTheClientAbandonsIsLogged() async throws {
        try await self.withGateway { gateway in
            _ = try OpenSSLClient.sh(
                "(printf 'POST /open/abandoned HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Length: 50\\r\\n\\r\\nabc'; sleep 1) | "
                    + "timeout 5 openssl s_client -connect 127.0.0.1:\(gateway.tlsPort) -quiet -no_ign_eof -servername localhost >/dev/null 2>&1"
            )
            var line: String?
            for _ in 0..<50 where line == nil {
                line = gateway.logLines.all.first { $0.contains("path=/open/abandoned") }
                if line == nil { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(gateway.backend.requestsReceived == 1, "the request was forwarded before the client left")
            let logged = try #require(line, "no access line for the abandoned request")
            #expect(logged.contains("reason=client_closed") && logged.contains("status=499"), "\(logged)")
        }
    }
}

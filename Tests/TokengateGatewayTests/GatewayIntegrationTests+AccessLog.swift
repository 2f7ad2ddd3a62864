//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateDemo

@testable import TokengateGateway

/// The access log as incident response reads it, through real sockets and curl: who sent a request, to which
/// host, what it asked and got, how long the backend took and which one answered; and the plain-HTTP answers,
/// which had no line before.
extension GatewayIntegrationTests {
    /// The access line of the request with `X-Request-Id: id`, waited for (lines are written when the exchange ends).
    private func accessLine(_ gateway: GatewayHarness, containing parts: [String]) async throws -> String? {
        for _ in 0..<50 {
            if let line = gateway.logLines.all.first(where: { line in
                line.hasPrefix("info request ") && parts.allSatisfy { line.contains($0) }
            }) {
                return line
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    @Test(arguments: ["--http1.1", "--http2"])
    func aProxiedRequestsLineSaysWhoWhatHowMuchAndWhichBackend(_ version: String) async throws {
        try await self.withGateway { gateway in
            let token = try gateway.mint("alice")
            let id = "access-\(version.dropFirst(2))"
            let result = try self.curl(
                gateway,
                [version, "-H", "Authorization: Bearer \(token)", "-H", "X-Request-Id: \(id)", "-A", "probe/1.0 (incident)",
                 "--data", "a=1&b=22", "\(gateway.baseURL)/api/items?secret=query-value"]
            )
            #expect(result.status == 200, "\(result.stderr)")
            let found = try await self.accessLine(gateway, containing: ["request_id=\(id) "])
            let line = try #require(found, "no access line: \(gateway.logLines.all)")
            let expected = [
                "client=127.0.0.1 ", "host=localhost:\(gateway.tlsPort) ", "method=POST ", "path=/api/items ",
                "protocol=\(version == "--http2" ? "HTTP/2" : "HTTP/1.1") ", "status=200 ", "reason=- ", "route=/api/ ",
                "bytes_in=8 ", "bytes_out=\(result.body.utf8.count) ", "upstream=api ",
                "upstream_addr=http://127.0.0.1:\(gateway.backend.port) ", "user=alice ", "token_kind=api ",
                "user_agent=probe/1.0 (incident)",
            ]
            for member in expected {
                #expect(line.contains(member), "\(member) missing: \(line)")
            }
            let duration = try #require(Self.member("duration_us", of: line).flatMap { Int($0) }, "\(line)")
            let upstream = try #require(Self.member("upstream_us", of: line).flatMap { Int($0) }, "\(line)")
            #expect(upstream <= duration, "the backend's part is within the whole: \(line)")
            #expect(!line.contains("query-value") && !line.contains(token), "\(line)")
        }
    }

    /// A refused request has no upstream members and counts nothing sent upstream; a user agent that carries a
    /// token has it replaced, and a long one is cut.
    @Test func aRefusedRequestsLineHasNoUpstreamAndAUserAgentNeverCarriesAToken() async throws {
        try await self.withGateway { gateway in
            let token = try gateway.mint("alice")
            let agent = "app/2 " + token + " " + String(repeating: "x", count: 600)
            let result = try self.curl(gateway, ["-A", agent, "-H", "X-Request-Id: refused-1", "\(gateway.baseURL)/api/items"])
            #expect(result.status == 401)
            let found = try await self.accessLine(gateway, containing: ["request_id=refused-1 "])
            let line = try #require(found)
            #expect(line.contains("status=401 ") && line.contains("reason=no_token ") && line.contains("bytes_in=0 "), "\(line)")
            #expect(line.contains("bytes_out=\(result.body.utf8.count) "), "\(line)")
            #expect(!line.contains("upstream"), "\(line)")
            #expect(!line.contains(token) && line.contains("user_agent=app/2 [token] xxx"), "\(line)")
            let logged = try #require(line.range(of: "user_agent=").map { line[$0.upperBound...] })
            #expect(logged.utf8.count <= AccessLogRecord.maxUserAgentBytes + "…".utf8.count, "cut: \(logged.utf8.count) bytes")
        }
    }

    /// The plain listener never forwards, but its answers are requests an incident responder looks for: a
    /// client sending its token in the clear shows up with its address.
    @Test func thePlainListenersAnswersAreLogged() async throws {
        try await self.withGateway(plainHTTP: "redirect") { gateway in
            let refused = try Curl.run(
                ["-A", "plain-client", "http://127.0.0.1:\(gateway.plainPort)/api/items?access_token=leaked"], caFile: nil)
            #expect(refused.status == 426)
            let redirected = try Curl.run(["http://127.0.0.1:\(gateway.plainPort)/open/page?q=1"], caFile: nil)
            #expect(redirected.status == 308)
            let tlsPort = try Curl.run(["-A", "wrong-port", "http://127.0.0.1:\(gateway.tlsPort)/open/x?y=z"], caFile: nil)
            #expect(tlsPort.status == 400)

            let refusal = try await self.accessLine(gateway, containing: ["reason=tls_required "])
            let refusalLine = try #require(refusal, "\(gateway.logLines.all)")
            for member in ["client=127.0.0.1 ", "host=127.0.0.1:\(gateway.plainPort) ", "method=GET ", "path=/api/items ",
                           "protocol=HTTP/1.1 ", "status=426 ", "user_agent=plain-client"] {
                #expect(refusalLine.contains(member), "\(member): \(refusalLine)")
            }
            #expect(!refusalLine.contains("leaked"), "\(refusalLine)")
            let redirect = try await self.accessLine(gateway, containing: ["reason=https_redirect "])
            let redirectLine = try #require(redirect)
            #expect(redirectLine.contains("status=308 ") && redirectLine.contains("path=/open/page ") && !redirectLine.contains("q=1"))
            let wrongPort = try await self.accessLine(gateway, containing: ["reason=plain_http_on_tls_port "])
            let wrongPortLine = try #require(wrongPort)
            #expect(wrongPortLine.contains("client=127.0.0.1 ") && wrongPortLine.contains("method=GET ") && wrongPortLine.contains("path=/open/x "))
            #expect(wrongPortLine.contains(" status=400") && wrongPortLine.contains(" protocol=HTTP/1.1 ") && !wrongPortLine.contains("y=z"), "\(wrongPortLine)")
        }
    }

    /// The value of `key=` in a rendered capture line (up to the next space).
    static func member(_ key: String, of line: String) -> String? {
        guard let range = line.range(of: " \(key)=") else { return nil }
        return String(line[range.upperBound...].prefix { $0 != " " })
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateDemo
import TokengateGateway

/// `upstreams.*.retries` and `upstreams.*.ejection`, against targets on closed ports (connections refused).
/// Connect attempts are counted with `tokengate_upstream_connect_failures_total`.
extension GatewayIntegrationTests {
    /// The value of `tokengate_upstream_connect_failures_total` for `upstream` (0 when not rendered yet).
    private func connectFailures(_ gateway: GatewayHarness, upstream: String) -> Int {
        let prefix = "tokengate_upstream_connect_failures_total{upstream=\"\(upstream)\"} "
        let line = gateway.server.metrics.render().split(separator: "\n").first { $0.hasPrefix(prefix) }
        return line.flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
    }

    /// Status codes of `paths` fetched by one curl over one connection, so every request is served by the
    /// same event loop (pools, failure counts and ejections are per loop).
    private func statusesOverOneConnection(_ gateway: GatewayHarness, _ paths: [String]) throws -> [Int] {
        var arguments = ["-sS", "--max-time", "20", "--cacert", gateway.certificatePath, "-w", "%{http_code} %{num_connects}\n"]
        for path in paths {
            arguments += ["-o", "/dev/null", gateway.baseURL + path]
        }
        let (exitCode, stdout, stderr) = try Curl.process("/usr/bin/curl", arguments)
        #expect(exitCode == 0, "\(stderr)")
        let lines = stdout.split(separator: "\n").map { $0.split(separator: " ") }
        // One new connection, for the first request only.
        #expect(lines.map { $0.last.map(String.init) } == ["1"] + Array(repeating: "0", count: paths.count - 1), "\(stdout)")
        return lines.map { Int($0.first ?? "") ?? 0 }
    }

    @Test func aSingleTargetIsTriedOncePerRetryWhateverTheMethod() async throws {
        let closedPort = try Self.unusedPort()
        try await self.withGateway(
            routes: """
                  - { path_prefix: /, upstream: dead, accept: none }
                """,
            upstreams: """
                  dead: { targets: [ "http://127.0.0.1:\(closedPort)" ], connect_timeout: 1s, retries: 3, ejection: { consecutive_failures: 1000 } }
                """
        ) { gateway in
            // A POST too: a refused connection carried nothing of the request.
            let result = try self.curl(gateway, ["-X", "POST", "-d", "a=1", "\(gateway.baseURL)/x"])
            #expect(result.status == 502, "\(result.status) \(result.body)")
            #expect(result.body == #"{"error":"bad_gateway","error_description":"the backend could not be reached"}"#)
            #expect(self.connectFailures(gateway, upstream: "dead") == 4, "one attempt and three retries")
            let text = gateway.server.metrics.render()
            #expect(text.contains(#"tokengate_rejections_total{route="/",reason="upstream_connect_failed"} 1"#), "\(text)")
        }
    }

    @Test func noRetriesMeansTheFirstRefusedConnectIsAnswered() async throws {
        let closedPort = try Self.unusedPort()
        try await self.withGateway(
            routes: """
                  - { path_prefix: /, upstream: api, accept: none }
                """,
            upstreams: """
                  api: { targets: [ "http://127.0.0.1:\(closedPort)", "http://127.0.0.1:{UPSTREAM}" ], connect_timeout: 1s, retries: 0 }
                """
        ) { gateway in
            // The round robin starts at the dead target, and the live one is not tried for the same request.
            let statuses = try self.statusesOverOneConnection(gateway, ["/a", "/b"])
            #expect(statuses == [502, 200])
            #expect(self.connectFailures(gateway, upstream: "api") == 1)
            #expect(gateway.backend.requestsReceived == 1)
        }
    }

    @Test func aRetryGoesToAnotherTargetAndCarriesThePostBody() async throws {
        let closedPort = try Self.unusedPort()
        try await self.withGateway(
            routes: """
                  - { path_prefix: /, upstream: api, accept: none }
                """,
            upstreams: """
                  api: { targets: [ "http://127.0.0.1:\(closedPort)", "http://127.0.0.1:{UPSTREAM}" ], connect_timeout: 1s }
                """
        ) { gateway in
            let result = try self.curl(gateway, ["-X", "POST", "-H", "Content-Type: text/plain", "-d", "hello", "\(gateway.baseURL)/post"])
            #expect(result.status == 200, "\(result.status) \(result.body)")
            #expect(result.body.contains(#""method":"POST""#) && result.body.contains(#""body":"hello""#), "\(result.body)")
            #expect(self.connectFailures(gateway, upstream: "api") == 1)
        }
    }

    @Test func aTargetIsEjectedAfterTheConfiguredFailuresInARow() async throws {
        let closedPort = try Self.unusedPort()
        try await self.withGateway(
            routes: """
                  - { path_prefix: /, upstream: api, accept: none }
                """,
            upstreams: """
                  api: { targets: [ "http://127.0.0.1:\(closedPort)", "http://127.0.0.1:{UPSTREAM}" ], connect_timeout: 1s, ejection: { consecutive_failures: 3, duration: 1h } }
                """
        ) { gateway in
            // Every request starts at the dead target (the retry moves the round robin back to it) until it has
            // failed three times in a row; then it is skipped. Each request is saved by its retry.
            let statuses = try self.statusesOverOneConnection(gateway, (0..<8).map { "/r\($0)" })
            #expect(statuses == Array(repeating: 200, count: 8))
            #expect(self.connectFailures(gateway, upstream: "api") == 3)
        }
    }
}

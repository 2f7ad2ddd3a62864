//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTestSupport

@testable import TokengateGateway

/// Every upstream connection slot comes back, however the exchange using it ends. HTTP/2 streams the gateway is
/// made to reset (`scripts/h2-attacks/made_you_reset.py`: DATA past the declared `content-length`) end while their
/// upstream connect is in flight or just done; each such slot once stayed counted against
/// `max_connections_per_target` after its connection closed, until a public route answered only
/// `503 no_upstream_available`.
@Suite(.serialized)
struct UpstreamPoolSlotsTests {
    private static let attacks = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/h2-attacks").path

    @Test func resetStreamsGiveTheirUpstreamSlotsBack() async throws {
        let gateway = GatewayHarness()
        // A small limit: one attack run (120 reset streams) is many times more than a loop's slots.
        try await gateway.start(
            upstreams: """
                  api: { targets: [ "http://127.0.0.1:{UPSTREAM}" ], connect_timeout: 1s, response_timeout: 2s, max_connections_per_target: 8 }
                """
        )
        // Several runs, so that both of the harness's event loops serve some.
        for _ in 0..<4 {
            let result = try ChildProcess.run(
                "/usr/bin/env", ["python3", Self.attacks + "/made_you_reset.py", "127.0.0.1", String(gateway.tlsPort)])
            #expect(result.status == 0, "made_you_reset: \(result.stdout) \(result.stderr)")
            #expect(result.stdout.contains("\"ok\": true"), "made_you_reset: \(result.stdout)")
        }
        // Closes still under way settle within a few loop turns; a lost slot never does.
        var busy = try await gateway.server.busyUpstreamConnections(upstream: 0)
        for _ in 0..<50 where busy != 0 {
            try await Task.sleep(for: .milliseconds(100))
            busy = try await gateway.server.busyUpstreamConnections(upstream: 0)
        }
        #expect(busy == 0, "upstream connections still counted busy after the attacks")
        // Separate connections, so that requests reach both loops' pools.
        for _ in 0..<4 {
            let result = try ChildProcess.run(
                "/usr/bin/curl",
                ["-sS", "--http2", "--max-time", "10", "--cacert", gateway.certificatePath, "-o", "/dev/null", "-w", "%{http_code}",
                 gateway.baseURL + "/after"])
            #expect(result.stdout == "200", "curl: \(result.stdout) \(result.stderr)")
        }
        #expect(try await gateway.server.busyUpstreamConnections(upstream: 0) == 0)
        await gateway.stop()
    }
}

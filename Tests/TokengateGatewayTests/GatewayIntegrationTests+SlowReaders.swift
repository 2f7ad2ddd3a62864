//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTestSupport

@testable import TokengateGateway

/// Clients that read their response slowly, on a public route (no token needed): a response that fits the
/// client's buffer grant is read from the backend to its end, so the backend connection goes back to its pool
/// (`limits.response_buffer_per_connection`, `limits.response_buffer_total`); a client below the minimum send
/// rate while bytes wait for it is cut (`limits.response_min_rate`); a stream that goes quiet is not.
extension GatewayIntegrationTests {
    static let slowReaders = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/slow-readers/trickle_readers.py").path

    /// Four backend connections at most, and a response timeout the trickle readers outlast.
    static let fourConnections =
        "  api: { targets: [ \"http://127.0.0.1:{UPSTREAM}\" ], connect_timeout: 1s, response_timeout: 5s, max_connections_per_target: 4 }"

    /// Runs a child process on a thread of its own (the test's two-thread pool stays free) and hands back its
    /// result once it exits.
    private func inBackground(_ executable: String, _ arguments: [String]) -> () async throws -> ChildProcess.Result {
        let box = NSLock()
        nonisolated(unsafe) var result: Result<ChildProcess.Result, any Error>?
        DispatchQueue.global().async {
            let outcome = Result { try ChildProcess.run(executable, arguments) }
            box.lock()
            result = outcome
            box.unlock()
        }
        return {
            while true {
                let done = box.withLock { result }
                if let done { return try done.get() }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    private func waitForFile(_ path: String, seconds: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !FileManager.default.fileExists(atPath: path), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(FileManager.default.fileExists(atPath: path), "the readers never all sent their requests")
    }

    /// 8 trickle readers of a 12 MB response (more than the kernel's socket buffers take on loopback, up to 4 MiB
    /// each, so the rest waits in the gateway) while a pool has 4 backend connections. Returns the statuses of 10
    /// requests sent meanwhile, the backend connections busy at that time, and what the readers saw.
    private func trickleAgainstFourConnections(limits: String) async throws -> (statuses: [Int], busy: Int, readers: String) {
        var outcome: (statuses: [Int], busy: Int, readers: String) = ([], -1, "")
        try await self.withGateway(upstreams: Self.fourConnections, limits: limits) { gateway in
            let ready = gateway.directory + "/ready"
            let readers = self.inBackground(
                "/usr/bin/env",
                [
                    "python3", Self.slowReaders, "127.0.0.1", String(gateway.tlsPort), "/big?bytes=12000000",
                    "--count", "8", "--rate", "100", "--seconds", "7", "--tls", "--ready", ready,
                ]
            )
            try await self.waitForFile(ready, seconds: 6)
            try await Task.sleep(for: .seconds(1))
            outcome.busy = try await gateway.server.busyUpstreamConnections(upstream: 0)
            for _ in 0..<10 {
                outcome.statuses.append(try self.curl(gateway, ["\(gateway.baseURL)/fine"]).status)
            }
            let result = try await readers()
            #expect(result.status == 0, "\(result.stderr)")
            outcome.readers = result.stdout
        }
        return outcome
    }

    @Test func slowReadersOfResponsesThatFitGiveTheirBackendConnectionsBack() async throws {
        let buffered = try await self.trickleAgainstFourConnections(
            limits: "limits: { response_buffer_per_connection: 16MiB, response_buffer_total: 1GiB, response_min_rate: 0 }"
        )
        #expect(buffered.statuses == Array(repeating: 200, count: 10), "\(buffered)")
        #expect(buffered.busy == 0, "backend connections still held by trickle readers: \(buffered)")
        // Not cut (the rate check is off here); those the pool had room for were still reading when the time was up.
        #expect(buffered.readers.contains("\"cut\": 0"), "\(buffered.readers)")
        #expect(!buffered.readers.contains("\"open_at_end\": 0"), "\(buffered.readers)")
        // The same readers with no budget keep backpressure on the backend: the pool's four connections are theirs.
        let held = try await self.trickleAgainstFourConnections(
            limits: "limits: { response_buffer_total: 0, response_min_rate: 0 }"
        )
        #expect(held.busy >= 4, "\(held)")  // In use, and the connects of the requests that wait for them.
        #expect(held.statuses.contains(503), "\(held)")
    }

    /// 3 trickle readers (a raw socket with a 4 KiB receive buffer, read 50 bytes a second) against a 1 KiB/s
    /// minimum with 2 s of grace are cut within seconds, whether the response still comes from the backend
    /// (20 MB: cut during the exchange, logged with its status) or is all in the gateway's hands already (2 MB:
    /// less than the ~2.8 MB Linux's send buffer grows to for such a reader, so the bytes wait in the kernel,
    /// not in the gateway; what the client acknowledged counts, and bytes the kernel has not sent wait as much).
    @Test(arguments: [20_000_000, 2_000_000])
    func aReaderBelowTheMinimumRateIsCutAndLogged(bytes: Int) async throws {
        try await self.withGateway(limits: "limits: { response_min_rate: 1KiB, response_send_timeout: 2s }") { gateway in
            let started = ContinuousClock.now
            let result = try ChildProcess.run(
                "/usr/bin/env",
                [
                    "python3", Self.slowReaders, "127.0.0.1", String(gateway.tlsPort), "/big?bytes=\(bytes)",
                    "--count", "3", "--rate", "50", "--seconds", "12", "--tls",
                ]
            )
            #expect(result.stdout.contains("\"cut\": 3"), "\(result.stdout) \(result.stderr)")
            #expect(ContinuousClock.now - started < .seconds(10), "the cut took \(ContinuousClock.now - started)")
            let lines = gateway.logLines.all.filter { $0.contains("client_too_slow") }
            #expect(lines.count == 3, "\(gateway.logLines.all.suffix(10))")
            if bytes > 4_194_304 {
                #expect(lines.allSatisfy { $0.contains("status=200") }, "\(lines)")
            } else {
                // The exchange was logged (200) when its end went to the kernel; this line says why it was cut.
                #expect(lines.allSatisfy { $0.contains("response cut") }, "\(lines)")
            }
            // A reader that keeps up gets the whole response.
            let fast = try self.curl(gateway, ["\(gateway.baseURL)/big?bytes=\(bytes)"])
            #expect(fast.status == 200)
            #expect(fast.body.utf8.count == bytes)
        }
    }

    @Test func aStreamThatGoesQuietIsNotCut() async throws {
        // A strict rate and a short timeout: only time during which bytes wait for the client counts, and a
        // client that keeps up has none, however long the backend says nothing.
        let upstream = "  api: { targets: [ \"http://127.0.0.1:{UPSTREAM}\" ], connect_timeout: 1s, response_timeout: 5s }"
        try await self.withGateway(upstreams: upstream, limits: "limits: { response_min_rate: 64MiB, response_send_timeout: 2s }") { gateway in
            for version in ["--http1.1", "--http2"] {
                let started = ContinuousClock.now
                let quiet = try self.curl(gateway, [version, "\(gateway.baseURL)/drip?first=1000000&parts=3&bytes=100&ms=1500"])
                #expect(quiet.status == 200, "\(version): \(quiet.status) \(quiet.stderr)")
                #expect(quiet.body.utf8.count == 1_000_300, "\(version): \(quiet.body.utf8.count) bytes")
                #expect(ContinuousClock.now - started > .seconds(4), "\(version)")
            }
            #expect(!gateway.logLines.all.contains { $0.contains("client_too_slow") }, "\(gateway.logLines.all.suffix(10))")
        }
    }

    @Test func overHTTP2AHeldWindowReleasesTheBackendAndABelowRateStreamIsReset() async throws {
        let script = Self.h2Attacks + "/held_window.py"
        // The stream's queue takes the whole response on its grant: the backend connection goes back while the
        // client still holds its window shut.
        for (limits, busyWhileHeld) in [
            ("limits: { response_buffer_per_connection: 2MiB, response_min_rate: 0 }", 0),
            ("limits: { response_buffer_total: 0, response_min_rate: 0 }", 1),
        ] {
            try await self.withGateway(limits: limits) { gateway in
                let held = self.inBackground(
                    "/usr/bin/env", ["python3", script, "127.0.0.1", String(gateway.tlsPort), "/big?bytes=1000000", "4", "expect-open"]
                )
                try await Task.sleep(for: .seconds(2))
                let busy = try await gateway.server.busyUpstreamConnections(upstream: 0)
                #expect(busy == busyWhileHeld, "\(limits)")
                let result = try await held()
                #expect(result.status == 0, "\(limits): \(result.stdout) \(result.stderr)")
            }
        }
        try await self.withGateway(limits: "limits: { response_min_rate: 1KiB, response_send_timeout: 2s }") { gateway in
            let result = try ChildProcess.run(
                "/usr/bin/env", ["python3", script, "127.0.0.1", String(gateway.tlsPort), "/big?bytes=1000000", "10", "expect-reset"]
            )
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            #expect(result.stdout.contains("\"code\": 8"), "RST_STREAM CANCEL expected: \(result.stdout)")
            let lines = gateway.logLines.all.filter { $0.contains("client_too_slow") }
            #expect(lines.count == 1, "\(gateway.logLines.all.suffix(10))")
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengateGateway
import Testing

/// What a request body may hold while it arrives: a backend connection, a token body's buffer. A body that
/// trickles is cut (`request_body_min_rate`), and the buffers of all token bodies together are bounded
/// (`token_body_memory`).
extension GatewayIntegrationTests {
    /// Runs curl on threads of their own (blocking the two-thread concurrency pool would hold the test up) and
    /// returns each result, in order.
    private func concurrently(_ gateway: GatewayHarness, _ runs: [[String]]) async throws -> [Curl.Result] {
        let results = NSLock()
        nonisolated(unsafe) var collected = [Curl.Result?](repeating: nil, count: runs.count)
        let group = DispatchGroup()
        for (index, arguments) in runs.enumerated() {
            group.enter()
            DispatchQueue.global().async {
                let result = try? Curl.run(arguments, caFile: gateway.certificatePath, timeout: 20)
                results.lock()
                collected[index] = result
                results.unlock()
                group.leave()
            }
        }
        while group.wait(timeout: .now()) == .timedOut {
            try await Task.sleep(for: .milliseconds(20))
        }
        return try collected.map { try #require($0) }
    }

    @Test func aBodyThatTricklesIsCutAndOneThatKeepsUpIsNot() async throws {
        try await self.withGateway(limits: "limits: { request_body_timeout: 1s, request_body_min_rate: 1KiB }") { gateway in
            let file = gateway.directory + "/body.bin"
            try String(repeating: "b", count: 8 * 1024).write(toFile: file, atomically: true, encoding: .utf8)
            for version in ["--http1.1", "--http2"] {
                // 200 bytes a second: past 1 s plus a second per KiB after about 1.3 s.
                let started = ContinuousClock.now
                let slow = try self.curl(gateway, [version, "--limit-rate", "200", "--data-binary", "@\(file)", "\(gateway.baseURL)/upload"])
                #expect(slow.status == 408, "\(version): \(slow.status) \(slow.body) \(slow.stderr)")
                #expect(slow.body.contains("the request body arrived too slowly"), "\(version): \(slow.body)")
                #expect(ContinuousClock.now - started < .seconds(6), "\(version): the cut took \(ContinuousClock.now - started)")
                // 4 KiB a second keeps up: two seconds for the whole body.
                let steady = try self.curl(gateway, [version, "--limit-rate", "4K", "--data-binary", "@\(file)", "\(gateway.baseURL)/upload"])
                #expect(steady.status == 200, "\(version): \(steady.status) \(steady.stderr)")
                #expect(steady.body.contains("\"body_bytes\":8192"), "\(version): \(steady.body)")
            }
            let lines = gateway.logLines.all.filter { $0.contains("reason=body_too_slow") }
            #expect(lines.count == 2, "\(gateway.logLines.all)")
            #expect(lines.allSatisfy { $0.contains("status=408") })
        }
    }

    @Test func tokenBodiesTogetherStayWithinTheirMemory() async throws {
        try await self.withGateway(limits: "limits: { max_token_body_bytes: 16KiB, token_body_memory: 32KiB }") { gateway in
            let token = try gateway.mint("alice")
            let file = gateway.directory + "/form.bin"
            let form = "access_token=\(token)&pad=" + String(repeating: "p", count: 15 * 1024 - token.utf8.count - 18)
            try form.write(toFile: file, atomically: true, encoding: .utf8)
            let post = [
                "--http2", "--limit-rate", "4K", "-H", "Content-Type: application/x-www-form-urlencoded",
                "--data-binary", "@\(file)", "\(gateway.baseURL)/api/items",
            ]
            // Three bodies of 15 KiB at once, each taking about 4 s: two fit in 32 KiB, the third does not.
            let results = try await self.concurrently(gateway, [post, post, post])
            let statuses = results.map(\.status).sorted()
            #expect(statuses == [200, 200, 503], "\(statuses) \(results.map(\.body))")
            let refused = try #require(results.first { $0.status == 503 })
            #expect(refused.body.contains("temporarily_unavailable"), "\(refused.body)")
            // Given back when they ended: a body that needs all of it fits again.
            let again = try self.curl(gateway, post)
            #expect(again.status == 200, "\(again.status) \(again.body)")
            #expect(gateway.logLines.all.contains { $0.contains("reason=token_body_memory_full") })

            // A reload does not bring a fresh budget while the old configuration's bodies are still held.
            let started = DispatchGroup()
            let held = NSLock()
            nonisolated(unsafe) var heldStatuses: [Int] = []
            for _ in 0..<2 {
                started.enter()
                DispatchQueue.global().async {
                    let status = (try? Curl.run(post, caFile: gateway.certificatePath, timeout: 20))?.status ?? -1
                    held.lock()
                    heldStatuses.append(status)
                    held.unlock()
                    started.leave()
                }
            }
            try await Task.sleep(for: .seconds(1))
            try gateway.server.reload(configurationPath: gateway.directory + "/tokengate.yaml")
            let afterReload = try await self.concurrently(gateway, [post])
            #expect(afterReload.map(\.status) == [503], "\(afterReload.map(\.body))")
            while started.wait(timeout: .now()) == .timedOut {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(heldStatuses == [200, 200])
        }
    }
}

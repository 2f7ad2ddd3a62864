//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import TokengateTestSupport
import TokengateTokens

@testable import TokengateGateway

/// WebSocket through a real gateway: Python's `websockets` as the client and as the backend
/// (`scripts/websocket/ws_peers.py`), over real sockets on loopback and TLS.
@Suite(.serialized)
struct WebSocketTunnelTests {
    static let peers = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/websocket/ws_peers.py").path

    static let routes = """
          - { path_prefix: /ws/, upstream: ws, accept: [api], sources: [authorization, "cookie:auth_token"], websocket: { allowed_origins: ["https://app.example"] } }
          - { path_prefix: /idle/, upstream: ws, accept: [api], sources: [authorization], websocket: { idle_timeout: 1s } }
          - { path_prefix: /bad/, upstream: bad, accept: [api], sources: [authorization], websocket: true }
          - { path_prefix: /plain/, upstream: ws, accept: [api], sources: [authorization] }
          - { path_prefix: /, upstream: ws, accept: none }
        """

    /// A gateway in front of the Python backend, which runs for the call.
    func withTunnels(_ body: (GatewayHarness) async throws -> Void) async throws {
        let portFile = NSTemporaryDirectory() + "tokengate-ws-\(UUID().uuidString).json"
        let backend = Process()
        backend.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        backend.arguments = ["python3", Self.peers, "backend", portFile]
        try backend.run()
        defer {
            // SIGKILL: the test process's children inherit its blocked signals, SIGTERM among them.
            kill(backend.processIdentifier, SIGKILL)
            backend.waitUntilExit()
            try? FileManager.default.removeItem(atPath: portFile)
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while !FileManager.default.fileExists(atPath: portFile), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let ports = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: portFile))) as! [String: Int]
        let upstreams = """
              ws: { targets: [ "http://127.0.0.1:\(ports["ws"]!)" ], connect_timeout: 1s, response_timeout: 2s }
              bad: { targets: [ "http://127.0.0.1:\(ports["bad"]!)" ], connect_timeout: 1s, response_timeout: 2s }
            """
        let harness = GatewayHarness()
        do {
            try await harness.start(routes: Self.routes, upstreams: upstreams)
            try await body(harness)
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    /// Runs one client scenario; its JSON line.
    func client(_ gateway: GatewayHarness, _ mode: String, _ path: String, _ options: [String] = []) throws -> [String: Any] {
        Self.parse(try Self.clientOutput(gateway.tlsPort, gateway.certificatePath, mode, path, options))
    }

    static func clientOutput(_ port: Int, _ ca: String, _ mode: String, _ path: String, _ options: [String]) throws -> String {
        let result = try ChildProcess.run(
            "/usr/bin/env", ["python3", Self.peers, "client", mode, "wss://localhost:\(port)\(path)", "--ca", ca] + options)
        return result.stdout + "\n" + result.stderr
    }

    static func parse(_ output: String) -> [String: Any] {
        let line = output.split(separator: "\n").first { $0.hasPrefix("{") }.map(String.init) ?? ""
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            Issue.record("no result from the client: \(output)")
            return [:]
        }
        return object
    }

    @Test func messagesFlowBothWaysWithTheIdentityForwarded() async throws {
        try await self.withTunnels { gateway in
            let token = try gateway.mint("alice")
            let echo = try self.client(gateway, "echo", "/ws/echo", ["--token", token])
            #expect(echo["status"] as? Int == 101, "\(echo)")
            #expect(echo["echoed"] as? Bool == true, "\(echo)")
            let large = try self.client(gateway, "large", "/ws/echo", ["--token", token])
            #expect(large["echoed"] as? Bool == true, "an 8 MiB message each way: \(large)")
            let whoami = try self.client(gateway, "whoami", "/ws/whoami", ["--token", token])
            let seen = whoami["whoami"] as? [String: Any]
            #expect(seen?["user"] as? String == "alice", "\(whoami)")
            #expect(seen?["authorization"] is NSNull, "the token reached the backend: \(whoami)")
            #expect(seen?["upgrade"] as? String == "websocket", "\(whoami)")
            let ended = gateway.logLines.all.filter { $0.contains("mode=websocket") }
            #expect(ended.count == 3, "\(gateway.logLines.all.suffix(6))")
            #expect(ended.allSatisfy { $0.contains("close_reason=") && $0.contains("bytes_in=") }, "\(ended)")
            // The 8 MiB message and its frame header, each way.
            #expect(ended.contains { $0.contains("bytes_in=84") && $0.contains("bytes_out=84") }, "\(ended)")
            let metrics = gateway.server.metrics.render()
            #expect(metrics.contains("tokengate_websocket_tunnels_open 0"), "\(metrics)")
        }
    }

    @Test func refusalsComeBeforeAnyTunnel() async throws {
        try await self.withTunnels { gateway in
            let none = try self.client(gateway, "echo", "/ws/echo")
            #expect(none["status"] as? Int == 401, "\(none)")
            let forged = try self.client(gateway, "echo", "/ws/echo", ["--token", try gateway.mint("alice") + "x"])
            #expect(forged["status"] as? Int == 401, "\(forged)")
            // A cookie rides along with any site's upgrade: only the allowed origin gets a tunnel with one.
            let cookie = "auth_token=" + (try gateway.mint("alice"))
            let foreign = try self.client(gateway, "echo", "/ws/echo", ["--cookie", cookie, "--origin", "https://evil.example"])
            #expect(foreign["status"] as? Int == 403, "\(foreign)")
            #expect((foreign["body"] as? String)?.contains("origin") == true, "\(foreign)")
            let allowed = try self.client(gateway, "echo", "/ws/echo", ["--cookie", cookie, "--origin", "https://app.example"])
            #expect(allowed["echoed"] as? Bool == true, "\(allowed)")
            #expect(gateway.logLines.all.contains { $0.contains("websocket_origin") }, "\(gateway.logLines.all.suffix(5))")
            // A route without `websocket`: the backend never sees an upgrade (it answers the plain GET itself).
            let plain = try self.client(gateway, "echo", "/plain/echo", ["--token", try gateway.mint("alice")])
            #expect(plain["status"] as? Int != 101, "\(plain)")
        }
    }

    @Test func aBackendWhose101IsWrongGetsNoTunnel() async throws {
        try await self.withTunnels { gateway in
            let result = try self.client(gateway, "echo", "/bad/echo", ["--token", try gateway.mint("alice")])
            #expect(result["status"] as? Int == 502, "\(result)")
            #expect((result["body"] as? String)?.contains("Sec-WebSocket-Accept") == true, "\(result)")
            #expect(gateway.logLines.all.contains { $0.contains("websocket_bad_handshake") }, "\(gateway.logLines.all.suffix(5))")
        }
    }

    @Test func aRevocationClosesAnOpenTunnelWithinASecond() async throws {
        try await self.withTunnels { gateway in
            let ready = gateway.directory + "/ready"
            let now = Int64(Date().timeIntervalSince1970)
            let token = try gateway.mint("alice", issuedAt: now - 5)
            let (port, ca) = (gateway.tlsPort, gateway.certificatePath)
            let waiting = Self.inBackground {
                try Self.clientOutput(port, ca, "wait-close", "/ws/echo", ["--token", token, "--ready", ready, "--seconds", "8"])
            }
            let deadline = ContinuousClock.now + .seconds(6)
            while !FileManager.default.fileExists(atPath: ready), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(300))
            let revokedAt = ContinuousClock.now
            gateway.cutoffs.store(CutoffSnapshot(users: ["alice": UserCutoffs(revokedBefore: now)]))
            let result = Self.parse(try await waiting())
            let took = ContinuousClock.now - revokedAt
            #expect(result["closed"] as? Bool == true, "\(result)")
            #expect(took < .seconds(1), "the tunnel closed \(took) after the revocation")
            print("websocket: tunnel closed \(took) after the revocation")
            #expect(gateway.logLines.all.contains { $0.contains("close_reason=revoked") }, "\(gateway.logLines.all.suffix(5))")
        }
    }

    @Test func anIdleTunnelIsClosed() async throws {
        try await self.withTunnels { gateway in
            let result = try self.client(gateway, "wait-close", "/idle/echo", ["--token", try gateway.mint("alice"), "--seconds", "6"])
            let after = result["closed_after"] as? Double ?? 99
            #expect(after >= 0.9 && after < 2.5, "idle_timeout 1s closed it after \(after) s: \(result)")
            #expect(gateway.logLines.all.contains { $0.contains("close_reason=idle_timeout") }, "\(gateway.logLines.all.suffix(5))")
        }
    }

    /// A client that floods a backend that reads nothing, and a backend that floods a client that reads nothing:
    /// what waits, waits in the peers' sockets, not in the gateway (this test process).
    @Test func floodsWaitOutsideTheGateway() async throws {
        try await self.withTunnels { gateway in
            let pid = String(ProcessInfo.processInfo.processIdentifier)
            let token = try gateway.mint("alice")
            let flood = try self.client(gateway, "flood", "/bad/sink", ["--token", token, "--seconds", "8", "--gateway-pid", pid])
            let sent = flood["sent_bytes"] as? Int ?? -1
            let growth = flood["gateway_rss_growth_kib"] as? Int ?? -1
            print("websocket: flood into a backend that reads nothing: \(sent) bytes accepted, gateway RSS +\(growth) KiB")
            // Loopback's socket buffers (client, gateway both ways, backend) take some megabytes; 8 s of an unbounded
            // pipe would take gigabytes.
            #expect(sent >= 0 && sent < 64 * 1024 * 1024, "the client could send \(sent) bytes")
            #expect(growth < 32 * 1024, "the gateway grew by \(growth) KiB")
            let slow = try self.client(gateway, "slow-read", "/ws/flood", ["--token", token, "--seconds", "3", "--gateway-pid", pid])
            let slowGrowth = slow["gateway_rss_growth_kib"] as? Int ?? -1
            print("websocket: a backend flooding a client that reads nothing for 3 s: gateway RSS +\(slowGrowth) KiB")
            #expect(slowGrowth < 32 * 1024, "the gateway grew by \(slowGrowth) KiB")
            #expect(slow["read_after_pause"] as? Int == 10 * 65536, "\(slow)")
        }
    }

    static func inBackground<T: Sendable>(_ work: @escaping @Sendable () throws -> T) -> () async throws -> T {
        let box = NSLock()
        nonisolated(unsafe) var result: Result<T, any Error>?
        DispatchQueue.global().async {
            let outcome = Result { try work() }
            box.withLock { result = outcome }
        }
        return {
            while true {
                if let done = box.withLock({ result }) { return try done.get() }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateConfig

@testable import TokengateGateway

#if canImport(Glibc)
    import Glibc
#endif

/// `health_check` against real backends on loopback: Python's `http.server` serving a directory (so `/healthz`
/// and `/who` are files), a directory without `/healthz` (404), and a socket that accepts and never answers.
extension GatewayIntegrationTests {
    /// Python's `http.server` (`SimpleHTTPRequestHandler`, as `python3 -m http.server` runs it) on `port`, serving
    /// `directory`; ``stop()`` kills it (SIGKILL: as a crash would). Started through a few lines rather than `-m`
    /// only to skip `server_bind`'s reverse DNS look-up of the address (`getfqdn`), which takes seconds on a
    /// machine without a resolver.
    final class PythonHTTPServer {
        let process = Process()
        let port: Int

        init(directory: String, port: Int) async throws {
            self.port = port
            self.process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            self.process.arguments = ["python3", "-c", Self.script, directory, "\(port)"]
            self.process.standardOutput = FileHandle.nullDevice
            self.process.standardError = FileHandle.nullDevice
            try self.process.run()
            for _ in 0..<100 where !GatewayIntegrationTests.acceptsQuickly(port: port) {
                try await Task.sleep(for: .milliseconds(50))
            }
        }

        func stop() {
            kill(self.process.processIdentifier, SIGKILL)
            self.process.waitUntilExit()
        }

        static let script = """
            import functools, http.server, socketserver, sys
            class Server(http.server.ThreadingHTTPServer):
                def server_bind(self):
                    socketserver.TCPServer.server_bind(self)
                    self.server_name, self.server_port = self.server_address[:2]
            handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
            Server(("127.0.0.1", int(sys.argv[2])), handler).serve_forever()
            """
    }

    /// Whether something accepts TCP connections on loopback `port`, within 200 ms: a blocking connect that
    /// meets a server between its `bind` and its `listen` can wait out SYN retransmissions (about 15 s).
    static func acceptsQuickly(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var limit = timeval(tv_sec: 0, tv_usec: 200_000)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        } == 0
    }

    /// A directory with `who` (holding `name`) and, when `healthy`, `healthz`.
    private func site(_ name: String, healthy: Bool, in parent: String) throws -> String {
        let directory = parent + "/site-" + name
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try name.write(toFile: directory + "/who", atomically: true, encoding: .utf8)
        if healthy { try "ok".write(toFile: directory + "/healthz", atomically: true, encoding: .utf8) }
        return directory
    }

    /// The `healthy` flags of `upstream`'s targets, from the admin endpoint's JSON.
    private func health(_ gateway: GatewayHarness, upstream: String) throws -> [String: (healthy: Bool, lastCheck: String?)] {
        let json = try JSONSerialization.jsonObject(with: Data(gateway.server.upstreamsJSON().utf8)) as? [String: Any]
        let upstreams = json?["upstreams"] as? [[String: Any]] ?? []
        let entry = upstreams.first { $0["name"] as? String == upstream }
        var result: [String: (Bool, String?)] = [:]
        for target in entry?["targets"] as? [[String: Any]] ?? [] {
            result[target["target"] as? String ?? ""] = (target["healthy"] as? Bool ?? true, target["last_check"] as? String)
        }
        return result
    }

    /// Waits (at most 10 s) until `condition` holds.
    private func eventually(_ condition: () throws -> Bool) async throws -> Bool {
        for _ in 0..<200 {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Sends `count` requests for `/who` over one connection; returns each answer's status and body.
    private func whoAnswers(_ gateway: GatewayHarness, count: Int) throws -> [String] {
        var arguments = ["-sS", "--max-time", "20", "--cacert", gateway.certificatePath, "-w", " %{http_code}\n"]
        for _ in 0..<count {
            arguments += ["\(gateway.baseURL)/who"]
        }
        let (_, stdout, _) = try Curl.process("/usr/bin/curl", arguments)
        return stdout.split(separator: "\n").map(String.init)
    }

    @Test func aKilledTargetIsEjectedWithNoFailedRequestAndRestoredWhenItIsBack() async throws {
        let harness = GatewayHarness()
        try FileManager.default.createDirectory(atPath: harness.directory, withIntermediateDirectories: true)
        let portA = try Self.unusedPort()
        let portB = try Self.unusedPort()
        let siteA = try self.site("a", healthy: true, in: harness.directory)
        let siteB = try self.site("b", healthy: true, in: harness.directory)
        var a = try await PythonHTTPServer(directory: siteA, port: portA)
        let b = try await PythonHTTPServer(directory: siteB, port: portB)
        defer { a.stop(); b.stop() }
        let targetA = "http://127.0.0.1:\(portA)"
        let targetB = "http://127.0.0.1:\(portB)"
        do {
            try await harness.start(
                routes: "  - { path_prefix: /, upstream: pair, accept: none }",
                upstreams: """
                      pair: { targets: [ "\(targetA)", "\(targetB)" ], connect_timeout: 1s, ejection: { consecutive_failures: 1000 }, health_check: { path: /healthz, interval: 200ms, timeout: 150ms, healthy_threshold: 2, unhealthy_threshold: 2 } }
                    """
            )
            #expect(try await self.eventually { try self.health(harness, upstream: "pair")[targetA]?.lastCheck == "status 200" })
            let both = Set(try self.whoAnswers(harness, count: 10))
            #expect(both == ["a 200", "b 200"], "\(both)")

            a.stop()
            let ejected = try await self.eventually { try self.health(harness, upstream: "pair")[targetA]?.healthy == false }
            let afterKill = try self.health(harness, upstream: "pair")
            #expect(ejected, "\(afterKill)")
            #expect(harness.server.scrapeTimeExposition().contains("tokengate_upstream_target_healthy{upstream=\"pair\",target=\"\(targetA)\"} 0"))
            #expect(harness.server.scrapeTimeExposition().contains("tokengate_upstream_target_healthy{upstream=\"pair\",target=\"\(targetB)\"} 1"))
            let failuresBefore = self.connectFailures(harness, upstream: "pair")
            let onlyB = try self.whoAnswers(harness, count: 40)
            #expect(onlyB == Array(repeating: "b 200", count: 40), "\(onlyB)")
            #expect(self.connectFailures(harness, upstream: "pair") == failuresBefore, "no request tried the ejected target")
            let warning = harness.logLines.all.first { $0.contains("upstream target unhealthy") } ?? ""
            #expect(warning.contains("upstream=pair") && warning.contains("target=\(targetA)") && warning.contains("check=connect failed"), "\(warning)")

            // A reload keeps the health found so far: the dead target does not come back with it.
            try harness.server.reload(configurationPath: harness.directory + "/tokengate.yaml")
            #expect(harness.server.generation == 2)
            #expect(try self.health(harness, upstream: "pair")[targetA]?.healthy == false)
            let afterReload = try self.whoAnswers(harness, count: 10)
            #expect(afterReload == Array(repeating: "b 200", count: 10), "\(afterReload)")

            a = try await PythonHTTPServer(directory: siteA, port: portA)
            let restored = try await self.eventually { try self.health(harness, upstream: "pair")[targetA]?.healthy == true }
            #expect(restored)
            #expect(harness.logLines.all.contains { $0.contains("upstream target healthy again") && $0.contains("target=\(targetA)") })
            let again = Set(try self.whoAnswers(harness, count: 10))
            #expect(again == ["a 200", "b 200"], "\(again)")
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    @Test func aMissingHealthPathAndASilentTargetAreEjectedAndAllDownServesAnyway() async throws {
        let harness = GatewayHarness()
        try FileManager.default.createDirectory(atPath: harness.directory, withIntermediateDirectories: true)
        let good = try await PythonHTTPServer(directory: try self.site("good", healthy: true, in: harness.directory), port: try Self.unusedPort())
        let missingSite = try self.site("missing", healthy: false, in: harness.directory)
        try FileManager.default.createDirectory(atPath: missingSite + "/lonely", withIntermediateDirectories: true)
        try "lonely".write(toFile: missingSite + "/lonely/x", atomically: true, encoding: .utf8)
        let missing = try await PythonHTTPServer(directory: missingSite, port: try Self.unusedPort())
        defer { good.stop(); missing.stop() }
        // Accepts connections (the kernel completes them from the backlog) and never answers.
        let silent = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(silent) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(silent, $0, length) } }
        _ = listen(silent, 64)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(silent, $0, &length) } }
        let silentPort = Int(UInt16(bigEndian: address.sin_port))
        let check = "health_check: { path: /healthz, interval: 200ms, timeout: 150ms, healthy_threshold: 1, unhealthy_threshold: 2 }"
        do {
            try await harness.start(
                routes: """
                      - { path_prefix: /lonely/, upstream: lonely, accept: none }
                      - { path_prefix: /, upstream: three, accept: none }
                    """,
                upstreams: """
                      three: { targets: [ "http://127.0.0.1:\(good.port)", "http://127.0.0.1:\(missing.port)", "http://127.0.0.1:\(silentPort)" ], response_timeout: 1s, \(check) }
                      lonely: { targets: [ "http://127.0.0.1:\(missing.port)" ], \(check) }
                    """
            )
            let goodTarget = "http://127.0.0.1:\(good.port)"
            let missingTarget = "http://127.0.0.1:\(missing.port)"
            let silentTarget = "http://127.0.0.1:\(silentPort)"
            let settled = try await self.eventually {
                let health = try self.health(harness, upstream: "three")
                return health[missingTarget]?.healthy == false && health[silentTarget]?.healthy == false
            }
            let health = try self.health(harness, upstream: "three")
            #expect(settled, "\(health)")
            #expect(health[goodTarget]?.healthy == true)
            #expect(health[missingTarget]?.lastCheck == "status 404, not in expected_status", "\(health)")
            #expect(health[silentTarget]?.lastCheck == "no response head within timeout (150ms)", "\(health)")
            let answers = try self.whoAnswers(harness, count: 12)
            #expect(answers == Array(repeating: "good 200", count: 12), "\(answers)")

            // Its only target fails its checks: the upstream still serves (the checks are not obeyed when every
            // target is down), and the log says so.
            #expect(try await self.eventually { try self.health(harness, upstream: "lonely")[missingTarget]?.healthy == false })
            let lonely = try self.curl(harness, ["\(harness.baseURL)/lonely/x"])
            #expect(lonely.status == 200 && lonely.body == "lonely", "\(lonely.status) \(lonely.body)")
            #expect(harness.logLines.all.contains { $0.contains("upstream=lonely") && $0.contains("every target is unhealthy") })
            // Health is not readiness: nothing here touched `/readyz` (the admin listener's, from the cutoff store).
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    private func connectFailures(_ gateway: GatewayHarness, upstream: String) -> Int {
        let prefix = "tokengate_upstream_connect_failures_total{upstream=\"\(upstream)\"} "
        let line = gateway.server.metrics.render().split(separator: "\n").first { $0.hasPrefix(prefix) }
        return line.flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
    }
}

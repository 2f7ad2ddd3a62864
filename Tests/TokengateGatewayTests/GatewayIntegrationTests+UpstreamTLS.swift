//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOCore
import NIOPosix
import Testing
import TokengateDemo
import TokengateHTTP
import TokengateTLS

@testable import TokengateGateway

#if canImport(Glibc)
    import Glibc
#endif

/// `https://` targets whose TLS handshake fails: a certificate the gateway does not trust (a real
/// `openssl s_server`), and a target that does not speak TLS at all. Either is a connect failure: retried,
/// counted, toward ejection, bounded by `connect_timeout`, and logged once with the cause.
extension GatewayIntegrationTests {
    /// `openssl s_server -www` on a loopback port with a certificate of its own: every request gets a status
    /// page (HTTP/1.0, until the close) once the client accepts the certificate.
    final class OpenSSLServer {
        let process = Process()
        let port: Int

        init(directory: String) async throws {
            let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost", "127.0.0.1"])
            try certificate.certificatePEM.write(toFile: directory + "/untrusted.crt", atomically: true, encoding: .utf8)
            try certificate.privateKeyPEM.write(toFile: directory + "/untrusted.key", atomically: true, encoding: .utf8)
            self.port = try GatewayIntegrationTests.unusedPort()
            self.process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            self.process.arguments = [
                "s_server", "-accept", "127.0.0.1:\(self.port)", "-cert", directory + "/untrusted.crt",
                "-key", directory + "/untrusted.key", "-www", "-quiet",
            ]
            self.process.standardOutput = FileHandle.nullDevice
            self.process.standardError = FileHandle.nullDevice
            try self.process.run()
            for _ in 0..<100 where !Self.accepts(port: self.port) {
                try await Task.sleep(for: .milliseconds(50))
            }
        }

        func stop() {
            kill(self.process.processIdentifier, SIGKILL)  // s_server does not stop on SIGTERM while it serves.
            self.process.waitUntilExit()
        }

        /// Whether something accepts TCP connections on loopback `port`.
        static func accepts(port: Int) -> Bool {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            let length = socklen_t(MemoryLayout<sockaddr_in>.size)
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
            } == 0
        }
    }

    private func upstreamConnectFailures(_ gateway: GatewayHarness, upstream: String) -> Int {
        let prefix = "tokengate_upstream_connect_failures_total{upstream=\"\(upstream)\"} "
        let line = gateway.server.metrics.render().split(separator: "\n").first { $0.hasPrefix(prefix) }
        return line.flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
    }

    private func lines(_ gateway: GatewayHarness, containing text: String) -> [String] {
        gateway.logLines.all.filter { $0.contains(text) }
    }

    @Test func anUntrustedBackendCertificateIsAConnectFailureRetriedAndLoggedWithItsCause() async throws {
        let directory = NSTemporaryDirectory() + "tokengate-s-server-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await OpenSSLServer(directory: directory)
        defer { server.stop() }
        try await self.withGateway(
            routes: """
                  - { path_prefix: /, upstream: tls, accept: none }
                """,
            upstreams: """
                  tls: { targets: [ "https://127.0.0.1:\(server.port)" ], connect_timeout: 2s, retries: 2, ejection: { consecutive_failures: 1000 } }
                """
        ) { gateway in
            let result = try self.curl(gateway, ["-H", "X-Request-Id: tls-probe-1", "\(gateway.baseURL)/x"])
            #expect(result.status == 502, "\(result.status) \(result.body)")
            #expect(result.body == #"{"error":"bad_gateway","error_description":"the backend could not be reached"}"#)
            #expect(self.upstreamConnectFailures(gateway, upstream: "tls") == 3, "one attempt and two retries")
            let access = self.lines(gateway, containing: "request_id=tls-probe-1").filter { $0.contains(" request ") }
            #expect(access.count == 1 && access[0].contains("status=502") && access[0].contains("reason=upstream_connect_failed"), "\(access)")
            // One warning (the retries fall within the same second), naming the upstream, the target, the cause and
            // the request; the TLS layer's own line about it is not at info any more.
            let warnings = self.lines(gateway, containing: "upstream connect failed")
            #expect(warnings.count == 1, "\(warnings)")
            let warning = warnings.first ?? ""
            #expect(warning.hasPrefix("warning "), "\(warning)")
            #expect(warning.contains("upstream=tls") && warning.contains("target=https://127.0.0.1:\(server.port)"), "\(warning)")
            #expect(warning.contains("request_id=tls-probe-1") && warning.contains("failures=1"), "\(warning)")
            #expect(warning.contains("error=TLS handshake failed: ") && warning.contains("certificate verify failed"), "\(warning)")
            #expect(self.lines(gateway, containing: "TLS connection failed").isEmpty, "\(gateway.logLines.all)")
        }
    }

    @Test func aTargetFailingItsHandshakeIsEjectedAndTheRequestGoesToTheNextOne() async throws {
        let directory = NSTemporaryDirectory() + "tokengate-s-server-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let untrusted = try await OpenSSLServer(directory: directory)
        defer { untrusted.stop() }
        let trusted = try SelfSignedCertificate.generate(hostnames: ["localhost", "127.0.0.1"])
        try trusted.certificatePEM.write(toFile: directory + "/trusted.crt", atomically: true, encoding: .utf8)
        try trusted.privateKeyPEM.write(toFile: directory + "/trusted.key", atomically: true, encoding: .utf8)
        let context = try TLSServerContext(
            certificates: [TLSCertificateSource(certificatePath: directory + "/trusted.crt", privateKeyPath: directory + "/trusted.key")],
            alpnProtocols: ["http/1.1"]
        )
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let counter = RequestCounter()
        let backend = try await TLSDemoBackend.start(context: context, counter: counter, group: group)
        do {
            try await self.ejectTheUntrustedTarget(untrusted: untrusted.port, trusted: backend.localAddress!.port!, directory: directory, counter: counter)
        } catch {
            try? await backend.close()
            try? await group.shutdownGracefully()
            throw error
        }
        try await backend.close()
        try await group.shutdownGracefully()
    }

    private func ejectTheUntrustedTarget(untrusted: Int, trusted: Int, directory: String, counter: RequestCounter) async throws {
        try await self.withGateway(
            routes: """
                  - { path_prefix: /, upstream: tls, accept: none }
                """,
            upstreams: """
                  tls: { targets: [ "https://127.0.0.1:\(untrusted)", "https://127.0.0.1:\(trusted)" ], connect_timeout: 2s, tls: { ca_file: \(directory)/trusted.crt }, ejection: { consecutive_failures: 2, duration: 1h } }
                """
        ) { gateway in
            // One connection, so one event loop: its pool tries the untrusted target first until it has failed
            // twice in a row, then skips it. Every request is saved by its retry on the trusted target.
            var arguments = ["-sS", "--max-time", "20", "--cacert", gateway.certificatePath, "-w", "%{http_code}\n"]
            for index in 0..<6 {
                arguments += ["-o", "/dev/null", "\(gateway.baseURL)/r\(index)"]
            }
            let (exitCode, stdout, stderr) = try Curl.process("/usr/bin/curl", arguments)
            #expect(exitCode == 0, "\(stderr)")
            #expect(stdout.split(separator: "\n") == Array(repeating: "200", count: 6), "\(stdout)")
            #expect(self.upstreamConnectFailures(gateway, upstream: "tls") == 2)
            #expect(counter.value == 6)
        }
    }

    /// A plain-HTTP server behind an `https://` target reads the ClientHello as the start of a request and waits
    /// for the rest: the handshake is bounded by `connect_timeout`, not by a fixed 10 s.
    @Test func aTargetThatDoesNotSpeakTLSFailsWithinTheConnectTimeout() async throws {
        let harness = GatewayHarness()
        // Answers request heads only: a ClientHello never ends one, so it never answers.
        let backend = try await ScriptedBackend.start(group: harness.group) { _, _ in ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false) }
        do {
            try await harness.start(
                routes: "  - { path_prefix: /, upstream: plain, accept: none }",
                upstreams: "  plain: { targets: [ \"https://127.0.0.1:\(backend.port)\" ], connect_timeout: 1s, retries: 0 }"
            )
            let start = ContinuousClock.now
            let result = try self.curl(harness, ["-H", "X-Request-Id: plain-probe", "\(harness.baseURL)/x"])
            let elapsed = ContinuousClock.now - start
            #expect(result.status == 502, "\(result.status) \(result.body)")
            #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(3), "connect_timeout is 1 s: \(elapsed)")
            #expect(self.upstreamConnectFailures(harness, upstream: "plain") == 1)
            let warnings = self.lines(harness, containing: "upstream connect failed")
            #expect(warnings.count == 1, "\(warnings)")
            #expect(warnings.first?.contains("error=TLS handshake not completed within connect_timeout") == true, "\(warnings)")
            #expect(warnings.first?.contains("request_id=plain-probe") == true, "\(warnings)")
            #expect(self.lines(harness, containing: "request_id=plain-probe").contains { $0.contains("reason=upstream_connect_failed") })
        } catch {
            try? await backend.stop()
            await harness.stop()
            throw error
        }
        try? await backend.stop()
        await harness.stop()
    }

    /// A backend that is down: the first failed connect is logged at once, the rest of the second's only counted.
    @Test func aDeadBackendIsLoggedOncePerSecondNotOncePerRequest() async throws {
        let closedPort = try Self.unusedPort()
        try await self.withGateway(
            routes: """
                  - { path_prefix: /, upstream: dead, accept: none }
                """,
            upstreams: """
                  dead: { targets: [ "http://127.0.0.1:\(closedPort)" ], connect_timeout: 1s, retries: 0, ejection: { consecutive_failures: 1000 } }
                """
        ) { gateway in
            var arguments = ["-sS", "--max-time", "20", "--cacert", gateway.certificatePath, "-w", "%{http_code}\n", "-H", "X-Request-Id: dead-probe"]
            for index in 0..<40 {
                arguments += ["-o", "/dev/null", "\(gateway.baseURL)/r\(index)"]
            }
            let start = ContinuousClock.now
            let (_, stdout, _) = try Curl.process("/usr/bin/curl", arguments)
            let elapsed = ContinuousClock.now - start
            #expect(stdout.split(separator: "\n") == Array(repeating: "502", count: 40), "\(stdout)")
            #expect(self.upstreamConnectFailures(gateway, upstream: "dead") == 40)
            let warnings = self.lines(gateway, containing: "upstream connect failed")
            // One line per started second at most (the 40 requests take well under a second on loopback).
            let seconds = Int(elapsed.components.seconds) + 1
            #expect(!warnings.isEmpty && warnings.count <= seconds, "\(warnings.count) lines in \(elapsed)")
            #expect(warnings.first?.contains("failures=1") == true && warnings.first?.contains("request_id=dead-probe") == true, "\(warnings)")
        }
    }
}

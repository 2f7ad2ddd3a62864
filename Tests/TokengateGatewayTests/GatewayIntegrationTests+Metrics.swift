//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Glibc
import Testing

@testable import TokengateGateway

/// The metrics an operator watches besides the requests: connections by protocol, held open by the real
/// `openssl s_client`; the certificate's expiry, as `openssl x509` reads it from the same file; the process.
extension GatewayIntegrationTests {
    /// The value of the sample `series` (name and labels, exactly as exposed), or nil when absent.
    private static func value(_ series: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    /// Waits (up to 10 s) until every series has its expected value; returns the last exposition.
    private func awaitSeries(_ gateway: GatewayHarness, _ expected: [String: Double]) async throws -> String {
        var text = ""
        for _ in 0..<100 {
            text = gateway.server.metrics.render()
            if expected.allSatisfy({ Self.value($0.key, in: text) == $0.value }) { return text }
            try await Task.sleep(for: .milliseconds(100))
        }
        return text
    }

    @Test func openConnectionsAreCountedByListenerAndProtocol() async throws {
        try await self.withGateway { gateway in
            func series(_ port: Int, _ proto: String) -> String {
                #"tokengate_open_connections{listener="127.0.0.1:\#(port)",protocol="\#(proto)"}"#
            }
            // Held open: an h2 and an http/1.1 client after their handshakes, and one that never starts its own.
            var clients: [Process] = []
            for alpn in ["h2", "http/1.1"] {
                let client = Process()
                client.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
                client.arguments = ["s_client", "-connect", "127.0.0.1:\(gateway.tlsPort)", "-alpn", alpn, "-quiet", "-servername", "localhost"]
                client.standardInput = Pipe()
                client.standardOutput = FileHandle.nullDevice
                client.standardError = FileHandle.nullDevice
                try client.run()
                clients.append(client)
            }
            let silent = try SocketProbe.connectSilently(port: gateway.tlsPort)
            let plain = try SocketProbe.connectSilently(port: gateway.plainPort)
            let expected = [
                series(gateway.tlsPort, "h2"): 1.0, series(gateway.tlsPort, "http/1.1"): 1, series(gateway.tlsPort, "tls_handshake"): 1,
                series(gateway.plainPort, "http/1.1"): 1,
            ]
            let open = try await self.awaitSeries(gateway, expected)
            for (name, value) in expected {
                #expect(Self.value(name, in: open) == value, "\(name): \(open)")
            }
            // Both listeners were configured on port 0: each is labelled with the port it was bound to.
            let all = open.split(separator: "\n").filter { $0.hasPrefix("tokengate_open_connections{") }
            #expect(all.count == 4, "tls: handshake, h2, http/1.1; plain: http/1.1 — \(all)")
            // SIGKILL: `s_client -quiet` ignores the end of its input, and a SIGTERM was seen to leave it running.
            for client in clients {
                kill(client.processIdentifier, SIGKILL)
                client.waitUntilExit()
            }
            close(silent)
            close(plain)
            let closed = try await self.awaitSeries(gateway, expected.mapValues { _ in 0 })
            let remaining = closed.split(separator: "\n").filter { $0.hasPrefix("tokengate_open_connections{") && !$0.hasSuffix(" 0.0") }
            #expect(remaining.isEmpty, "every connection closed is uncounted: \(remaining)")
        }
    }

    @Test func theServedCertificatesExpiryIsItsNotAfter() async throws {
        try await self.withGateway { gateway in
            let (status, stdout, _) = try Curl.process("/usr/bin/openssl", ["x509", "-noout", "-enddate", "-in", gateway.certificatePath])
            #expect(status == 0)
            let date = stdout.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "notAfter=", with: "")
            let (_, epoch, _) = try Curl.process("/usr/bin/date", ["-u", "-d", date, "+%s"])
            let notAfter = try #require(Double(epoch.trimmingCharacters(in: .whitespacesAndNewlines)), "\(date)")
            let text = gateway.server.scrapeTimeExposition()
            let series = #"tokengate_tls_certificate_expiry_timestamp_seconds{listener="127.0.0.1:0",certificate="cert.pem"}"#
            #expect(Self.value(series, in: text) == notAfter, "\(text)")
            #expect(text.contains("# TYPE tokengate_tls_certificate_expiry_timestamp_seconds gauge"))
        }
    }

    /// The `process_*` family, against what the kernel says about this process (the harness runs the gateway
    /// in the test process).
    @Test func processMetricsDescribeThisProcess() throws {
        let text = ProcessMetrics.exposition()
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        #expect(Self.value("process_max_fds", in: text) == Double(Int(clamping: limit.rlim_cur)), "\(text)")
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let rssKiB = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Double($0.split(separator: " ").dropFirst().first ?? "") }
        let rss = try #require(Self.value("process_resident_memory_bytes", in: text))
        #expect(rss > 0 && rssKiB.map { rss > $0 * 1024 / 2 && rss < $0 * 1024 * 2 } == true, "rss \(rss), VmRSS \(rssKiB ?? -1) KiB")
        #expect((Self.value("process_open_fds", in: text) ?? 0) >= 3, "stdin, stdout, stderr at least")
        let started = try #require(Self.value("process_start_time_seconds", in: text))
        #expect(started <= Date().timeIntervalSince1970 + 1 && started > 1_600_000_000, "\(started)")
        #expect((Self.value("process_cpu_seconds_total", in: text) ?? -1) >= 0)
        for name in ["process_cpu_seconds_total", "process_open_fds", "process_start_time_seconds"] {
            #expect(text.contains("# HELP \(name) ") && text.contains("# TYPE \(name) "), "\(name)")
        }
    }
}

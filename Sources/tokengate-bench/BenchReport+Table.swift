//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

extension BenchReport {
    /// The readable form: what ran, throughput, latency percentiles, answers per kind, errors, CPU and memory.
    var table: String {
        var lines: [String] = []
        let rate = self.targetRate.map { " at \(Self.number($0, 0)) req/s" } ?? ""
        lines.append(
            "tokengate-bench  \(self.target)  HTTP/\(self.httpVersion) \(self.protocol) "
                + "(ALPN \(self.alpn ?? "none"), \(self.tlsVersion ?? "?"))"
        )
        let streams = self.streamsPerConnection > 1 ? " × \(self.streamsPerConnection) streams" : ""
        lines.append(
            "  \(self.mode)\(rate), \(self.connections) connections\(streams), \(self.threads) thread(s), "
                + "\(Self.number(self.durationSeconds, 2)) s, \(self.usersPerKind) users per kind, "
                + "keys \(self.algorithms.joined(separator: "+"))"
        )
        lines.append("  mix \(self.mix)")
        if !self.extraFields.isEmpty {
            lines.append("  fields \(self.extraFields.joined(separator: ", ")) on every request")
        }
        lines.append("")
        lines.append(
            "  requests   \(self.requestsCompleted) completed of \(self.requestsSent) sent, "
                + "\(Self.number(self.requestsPerSecond, 0)) req/s"
        )
        let l = self.latencyMicros
        lines.append("  latency    " + self.latencyHeader)
        lines.append(
            "  (ms)       " + [l.p50, l.p90, l.p99, l.p999, l.max].map { Self.millis($0) }.joined()
                + Self.pad(Self.number(l.mean / 1000, 3), 10)
        )
        if let lag = self.sendLagMicros, lag.count > 0 {
            lines.append(
                "  send lag   \(lag.count) sends over 1 ms late; p50 \(Self.millis(lag.p50).trimmingSpaces) ms, "
                    + "max \(Self.millis(lag.max).trimmingSpaces) ms (client or server saturated)"
            )
        }
        lines.append("")
        lines.append("  kind            sent   expect  answers")
        for kind in BenchTokenKind.allCases {
            guard let result = self.kinds[kind.rawValue] else { continue }
            let answers = result.statuses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
            let flag = result.unexpected > 0 ? "   <-- \(result.unexpected) unexpected" : ""
            lines.append(
                "  " + kind.rawValue.padding(toLength: 14, withPad: " ", startingAt: 0)
                    + Self.pad(String(result.sent), 6) + Self.pad(String(result.expectedStatus), 9) + "  "
                    + answers.joined(separator: ", ") + flag
            )
        }
        if !self.errors.isEmpty || self.reconnects > 0 {
            lines.append("")
            lines.append("  errors     " + (self.errors.isEmpty ? "none" : ""))
            for (name, count) in self.errors.sorted(by: { $0.key < $1.key }) {
                lines.append("    \(count)  \(name)")
            }
            lines.append("  reconnects \(self.reconnects)")
        }
        lines.append("")
        if let gateway = self.gateway {
            lines.append("  gateway    " + Self.describe(gateway))
        }
        lines.append("  client     " + Self.describe(self.client))
        return lines.joined(separator: "\n") + "\n"
    }

    private var latencyHeader: String {
        ["p50", "p90", "p99", "p99.9", "max", "mean"].map { Self.pad($0, 10) }.joined()
    }

    private static func describe(_ process: ProcessResult) -> String {
        let perRequest = process.cpuMicrosPerRequest.map { Self.number($0, 1) + " µs CPU/request, " } ?? ""
        let pids = process.pids.map(String.init).joined(separator: ",")
        return "pid \(pids): \(perRequest)\(Self.number(process.cpuCores, 2)) cores busy, RSS "
            + "\(process.rssKiBBefore / 1024) → \(process.rssKiBAfter / 1024) MiB (peak \(process.peakRSSKiB / 1024) MiB)"
    }

    private static func millis(_ micros: UInt64) -> String {
        Self.pad(Self.number(Double(micros) / 1000, 3), 10)
    }

    static func number(_ value: Double, _ decimals: Int) -> String {
        String(format: "%.\(decimals)f", value)
    }

    /// `text` right-aligned in `width` columns, and always at least one space before it.
    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? " " + text : String(repeating: " ", count: width - text.count) + text
    }
}

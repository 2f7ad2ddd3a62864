//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// What `tokengate-bench idle` measured: the gateway's memory at each stage and the connections open then,
/// and from those the memory per idle connection.
struct IdleReport: Sendable, Codable {
    /// One reading: how many bench connections were open and the gateway's memory (nil without --gateway-pid).
    struct Stage: Sendable, Codable {
        let name: String
        let openConnections: Int
        let memory: GatewayMemory?
    }

    /// KiB per connection between two stages, for VmRSS and RssAnon.
    struct PerConnection: Sendable, Codable {
        let from: String
        let to: String
        let connections: Int
        let rssKiB: Double
        let anonKiB: Double

        /// Spelled out: the JSON report's snake_case conversion would turn `rssKiB` into `rss_ki_b`.
        enum CodingKeys: String, CodingKey {
            case from, to, connections
            case rssKiB = "rss_kib"
            case anonKiB = "anon_kib"
        }
    }

    let target: String
    let httpVersion: String
    let connectionsRequested: Int
    let sourceAddresses: [String]
    let warmupConnections: Int
    /// Answers to the one request per connection, by status.
    let statuses: [String: Int]
    /// Connections that never got their answer, by reason.
    let failures: [String: Int]
    let openSeconds: Double
    let settleSeconds: Double
    let holdSeconds: Double
    let stages: [Stage]
    /// Connections the gateway closed between the idle reading and the end of the hold.
    let closedDuringHold: Int
    /// Seconds after the idle reading when the first of those closes arrived.
    let firstCloseAfterSeconds: Double?
    let perConnection: [PerConnection]

    init(
        target: String,
        httpVersion: String,
        connectionsRequested: Int,
        sourceAddresses: [String],
        warmupConnections: Int,
        statuses: [String: Int],
        failures: [String: Int],
        openSeconds: Double,
        settleSeconds: Double,
        holdSeconds: Double,
        stages: [Stage],
        closedDuringHold: Int,
        firstCloseAfterSeconds: Double?
    ) {
        self.target = target
        self.httpVersion = httpVersion
        self.connectionsRequested = connectionsRequested
        self.sourceAddresses = sourceAddresses
        self.warmupConnections = warmupConnections
        self.statuses = statuses
        self.failures = failures
        self.openSeconds = openSeconds
        self.settleSeconds = settleSeconds
        self.holdSeconds = holdSeconds
        self.stages = stages
        self.closedDuringHold = closedDuringHold
        self.firstCloseAfterSeconds = firstCloseAfterSeconds
        // The headline: (idle − before) ÷ connections open at the idle reading; the same at the end of the
        // hold; and the marginal cost between half and all, which leaves out whatever the first connections
        // pay once (lazily initialised state, code pages, the upstream connection, malloc arena growth).
        var figures: [PerConnection] = []
        for (from, to) in [("before", "idle"), ("before", "end"), ("half", "idle")] {
            if let figure = Self.perConnection(from: from, to: to, stages: stages) {
                figures.append(figure)
            }
        }
        self.perConnection = figures
    }

    private static func perConnection(from: String, to: String, stages: [Stage]) -> PerConnection? {
        guard let first = stages.first(where: { $0.name == from }), let second = stages.first(where: { $0.name == to }),
            let a = first.memory, let b = second.memory
        else {
            return nil
        }
        let connections = second.openConnections - first.openConnections
        guard connections > 0 else { return nil }
        return PerConnection(
            from: from,
            to: to,
            connections: connections,
            rssKiB: (Double(b.rssKiB) - Double(a.rssKiB)) / Double(connections),
            anonKiB: (Double(b.anonKiB) - Double(a.anonKiB)) / Double(connections)
        )
    }

    var table: String {
        var lines: [String] = []
        let answered = self.statuses.values.reduce(0, +)
        let statusText = self.statuses.sorted { $0.key < $1.key }.map { "\($0.value)×\($0.key)" }
            .joined(separator: ", ")
        let sources = self.sourceAddresses.joined(separator: ", ")
        let opening = BenchReport.number(self.openSeconds, 1)
        lines.append("target            \(self.target) (HTTP/\(self.httpVersion))")
        lines.append("connections       \(self.connectionsRequested) requested from \(sources)")
        lines.append("answers           \(answered) (\(statusText.isEmpty ? "none" : statusText)) in \(opening) s")
        for (reason, count) in self.failures.sorted(by: { $0.value > $1.value }) {
            lines.append("failed            \(count)× \(reason)")
        }
        lines.append(
            "hold              \(BenchReport.number(self.holdSeconds, 0)) s idle "
                + "(after \(BenchReport.number(self.settleSeconds, 0)) s to settle); "
                + "closed by the gateway meanwhile: \(self.closedDuringHold)"
                + (self.firstCloseAfterSeconds.map { " (first after \(BenchReport.number($0, 1)) s)" } ?? "")
        )
        lines.append("")
        lines.append("stage          open   VmRSS MiB  RssAnon MiB  RssFile MiB")
        for stage in self.stages {
            let name = stage.name.padding(toLength: 12, withPad: " ", startingAt: 0)
            let open = BenchReport.pad(String(stage.openConnections), 7)
            if let memory = stage.memory {
                lines.append(
                    name + open + BenchReport.pad(Self.mebibytes(memory.rssKiB), 12)
                        + BenchReport.pad(Self.mebibytes(memory.anonKiB), 13)
                        + BenchReport.pad(Self.mebibytes(memory.fileKiB), 13)
                )
            } else {
                lines.append(name + open + "   (no --gateway-pid)")
            }
        }
        if !self.perConnection.isEmpty {
            lines.append("")
            lines.append("per connection    connections   VmRSS KiB  RssAnon KiB")
            for figure in self.perConnection {
                let name = "\(figure.from)→\(figure.to)".padding(toLength: 16, withPad: " ", startingAt: 0)
                lines.append(
                    name + BenchReport.pad(String(figure.connections), 13)
                        + BenchReport.pad(BenchReport.number(figure.rssKiB, 1), 12)
                        + BenchReport.pad(BenchReport.number(figure.anonKiB, 1), 13)
                )
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    func json() throws -> Data {
        try BenchReport.json(self)
    }

    private static func mebibytes(_ kibibytes: UInt64) -> String {
        BenchReport.number(Double(kibibytes) / 1024, 1)
    }
}

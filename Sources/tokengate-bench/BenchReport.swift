//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Histogram

/// The result of a run, as written by `--json` (stable member names; times in microseconds unless named
/// otherwise) and printed as a table.
struct BenchReport: Codable, Sendable {
    struct Latency: Codable, Sendable {
        let p50: UInt64
        let p90: UInt64
        let p99: UInt64
        let p999: UInt64
        let max: UInt64
        let mean: Double
        let count: UInt64

        init(_ histogram: Histogram<UInt64>) {
            self.p50 = histogram.valueAtPercentile(50)
            self.p90 = histogram.valueAtPercentile(90)
            self.p99 = histogram.valueAtPercentile(99)
            self.p999 = histogram.valueAtPercentile(99.9)
            self.max = histogram.max
            self.mean = histogram.totalCount == 0 ? 0 : histogram.mean
            self.count = histogram.totalCount
        }
    }

    struct KindResult: Codable, Sendable {
        let sent: Int
        let expectedStatus: Int
        /// Status code (as a string, for JSON) to count.
        let statuses: [String: Int]
        let unexpected: Int
    }

    struct ProcessResult: Codable, Sendable {
        let pids: [Int32]
        let cpuSeconds: Double
        /// CPU time per completed request; null without requests.
        let cpuMicrosPerRequest: Double?
        /// Average cores busy over the run.
        let cpuCores: Double
        let rssKiBBefore: UInt64
        let rssKiBAfter: UInt64
        let peakRSSKiB: UInt64
    }

    let tool: String
    let target: String
    let httpVersion: String
    /// `h2` or `http/1.1`: the protocol the run required (and ALPN gave).
    let `protocol`: String
    let alpn: String?
    let tlsVersion: String?
    let mode: String
    let targetRate: Double?
    let connections: Int
    /// Requests in flight per connection at most (HTTP/2 streams; 1 on HTTP/1.1).
    let streamsPerConnection: Int
    let threads: Int
    let durationSeconds: Double
    let mix: String
    /// Fields sent on every request besides the bench's own (`--header`), by name.
    let extraFields: [String]
    let usersPerKind: Int
    let algorithms: [String]
    let requestsSent: Int
    let requestsCompleted: Int
    let requestsPerSecond: Double
    /// Closed loop: from send to answer. Fixed rate: from the intended send time to answer.
    let latencyMicros: Latency
    /// Fixed rate: sends that left over 1 ms late, and by how much.
    let sendLagMicros: Latency?
    let statuses: [String: Int]
    let kinds: [String: KindResult]
    let unexpectedStatuses: Int
    let errors: [String: Int]
    let reconnects: Int
    let gateway: ProcessResult?
    let client: ProcessResult

    init(outcome: LoadRunner.Outcome, shared: LoadShared, expected: [BenchTokenKind: Int], gatewayPIDs: [Int32]) {
        let stats = outcome.stats
        let plan = shared.plan
        self.tool = "tokengate-bench"
        self.target = shared.target.description
        self.httpVersion = plan.wireProtocol.rawValue
        self.protocol = plan.wireProtocol.alpn
        self.alpn = outcome.alpn
        self.tlsVersion = outcome.tlsVersion
        self.mode = plan.modeName
        self.targetRate = plan.rate
        self.connections = plan.connections
        self.streamsPerConnection = plan.streams
        self.threads = plan.threads
        self.durationSeconds = outcome.elapsedSeconds
        self.mix = shared.pool.mix.description
        self.extraFields = shared.pool.extraFieldNames
        self.usersPerKind = shared.pool.usersPerKind
        self.algorithms = shared.pool.algorithms
        self.requestsSent = stats.sent.reduce(0, +)
        let completed = stats.completed
        self.requestsCompleted = completed
        self.requestsPerSecond = outcome.elapsedSeconds > 0 ? Double(completed) / outcome.elapsedSeconds : 0
        self.latencyMicros = Latency(stats.latency)
        self.sendLagMicros = plan.rate == nil ? nil : Latency(stats.sendLag)
        var statuses: [String: Int] = [:]
        var kinds: [String: KindResult] = [:]
        var unexpectedTotal = 0
        for kind in BenchTokenKind.allCases where stats.sent[kind.index] > 0 || !stats.statuses[kind.index].isEmpty {
            let counts = stats.statuses[kind.index]
            let expectedStatus = expected[kind] ?? kind.defaultExpectedStatus
            let unexpected = counts.filter { $0.key != expectedStatus }.values.reduce(0, +)
            unexpectedTotal += unexpected
            for (status, count) in counts { statuses[String(status), default: 0] += count }
            kinds[kind.rawValue] = KindResult(
                sent: stats.sent[kind.index],
                expectedStatus: expectedStatus,
                statuses: Dictionary(uniqueKeysWithValues: counts.map { (String($0.key), $0.value) }),
                unexpected: unexpected
            )
        }
        self.statuses = statuses
        self.kinds = kinds
        self.unexpectedStatuses = unexpectedTotal
        self.errors = stats.errors
        self.reconnects = stats.reconnects
        self.gateway =
            gatewayPIDs.isEmpty
            ? nil
            : Self.process(
                pids: gatewayPIDs,
                before: outcome.gatewayBefore,
                after: outcome.gatewayAfter,
                completed: completed,
                seconds: outcome.elapsedSeconds
            )
        self.client = Self.process(
            pids: [ProcessInfo.processInfo.processIdentifier],
            before: [outcome.clientBefore],
            after: [outcome.clientAfter],
            completed: completed,
            seconds: outcome.elapsedSeconds
        )
    }

    private static func process(
        pids: [Int32],
        before: [ProcessUsage],
        after: [ProcessUsage],
        completed: Int,
        seconds: Double
    ) -> ProcessResult {
        let cpuMicros = zip(before, after).reduce(UInt64(0)) { $0 + ($1.1.cpuMicros &- $1.0.cpuMicros) }
        let cpuSeconds = Double(cpuMicros) / 1e6
        return ProcessResult(
            pids: pids,
            cpuSeconds: cpuSeconds,
            cpuMicrosPerRequest: completed > 0 ? Double(cpuMicros) / Double(completed) : nil,
            cpuCores: seconds > 0 ? cpuSeconds / seconds : 0,
            rssKiBBefore: before.reduce(0) { $0 + $1.rssKiB },
            rssKiBAfter: after.reduce(0) { $0 + $1.rssKiB },
            peakRSSKiB: after.reduce(0) { $0 + $1.peakRSSKiB }
        )
    }

    func json() throws -> Data {
        try Self.json(self)
    }

    /// The bench's JSON reports (`run`'s and `idle`'s): pretty, sorted, snake_case keys, a final newline.
    static func json(_ report: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        var data = try encoder.encode(report)
        data.append(UInt8(ascii: "\n"))
        return data
    }
}

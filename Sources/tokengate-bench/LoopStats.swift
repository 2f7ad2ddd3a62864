//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Histogram

/// What the connections of one event loop measured. Confined to that loop: recording takes no lock.
final class LoopStats {
    /// Microseconds, up to a minute (auto-resizing past it rather than dropping a value).
    var latency = LoopStats.makeHistogram()
    /// Per kind (BenchTokenKind/index): answers by status.
    var statuses = [[Int: Int]](repeating: [:], count: BenchTokenKind.allCases.count)
    var sent = [Int](repeating: 0, count: BenchTokenKind.allCases.count)
    var errors: [String: Int] = [:]
    var reconnects = 0
    /// Monotonic time of the last answer: the end of the measured interval.
    var lastAnswerAt: UInt64 = 0
    /// Fixed rate: how late sends left relative to their intended time (µs), the sign of a saturated client
    /// or server.
    var sendLag = LoopStats.makeHistogram()

    static func makeHistogram() -> Histogram<UInt64> {
        var histogram = Histogram<UInt64>(
            lowestDiscernibleValue: 1,
            highestTrackableValue: 60_000_000,
            numberOfSignificantValueDigits: .three
        )
        histogram.autoResize = true
        return histogram
    }

    func record(kind: Int, status: Int, micros: UInt64) {
        _ = self.latency.record(max(micros, 1))
        self.statuses[kind][status, default: 0] += 1
    }

    func error(_ name: String, count: Int = 1) {
        self.errors[name, default: 0] += count
    }

    var snapshot: StatsSnapshot {
        StatsSnapshot(
            latency: self.latency,
            sendLag: self.sendLag,
            statuses: self.statuses,
            sent: self.sent,
            errors: self.errors,
            reconnects: self.reconnects,
            lastAnswerAt: self.lastAnswerAt
        )
    }
}

/// A copy of LoopStats that can leave its loop; snapshots of all loops merge into one.
struct StatsSnapshot: Sendable {
    var latency: Histogram<UInt64>
    var sendLag: Histogram<UInt64>
    var statuses: [[Int: Int]]
    var sent: [Int]
    var errors: [String: Int]
    var reconnects: Int
    var lastAnswerAt: UInt64

    static var empty: StatsSnapshot {
        StatsSnapshot(
            latency: LoopStats.makeHistogram(),
            sendLag: LoopStats.makeHistogram(),
            statuses: [[Int: Int]](repeating: [:], count: BenchTokenKind.allCases.count),
            sent: [Int](repeating: 0, count: BenchTokenKind.allCases.count),
            errors: [:],
            reconnects: 0,
            lastAnswerAt: 0
        )
    }

    mutating func merge(_ other: StatsSnapshot) {
        self.latency.add(other.latency)
        self.sendLag.add(other.sendLag)
        for kind in self.statuses.indices {
            self.statuses[kind].merge(other.statuses[kind], uniquingKeysWith: +)
            self.sent[kind] += other.sent[kind]
        }
        self.errors.merge(other.errors, uniquingKeysWith: +)
        self.reconnects += other.reconnects
        self.lastAnswerAt = max(self.lastAnswerAt, other.lastAnswerAt)
    }

    var completed: Int {
        self.statuses.reduce(0) { $0 + $1.values.reduce(0, +) }
    }
}

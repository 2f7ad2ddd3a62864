//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import NIOConcurrencyHelpers

/// The active health of one upstream's targets, as the health checker last published it: written by the
/// checker on its event loop, read by every loop's ``UpstreamPool`` on the request path.
///
/// The request path reads one relaxed atomic per target it considers, and takes no lock: each flag is its own
/// `ManagedAtomic`, and a count of healthy targets says when every one is down. Then the flags are not obeyed
/// (``isUsable(_:)`` is true for all): a health path that breaks everywhere at once — a deploy that removed it,
/// a check that is misconfigured — must not refuse every request of an upstream whose backends may be serving.
/// Passive ejection (`ejection:`) still applies then, as without health checks.
///
/// What the admin endpoint shows beyond the flags (the last result, the counts) is kept under a lock that only
/// the checker and the admin endpoint take.
final class UpstreamTargetHealth: Sendable {
    /// What the admin endpoint and the metric show of one target.
    struct Report: Sendable {
        var target: String
        var healthy: Bool
        /// The last check's outcome (`status 200`, `connect failed: …`); `nil` before the first check ended.
        var lastResult: String?
        var lastPassed: Bool?
        var successesInARow = 0
        var failuresInARow = 0
    }

    let upstream: String
    private let healthy: [ManagedAtomic<Bool>]
    private let healthyCount: ManagedAtomic<Int>
    private let reports: NIOLockedValueBox<[Report]>

    /// - Parameter initiallyHealthy: per target; all healthy when `nil`.
    init(upstream: String, targets: [String], initiallyHealthy: [Bool]? = nil) {
        let flags = initiallyHealthy ?? Array(repeating: true, count: targets.count)
        precondition(flags.count == targets.count)
        self.upstream = upstream
        self.healthy = flags.map { ManagedAtomic($0) }
        self.healthyCount = ManagedAtomic(flags.filter { $0 }.count)
        self.reports = NIOLockedValueBox(zip(targets, flags).map { Report(target: $0, healthy: $1) })
    }

    var targetCount: Int { self.healthy.count }

    /// Whether a request may go to target `index`: it is healthy, or no target of the upstream is.
    @inline(__always)
    func isUsable(_ index: Int) -> Bool {
        self.healthy[index].load(ordering: .relaxed) || self.healthyCount.load(ordering: .relaxed) == 0
    }

    func isHealthy(_ index: Int) -> Bool {
        self.healthy[index].load(ordering: .relaxed)
    }

    /// The checker's result for target `index`: `state` after the check, and what the check found.
    func publish(_ index: Int, state: TargetHealthState, result: String, passed: Bool) {
        let was = self.healthy[index].exchange(state.isHealthy, ordering: .relaxed)
        if was != state.isHealthy {
            self.healthyCount.wrappingIncrement(by: state.isHealthy ? 1 : -1, ordering: .relaxed)
        }
        self.reports.withLockedValue { reports in
            reports[index].healthy = state.isHealthy
            reports[index].lastResult = result
            reports[index].lastPassed = passed
            reports[index].successesInARow = state.successesInARow
            reports[index].failuresInARow = state.failuresInARow
        }
    }

    var snapshot: [Report] { self.reports.withLockedValue { $0 } }
}

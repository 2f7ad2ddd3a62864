//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers
import Prometheus

/// The `forward_auth` listeners' metrics: checks by route and outcome, and how long they took. Kept apart from
/// `tokengate_requests_total` and `tokengate_rejections_total`, which count requests the gateway proxied or
/// refused itself: a check is neither, and a site with both listener kinds must be able to tell them apart.
///
/// Series are made on a route's first check with that outcome (`allowed`, or the reason code of the refusal,
/// `other` for one that is not listed), at most ``maxSeries`` of them; past that a check counts under route
/// `other`. Nothing of the request names a series: the route comes from the configuration, the outcome from
/// the gateway's fixed list.
final class ForwardAuthMetrics: Sendable {
    static let maxSeries = 2000

    enum Help {
        static let checks = "Checks answered for front proxies (forward_auth listeners), by route and outcome (allowed, or the reason)."
        static let duration = "Time from a check request's head to its answer."
    }

    /// The reasons a check has its own series for: those of proxied requests and the check endpoint's own.
    static let listedReasons: Set<String> = GatewayMetrics.listedReasons.union(["untrusted_peer", "check_malformed", "tls_required"])

    private let registry: MetricsRegistry
    private let counters = NIOLockedValueBox<[String: Prometheus.Counter]>([:])
    private let latency = NIOLockedValueBox<Prometheus.DurationHistogram?>(nil)

    init(registry: MetricsRegistry) {
        self.registry = registry
    }

    /// Counts one answered check. `route` is the matched route's name, or `-` when none matched (or the check
    /// was refused before routing).
    func record(route: String, status: UInt, reason: String, nanoseconds: Int64) {
        let outcome = status < 300 ? "allowed" : (Self.listedReasons.contains(reason) ? reason : "other")
        let key = route + "\u{0}" + outcome
        let counter = self.counters.withLockedValue { counters in
            if let counter = counters[key] { return counter }
            let labels = counters.count < Self.maxSeries ? [("route", route), ("outcome", outcome)] : [("route", "other"), ("outcome", "other")]
            let counter = self.registry.counter("tokengate_forward_auth_checks_total", labels: labels, help: Help.checks)
            if counters.count < Self.maxSeries { counters[key] = counter }
            return counter
        }
        counter.increment()
        let histogram = self.latency.withLockedValue { histogram in
            if let histogram { return histogram }
            let made = self.registry.durationHistogram(
                "tokengate_forward_auth_check_duration_seconds", labels: [], buckets: GatewayMetrics.durationBuckets, help: Help.duration)
            histogram = made
            return made
        }
        histogram.recordNanoseconds(nanoseconds)
    }
}

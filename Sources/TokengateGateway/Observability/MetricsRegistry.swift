//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers
import Prometheus
import TokengateHTTP

/// What the process's metrics keep across reloads: the Prometheus registry `/metrics` renders, and the budget
/// of `tokengate_rejections_total` series.
///
/// Metrics are made on the registry directly, each with its `# HELP` text, rather than through swift-metrics'
/// `CoreMetrics` types and swift-prometheus's factory: that path has no place for a help text, and the
/// exposition lost every `# HELP` line. Each generation's ``GatewayMetrics`` asks the same registry, which
/// hands back the series an earlier generation made under the same name and labels, so counts go on across a
/// reload.
public final class MetricsRegistry: Sendable {
    public let prometheus: PrometheusCollectorRegistry
    /// The distinct (route, reason) pairs with a rejection series, across every generation.
    private let rejectionPairs: NIOLockedValueBox<Set<RejectionPair>>
    /// The most `tokengate_rejections_total` series with a listed reason; past it, a new pair is counted under
    /// its route's `other` (one per route, so never more than the route table's size besides).
    let maxRejectionSeries: Int

    private struct RejectionPair: Hashable {
        let route: String
        let reason: String
    }

    public init(maxRejectionSeries: Int = 1_000) {
        self.prometheus = PrometheusCollectorRegistry()
        self.rejectionPairs = NIOLockedValueBox([])
        self.maxRejectionSeries = maxRejectionSeries
    }

    /// Whether the pair may have a series of its own: it has one, or the budget has room for it (then it is
    /// taken).
    func admitRejectionSeries(route: String, reason: String) -> Bool {
        self.rejectionPairs.withLockedValue { pairs in
            let pair = RejectionPair(route: route, reason: reason)
            if pairs.contains(pair) { return true }
            guard pairs.count < self.maxRejectionSeries else { return false }
            pairs.insert(pair)
            return true
        }
    }

    /// The counter `name` with `labels` (made on first call, the same one after), with its help text.
    func counter(_ name: String, labels: [(String, String)] = [], help: String) -> Prometheus.Counter {
        self.prometheus.makeCounter(descriptor: Self.descriptor(name, help), labels: labels)
    }

    func gauge(_ name: String, labels: [(String, String)] = [], help: String) -> Prometheus.Gauge {
        self.prometheus.makeGauge(descriptor: Self.descriptor(name, help), labels: labels)
    }

    func durationHistogram(_ name: String, labels: [(String, String)], buckets: [Duration], help: String) -> Prometheus.DurationHistogram {
        self.prometheus.makeDurationHistogram(descriptor: Self.descriptor(name, help), labels: labels, buckets: buckets)
    }

    /// The whole name as the descriptor's metric name: the gateway's names are written out where they are used,
    /// so that a search for one finds it.
    private static func descriptor(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    /// The Prometheus text exposition of every series the registry holds.
    func render() -> String {
        self.prometheus.emitToString()
    }
}

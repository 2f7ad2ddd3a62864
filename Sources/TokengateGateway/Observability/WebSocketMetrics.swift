//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Prometheus

/// The WebSocket tunnels' series: how many are open now, and why each one ended. A count of closes by
/// `revoked` shows the revocations reaching open tunnels; `idle_timeout` rising shows clients or backends
/// that stop their pings.
final class WebSocketMetrics: Sendable {
    let open: Prometheus.Gauge
    private let closed: [String: Prometheus.Counter]

    init(registry: MetricsRegistry) {
        self.open = registry.gauge("tokengate_websocket_tunnels_open", help: "WebSocket tunnels open now.")
        self.closed = Dictionary(
            uniqueKeysWithValues: WebSocketTunnel.CloseReason.allCases.map {
                (
                    $0.rawValue,
                    registry.counter(
                        "tokengate_websocket_tunnels_closed_total", labels: [("reason", $0.rawValue)],
                        help: "WebSocket tunnels ended, by why they ended.")
                )
            })
    }

    func opened() {
        self.open.increment()
    }

    func closed(_ reason: WebSocketTunnel.CloseReason) {
        self.open.decrement()
        self.closed[reason.rawValue]?.increment()
    }
}

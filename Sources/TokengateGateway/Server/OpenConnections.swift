//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import NIOCore
import Prometheus
import TokengateConfig
import TokengateHTTP

/// `tokengate_open_connections{listener, protocol}`: the public listeners' connections open now, by the
/// protocol they speak — `tls_handshake` until ALPN has chosen, then `h2` or `http/1.1`. The gauges are the
/// process's (on the registry every generation shares), made at a listener's first connection (``Lazy``).
final class ListenerConnectionGauges: Sendable {
    let handshaking: Prometheus.Gauge
    let http1: Prometheus.Gauge
    let http2: Prometheus.Gauge

    static let help = "Connections open now on a public listener, by listener address and protocol (tls_handshake until ALPN chose)."

    init(listener: String, tls: Bool, registry: MetricsRegistry) {
        func gauge(_ name: String) -> Prometheus.Gauge {
            registry.gauge("tokengate_open_connections", labels: [("listener", listener), ("protocol", name)], help: Self.help)
        }
        self.http1 = gauge("http/1.1")
        // A plain listener has neither: its gauges are the HTTP/1.1 one, so no zero series shows for it.
        self.handshaking = tls ? gauge("tls_handshake") : self.http1
        self.http2 = tls ? gauge("h2") : self.http1
    }

    /// A listener's gauges, made at its first connection: the `listener` label is its configured address, with
    /// the port it was bound to when the configuration said `0` (two listeners on port 0 would share a series).
    final class Lazy: Sendable {
        private let address: SocketAddressSpec
        private let tls: Bool
        private let registry: MetricsRegistry
        private let made = ManagedAtomicLazyReference<ListenerConnectionGauges>()

        init(address: SocketAddressSpec, tls: Bool, registry: MetricsRegistry) {
            self.address = address
            self.tls = tls
            self.registry = registry
        }

        /// The gauges, for a connection accepted on `channel`.
        func gauges(for channel: any Channel) -> ListenerConnectionGauges {
            if let gauges = self.made.load() { return gauges }
            var label = self.address
            if label.port == 0, let bound = channel.localAddress?.port { label.port = bound }
            return self.made.storeIfNilThenLoad(ListenerConnectionGauges(listener: "\(label)", tls: self.tls, registry: self.registry))
        }
    }
}

/// One connection's place in the ``ListenerConnectionGauges``: counted in one gauge from accept to close,
/// moved once when ALPN chooses. Used on the connection's event loop only (its handlers and its
/// `closeFuture` callback).
final class OpenConnectionSlot {
    private var current: Prometheus.Gauge?
    let gauges: ListenerConnectionGauges

    init(_ gauges: ListenerConnectionGauges, tls: Bool) {
        self.gauges = gauges
        let gauge = tls ? gauges.handshaking : gauges.http1
        gauge.increment()
        self.current = gauge
    }

    /// The handshake chose `negotiated` (`h2`, else HTTP/1.1).
    func negotiated(_ negotiated: String?) {
        self.move(to: negotiated == "h2" ? self.gauges.http2 : self.gauges.http1)
    }

    private func move(to gauge: Prometheus.Gauge) {
        guard let current = self.current, current !== gauge else { return }
        current.decrement()
        gauge.increment()
        self.current = gauge
    }

    func closed() {
        self.current?.decrement()
        self.current = nil
    }

    /// Counts `channel` until it closes.
    static func track(_ channel: any Channel, gauges: ListenerConnectionGauges.Lazy, tls: Bool) -> NIOLoopBound<OpenConnectionSlot> {
        let slot = NIOLoopBound(OpenConnectionSlot(gauges.gauges(for: channel), tls: tls), eventLoop: channel.eventLoop)
        channel.closeFuture.whenComplete { _ in slot.value.closed() }
        return slot
    }
}

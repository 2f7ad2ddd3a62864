//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import TokengateHTTP

/// The upstream pools of one event loop, one per configured upstream, indexed like
/// ``GatewayRuntime/upstreams``.
final class LoopUpstreamPools {
    let pools: [UpstreamPool]
    /// This loop's open WebSocket tunnels.
    let tunnels: WebSocketTunnelRegistry

    /// - Parameter failureLogs: one per upstream, shared by every loop.
    init(
        upstreams: [UpstreamSettings],
        eventLoop: any EventLoop,
        logger: Logger,
        metrics: GatewayMetrics,
        failureLogs: [UpstreamConnectFailureLog],
        health: [UpstreamTargetHealth?]
    ) {
        let flushBatch = UpstreamFlushBatch(eventLoop: eventLoop)
        self.tunnels = WebSocketTunnelRegistry(eventLoop: eventLoop)
        self.pools = upstreams.enumerated().map { index, settings in
            UpstreamPool(
                settings: settings,
                eventLoop: eventLoop,
                logger: logger,
                connectFailures: metrics.upstreams[index].connectFailures,
                failureLog: failureLogs[index],
                flushBatch: flushBatch,
                health: health.isEmpty ? nil : health[index]
            )
        }
    }
}

@available(*, unavailable)
extension LoopUpstreamPools: Sendable {}

/// Every event loop's pools, built once at start. Immutable after that, so any thread may look up its
/// loop's entry; the pools themselves are only touched on their own loop.
final class UpstreamPoolDirectory: Sendable {
    /// Holds one loop's pools so the directory can be shared across threads.
    ///
    /// `@unchecked Sendable` because the pools are non-Sendable loop-bound state: the box is created
    /// before any loop runs an exchange and afterwards only dereferenced on `eventLoop` (every pool method
    /// checks `preconditionInEventLoop`). `NIOLoopBound` would say the same but must be created on the
    /// loop, which the synchronous start-up cannot do without blocking on each loop.
    private final class Entry: @unchecked Sendable {
        let eventLoop: any EventLoop
        let pools: LoopUpstreamPools

        init(eventLoop: any EventLoop, pools: LoopUpstreamPools) {
            self.eventLoop = eventLoop
            self.pools = pools
        }
    }

    private let byLoop: [ObjectIdentifier: Entry]

    /// - Parameter health: per upstream, the active health its pools obey (``UpstreamHealthChecker/health``);
    ///   empty when nothing is checked.
    init(
        upstreams: [UpstreamSettings], group: any EventLoopGroup, logger: Logger, metrics: GatewayMetrics,
        health: [UpstreamTargetHealth?] = []
    ) {
        var byLoop: [ObjectIdentifier: Entry] = [:]
        let failureLogs = upstreams.map { upstream in
            UpstreamConnectFailureLog(upstream: upstream.name, targets: upstream.targets.map(\.display), logger: logger)
        }
        for loop in group.makeIterator() {
            let pools = LoopUpstreamPools(
                upstreams: upstreams, eventLoop: loop, logger: logger, metrics: metrics, failureLogs: failureLogs,
                health: health)
            byLoop[ObjectIdentifier(loop)] = Entry(eventLoop: loop, pools: pools)
        }
        self.byLoop = byLoop
    }

    /// The pools of `eventLoop`; call on that loop.
    func pools(for eventLoop: any EventLoop) -> LoopUpstreamPools {
        guard let entry = self.byLoop[ObjectIdentifier(eventLoop)] else {
            preconditionFailure("an event loop outside the gateway's group asked for upstream pools")
        }
        eventLoop.preconditionInEventLoop()
        return entry.pools
    }

    /// The busy connections (``UpstreamPool/busyConnections``) of upstream `index`, summed over the loops.
    func busyConnections(upstream index: Int) async throws -> Int {
        var total = 0
        for entry in self.byLoop.values {
            total += try await entry.eventLoop.submit { entry.pools.pools[index].busyConnections }.get()
        }
        return total
    }

    /// Closes every idle upstream connection (shutdown, reload).
    func closeAll() {
        for entry in self.byLoop.values {
            entry.eventLoop.execute { entry.pools.pools.forEach { $0.closeAll() } }
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers
import NIOCore
import TokengateHTTP

/// The open client connections, for the connection limit and for graceful shutdown.
///
/// Touched once when a connection opens and once when it closes, never per request, so a lock is fine.
///
/// Connections refused at the limit are counted, and ``refusalsToReport(now:)`` hands the count out at most once
/// per ``CapOverflowCounts/reportInterval``, for one warning.
final class ConnectionRegistry: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var limit: Int
        var overflow = CapOverflowCounts()
        /// Set by ``beginDrain()``.
        var draining = false
    }

    private let state: NIOLockedValueBox<State>

    init(limit: Int) {
        self.state = NIOLockedValueBox(State(limit: limit))
    }

    /// `limits.max_connections`; a reload sets it. Lowering it closes nothing: connections over the new limit
    /// stay until they end, and new ones are refused until the count is under it.
    var limit: Int {
        get { self.state.withLockedValue { $0.limit } }
        set { self.state.withLockedValue { $0.limit = newValue } }
    }

    /// Registers `channel`; `false` when the limit is reached (the caller closes the channel), which is counted.
    ///
    /// Called from the listener's child initializer, on the channel's event loop. A connection registered after
    /// ``beginDrain()`` (the listener had accepted it when it was closed) gets the ``GatewayShutdownEvent`` the
    /// others got, on its loop's next turn, after the initializer has set its pipeline up: it is served like
    /// them, and closes after its exchange instead of at the end of the drain.
    func add(_ channel: any Channel) -> Bool {
        let (added, draining) = self.state.withLockedValue { state -> (Bool, Bool) in
            guard state.channels.count < state.limit else {
                state.overflow.refused += 1
                return (false, state.draining)
            }
            state.channels[ObjectIdentifier(channel)] = channel
            return (true, state.draining)
        }
        if added {
            channel.closeFuture.whenComplete { _ in
                self.state.withLockedValue { _ = $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
            }
            if draining {
                channel.eventLoop.execute { channel.pipeline.fireUserInboundEventTriggered(GatewayShutdownEvent()) }
            }
        }
        return added
    }

    /// The drain begins: returns the open connections (the caller tells each), and every connection registered
    /// from now on is told by ``add(_:)``. Under the one lock, so that no connection is told twice or never.
    func beginDrain() -> [any Channel] {
        self.state.withLockedValue { state in
            state.draining = true
            return Array(state.channels.values)
        }
    }

    /// The connections refused since the last report, when there are some and the last report is at least
    /// ``CapOverflowCounts/reportInterval`` old (the caller logs one warning with the count); `nil` otherwise.
    func refusalsToReport(now: NIODeadline = .now()) -> Int? {
        self.state.withLockedValue { $0.overflow.report(now: now)?.refused }
    }

    var count: Int { self.state.withLockedValue { $0.channels.count } }

    var all: [any Channel] { self.state.withLockedValue { Array($0.channels.values) } }
}

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
    func add(_ channel: any Channel) -> Bool {
        let added = self.state.withLockedValue { state -> Bool in
            guard state.channels.count < state.limit else {
                state.overflow.refused += 1
                return false
            }
            state.channels[ObjectIdentifier(channel)] = channel
            return true
        }
        if added {
            channel.closeFuture.whenComplete { _ in
                self.state.withLockedValue { _ = $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
            }
        }
        return added
    }

    /// The connections refused since the last report, when there are some and the last report is at least
    /// ``CapOverflowCounts/reportInterval`` old (the caller logs one warning with the count); `nil` otherwise.
    func refusalsToReport(now: NIODeadline = .now()) -> Int? {
        self.state.withLockedValue { $0.overflow.report(now: now)?.refused }
    }

    var count: Int { self.state.withLockedValue { $0.channels.count } }

    var all: [any Channel] { self.state.withLockedValue { Array($0.channels.values) } }
}

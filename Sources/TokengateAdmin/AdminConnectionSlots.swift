//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers
import NIOCore
import TokengateGateway
import TokengateHTTP

/// The admin listener's open connections and its cap: at the cap a new connection takes the place of the one
/// that has waited longest for a request, and is refused only when every open connection has a request being
/// served.
///
/// Refusing the newcomer at the cap, as the public listeners do, let anyone who could connect lock the admin
/// listener: 256 connections that sent nothing held every place for the idle timeout, and could be renewed, so
/// `/healthz` and `/readyz` failed (an orchestrator restarts the pod) and an operator could not revoke during an
/// incident. `secret_file` did not help, as the cap applies before a request is read. A connection without a
/// request under way loses nothing when it is closed (the client of a kept-alive one reconnects), so a flood of
/// them now only pushes out its own: a new connection is the youngest waiter, the last to go, and a probe's
/// request arrives long before 256 newer connections have come in after it. Only a client that opens
/// connections faster than that, continuously, can still push a probe out: a flood the network has to stop.
///
/// A cap per peer address would not do it: a kubelet or a load balancer probes from one address, and on
/// loopback every client, the flood too, is 127.0.0.1.
///
/// Touched when a connection opens, when it closes, and when one of its requests starts or is answered; admin
/// traffic is a few requests a second, so a lock is fine, and the scan for the longest waiter at the cap
/// (≤ 256 entries, under a flood only) is cheap next to the accept it follows.
package final class AdminConnectionSlots: Sendable {
    /// What ``admit(_:now:)`` decided; the caller closes what it names.
    package enum Admission {
        case admitted
        /// Admitted in place of this connection, the one that waited longest: the caller closes it.
        case admittedInPlaceOf(any Channel)
        /// Every place holds a connection whose request is being served: the caller closes the new one.
        case refused
    }

    private struct Entry {
        let channel: any Channel
        /// Since when the connection has been waiting for (the rest of) a request; `nil` while one is served.
        var waitingSince: NIODeadline?
    }

    private struct State {
        var entries: [ObjectIdentifier: Entry] = [:]
        var overflow = CapOverflowCounts()
    }

    package let limit: Int
    private let state = NIOLockedValueBox(State())

    package init(limit: Int) {
        self.limit = limit
    }

    /// Registers a new connection as waiting since `now`, making room at the cap as the type's overview says.
    package func admit(_ channel: any Channel, now: NIODeadline = .now()) -> Admission {
        let admission = self.state.withLockedValue { state -> Admission in
            var admission = Admission.admitted
            if state.entries.count >= self.limit {
                let oldest = state.entries.lazy
                    .compactMap { key, entry in entry.waitingSince.map { (key: key, since: $0) } }
                    .min { $0.since < $1.since }
                guard let oldest, let evicted = state.entries.removeValue(forKey: oldest.key) else {
                    state.overflow.refused += 1
                    return .refused
                }
                state.overflow.evicted += 1
                admission = .admittedInPlaceOf(evicted.channel)
            }
            state.entries[ObjectIdentifier(channel)] = Entry(channel: channel, waitingSince: now)
            return admission
        }
        if case .refused = admission { return admission }
        channel.closeFuture.whenComplete { _ in
            self.state.withLockedValue { state in
                // Only this channel's own entry: an evicted one's place may already be taken.
                if state.entries[ObjectIdentifier(channel)]?.channel === channel {
                    state.entries.removeValue(forKey: ObjectIdentifier(channel))
                }
            }
        }
        return admission
    }

    /// A whole request arrived on `channel` and is about to be served: it may not be evicted while it is.
    /// `false` when the connection has already been evicted (it is being closed): the request is not served.
    package func serving(_ channel: any Channel) -> Bool {
        self.state.withLockedValue { state in
            guard state.entries[ObjectIdentifier(channel)]?.channel === channel else { return false }
            state.entries[ObjectIdentifier(channel)]?.waitingSince = nil
            return true
        }
    }

    /// `channel` waits for a request again, since `now`: its answer is written, or a new request began.
    package func waiting(_ channel: any Channel, now: NIODeadline = .now()) {
        self.state.withLockedValue { state in
            guard state.entries[ObjectIdentifier(channel)]?.channel === channel else { return }
            state.entries[ObjectIdentifier(channel)]?.waitingSince = now
        }
    }

    /// The connections evicted and refused at the cap since the last report, when there are some and the last
    /// report is at least ``CapOverflowCounts/reportInterval`` old (the caller logs one warning with both
    /// counts); `nil` otherwise.
    package func overflowToReport(now: NIODeadline = .now()) -> (evicted: Int, refused: Int)? {
        self.state.withLockedValue { $0.overflow.report(now: now) }
    }

    package var count: Int { self.state.withLockedValue { $0.entries.count } }
}

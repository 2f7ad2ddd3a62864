//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// Whether a client takes its response fast enough: while response bytes wait for it, it gets
/// `limits.response_send_timeout` of waiting, plus one second for every `limits.response_min_rate` bytes it
/// took meanwhile. The mirror of the request body's pace (`request_body_min_rate`).
///
/// Only time during which bytes wait for the client counts. A stream that goes quiet (server-sent events
/// between events, a long poll, a tunnel with nothing to say) has nothing waiting and is never behind, however
/// long it lasts; a client that reads a few bytes a second while the gateway holds its response falls behind
/// and is cut. The client's own rate is what counts, never the backend's: bytes wait only once the backend has
/// sent them.
///
/// A value with the time passed in, so its rule is tested without waiting. Its owner looks at the client from
/// time to time (``observe(at:sent:waiting:)``) while it has bytes waiting, and not at all on the common path
/// (a response that leaves as fast as it comes never starts a watch).
package struct ResponseSendPace: Sendable {
    package let timeout: TimeAmount
    /// Bytes per second; more than 0.
    package let minimumRate: Int
    /// Time during which bytes waited for the client, up to the last look.
    package private(set) var waited: TimeAmount = .zero
    /// Bytes the client took during that time.
    package private(set) var sentWhileWaiting = 0
    private var lastAt: NIODeadline?
    private var lastSent = 0
    private var lastWaiting = false

    /// `nil` when `minimumRate` is 0 (the check is off).
    package init?(timeout: TimeAmount, minimumRate: Int) {
        guard minimumRate > 0 else { return nil }
        self.timeout = timeout
        self.minimumRate = minimumRate
    }

    /// A look at the client at `now`: `sent` is every byte it has taken so far, `waiting` whether bytes wait
    /// for it now. The time since the previous look counts when bytes waited at that look, and so do the bytes
    /// taken since; the first look only starts the count. Returns whether the client is behind.
    package mutating func observe(at now: NIODeadline, sent: Int, waiting: Bool) -> Bool {
        if let lastAt = self.lastAt, self.lastWaiting, now > lastAt {
            self.waited = self.waited + (now - lastAt)
            self.sentWhileWaiting += max(0, sent - self.lastSent)
        }
        self.lastAt = now
        self.lastSent = sent
        self.lastWaiting = waiting
        return self.isBehind
    }

    /// The waiting so far is more than the timeout plus what the bytes taken earned.
    package var isBehind: Bool {
        // Seconds earned, capped at a year: a fast download with a tiny rate must not overflow the nanoseconds.
        let earned = min(Double(self.sentWhileWaiting) / Double(self.minimumRate), 365 * 86_400)
        return self.waited > self.timeout + .nanoseconds(Int64(earned * 1e9))
    }
}

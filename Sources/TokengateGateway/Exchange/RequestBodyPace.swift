//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateHTTP

/// How long a request body may take: `limits.request_body_timeout`, plus one second for every
/// `limits.request_body_min_rate` bytes it has sent, plus the time the gateway itself held it back.
///
/// A body that trickles (a byte every few seconds) holds what the gateway gave it for as long as it likes,
/// within `idle_timeout` of each read: a backend connection from the pool (over HTTP/2 one per stream, so a
/// few connections could take every connection to an upstream) or a token body's buffer. The rule is
/// Apache's `mod_reqtimeout` (`body=20,MinRate=500`): a slow start is forgiven, a steady pace above the rate
/// never runs out, a body that falls behind is cut. Time the gateway held the body back is not the client's:
/// reading paused for backpressure or while a connect is under way (``pause(at:)``/``resume(at:)``), and over
/// HTTP/2 a connection window other streams keep shut (``heldBack(at:)``).
///
/// A value with the time passed in, so its rules are tested without waiting; ``ProxyExchangeStateMachine`` keeps
/// one per request with a body, and its driver schedules one task at ``deadline(at:)``, moved only when it fires.
struct RequestBodyPace {
    /// When the request began.
    let start: NIODeadline
    let timeout: TimeAmount
    /// Bytes per second; more than 0.
    let minimumRate: Int
    private var bytes = 0
    private var pausedAt: NIODeadline?
    private var held: TimeAmount = .zero

    /// After a deadline found the body held back by others, the client gets at least this much time once it
    /// may send again before it is looked at again.
    static let heldBackGrace: TimeAmount = .seconds(5)

    /// `nil` when `minimumRate` is 0 (the check is off).
    init?(start: NIODeadline, timeout: TimeAmount, minimumRate: Int) {
        guard minimumRate > 0 else { return nil }
        self.start = start
        self.timeout = timeout
        self.minimumRate = minimumRate
    }

    mutating func received(_ count: Int) {
        self.bytes += count
    }

    /// The gateway stopped reading the body.
    mutating func pause(at now: NIODeadline) {
        if self.pausedAt == nil { self.pausedAt = now }
    }

    /// The gateway reads the body again: the pause is not counted against it.
    mutating func resume(at now: NIODeadline) {
        guard let since = self.pausedAt else { return }
        self.held = self.held + (now - since)
        self.pausedAt = nil
    }

    /// A deadline passed while something outside the exchange kept the client from sending (HTTP/2: the
    /// connection's window): the time up to now and ``heldBackGrace`` more are not counted against it.
    mutating func heldBack(at now: NIODeadline) {
        let deadline = self.deadline(at: now)
        if now > deadline {
            self.held = self.held + (now - deadline)
        }
        self.held = self.held + Self.heldBackGrace
    }

    /// When the body runs out of time, as of what it has sent so far.
    func deadline(at now: NIODeadline) -> NIODeadline {
        var held = self.held
        if let since = self.pausedAt {
            held = held + (now - since)
        }
        // Seconds earned, capped at a year: a fast upload with a tiny rate must not overflow the nanoseconds.
        let earned = min(Double(self.bytes) / Double(self.minimumRate), 365 * 86_400)
        return self.start + self.timeout + .nanoseconds(Int64(earned * 1e9)) + held
    }
}

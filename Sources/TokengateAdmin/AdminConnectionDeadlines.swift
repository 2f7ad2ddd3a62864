//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateHTTP

/// The rules of an admin connection's phases and deadlines (see ``AdminConnectionPhase`` for why they are what
/// they are), as a value: each event returns what to do, and ``AdminConnectionPhase`` does it (arms or cancels
/// the timer, tells ``AdminConnectionSlots``). So the rules are tested without a channel or a clock.
package struct AdminConnectionDeadlines {
    package enum Phase: Equatable {
        /// Not active yet: nothing is timed.
        case notStarted
        case receiving
        case serving
        case idle
        /// The answer says `Connection: close`: the connection goes once it is written. Nothing read counts
        /// any more, and the idle deadline bounds a client that does not take the answer.
        case closing
        case stopped
    }

    package enum Action: Equatable {
        case none
        /// Arm the deadline (replacing any), and tell the slots the connection waits (`markWaiting`: not at the
        /// connection's start, when it was registered as waiting already).
        case arm(TimeAmount, markWaiting: Bool)
        /// The request is to be served: cancel the deadline, and tell the slots (which may say it was evicted).
        case serve
        /// The request must not be served: the connection was evicted, or the request came in another phase.
        case refuse
        /// Cancel the deadline and let the channel go.
        case stop
    }

    package let requestTimeout: TimeAmount
    package let idleTimeout: TimeAmount
    package private(set) var phase = Phase.notStarted

    package init(requestTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
    }

    /// The connection is active: the first request's deadline starts. Again is a no-op.
    package mutating func start() -> Action {
        guard self.phase == .notStarted else { return .none }
        self.phase = .receiving
        return .arm(self.requestTimeout, markWaiting: false)
    }

    /// A read brought `count` bytes. On an idle connection they begin a request; an empty read (a TLS record
    /// without data) begins nothing.
    package mutating func bytesArrived(_ count: Int) -> Action {
        count > 0 ? self.beginRequestIfIdle() : .none
    }

    /// A decoded head. One the pipelining handler held back while the previous request was served arrives on an
    /// idle connection without new bytes: it begins a request too.
    package mutating func headArrived() -> Action {
        self.beginRequestIfIdle()
    }

    /// The whole request is read.
    package mutating func requestReceived() -> Action {
        guard self.phase == .receiving else { return .refuse }
        self.phase = .serving
        return .serve
    }

    /// An answer is being handed to the connection; `closing` when the connection goes once it is written.
    package mutating func answered(closing: Bool) -> Action {
        switch self.phase {
        case .receiving, .serving, .idle:
            self.phase = closing ? .closing : .idle
            return .arm(self.idleTimeout, markWaiting: true)
        case .notStarted, .closing, .stopped:
            return .none
        }
    }

    /// The connection is going.
    package mutating func stop() -> Action {
        self.phase = .stopped
        return .stop
    }

    private mutating func beginRequestIfIdle() -> Action {
        guard self.phase == .idle else { return .none }
        self.phase = .receiving
        return .arm(self.requestTimeout, markWaiting: true)
    }
}

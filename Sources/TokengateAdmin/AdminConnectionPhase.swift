//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateHTTP

/// Where an admin connection is in its life — receiving a request, having one served, idle after an answer —
/// with the deadline of that phase, told to ``AdminConnectionSlots`` so that the cap evicts a waiting
/// connection and never one whose request is being served.
///
/// The admin listener's clients are probes, a metrics scraper and an operator's tools: small one-shot requests
/// from close by. So it keeps deadlines of its own, shorter than the public listeners' `limits` (which let a
/// silent connection stay for `idle_timeout`, 60 s by default, and renew it):
///
/// - **receiving**: from the connection's start (its TLS handshake included), or from the first byte of a later
///   request, the whole request — head and body, at most 64 KiB — must arrive within `requestTimeout`;
/// - **serving**: no deadline; the handler's own work is bounded where it is done (the cutoff store, a reload);
/// - **idle**: once an answer is handed to the connection, the next request must begin within `idleTimeout`.
///   The answer need not have been read for this: a client that never reads it does not hold its place.
///
/// A deadline that passes closes the connection without an answer. Event-loop bound; kept by
/// ``AdminReadDeadlineHandler`` (bytes, start, stop) and ``AdminConnectionHandler`` (decoded requests, answers).
package final class AdminConnectionPhase {
    private var deadlines: AdminConnectionDeadlines
    private let slots: AdminConnectionSlots
    private var timer: Scheduled<Void>?
    private var channel: (any Channel)?

    package init(requestTimeout: TimeAmount, idleTimeout: TimeAmount, slots: AdminConnectionSlots) {
        self.deadlines = AdminConnectionDeadlines(requestTimeout: requestTimeout, idleTimeout: idleTimeout)
        self.slots = slots
    }

    /// The connection is active: the first request's deadline starts. Again is a no-op.
    ///
    /// The timer holds this object and the channel until ``stop()``, which the owner calls when the channel
    /// goes inactive or the owner is removed.
    package func start(context: ChannelHandlerContext) {
        let action = self.deadlines.start()
        if case .arm = action {
            self.channel = context.channel  // Only at the start: a start after the stop must not hold it again.
        }
        self.perform(action)
    }

    /// A read brought `count` bytes (``AdminConnectionDeadlines/bytesArrived(_:)``).
    package func bytesArrived(_ count: Int) {
        self.perform(self.deadlines.bytesArrived(count))
    }

    /// A decoded head (``AdminConnectionDeadlines/headArrived()``).
    package func headArrived() {
        self.perform(self.deadlines.headArrived())
    }

    /// The whole request is read and is to be served: no deadline while it is, and no eviction. `false` when
    /// the connection was evicted before (it is being closed): the request must not be served.
    package func requestReceived() -> Bool {
        self.perform(self.deadlines.requestReceived())
    }

    /// An answer is being handed to the connection; `closing` when the connection goes once it is written.
    /// Called before the answer's end is written: NIO's pipelining handler may hand over a request it held
    /// back from within that write, and that request must find the connection idle.
    package func answered(closing: Bool) {
        self.perform(self.deadlines.answered(closing: closing))
    }

    /// The connection is going: no timer fires any more, and none holds the channel.
    package func stop() {
        self.perform(self.deadlines.stop())
    }

    /// Does what the rules said; `false` for a request that must not be served.
    @discardableResult
    private func perform(_ action: AdminConnectionDeadlines.Action) -> Bool {
        switch action {
        case .none:
            return true
        case .arm(let timeout, let markWaiting):
            if markWaiting, let channel = self.channel { self.slots.waiting(channel) }
            self.arm(timeout)
            return true
        case .serve:
            self.cancelTimer()
            guard let channel = self.channel else { return false }
            return self.slots.serving(channel)
        case .refuse:
            return false
        case .stop:
            self.cancelTimer()
            self.channel = nil
            return true
        }
    }

    private func arm(_ timeout: TimeAmount) {
        self.cancelTimer()
        guard let channel = self.channel else { return }
        self.timer = channel.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            self.timer = nil
            self.channel?.close(promise: nil)
        }
    }

    private func cancelTimer() {
        self.timer?.cancel()
        self.timer = nil
    }
}

@available(*, unavailable)
extension AdminConnectionPhase: Sendable {}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

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
final class AdminConnectionPhase {
    private enum State {
        case receiving
        case serving
        case idle
        /// The answer says `Connection: close`: the connection goes once it is written. Nothing read counts
        /// any more, and the idle deadline bounds a client that does not take the answer.
        case closing
        case stopped
    }

    private let requestTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private let slots: AdminConnectionSlots
    private var state = State.receiving
    private var timer: Scheduled<Void>?
    private var channel: (any Channel)?

    init(requestTimeout: TimeAmount, idleTimeout: TimeAmount, slots: AdminConnectionSlots) {
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
        self.slots = slots
    }

    /// The connection is active: the first request's deadline starts. Again is a no-op.
    ///
    /// The timer holds this object and the channel until ``stop()``, which the owner calls when the channel
    /// goes inactive or the owner is removed.
    func start(context: ChannelHandlerContext) {
        guard self.channel == nil, case .receiving = self.state else { return }
        self.channel = context.channel
        self.arm(self.requestTimeout)
    }

    /// A read brought `count` bytes. On an idle connection they begin a request, which now has
    /// `requestTimeout`; an empty read (a TLS record without data) begins nothing.
    func bytesArrived(_ count: Int) {
        if count > 0, case .idle = self.state {
            self.beginRequest()
        }
    }

    /// A decoded head. One the pipelining handler held back while the previous request was served arrives
    /// on an idle connection without new bytes: it begins a request too.
    func headArrived() {
        if case .idle = self.state {
            self.beginRequest()
        }
    }

    /// The whole request is read and is to be served: no deadline while it is, and no eviction. `false` when
    /// the connection was evicted before (it is being closed): the request must not be served.
    func requestReceived() -> Bool {
        guard case .receiving = self.state, let channel = self.channel else { return false }
        self.state = .serving
        self.cancelTimer()
        return self.slots.serving(channel)
    }

    /// An answer is being handed to the connection; `closing` when the connection goes once it is written.
    /// Called before the answer's end is written: NIO's pipelining handler may hand over a request it held
    /// back from within that write, and that request must find the connection idle.
    func answered(closing: Bool) {
        switch self.state {
        case .receiving, .serving, .idle:
            self.state = closing ? .closing : .idle
            if let channel = self.channel { self.slots.waiting(channel) }
            self.arm(self.idleTimeout)
        case .closing, .stopped:
            break
        }
    }

    /// The connection is going: no timer fires any more, and none holds the channel.
    func stop() {
        self.state = .stopped
        self.cancelTimer()
        self.channel = nil
    }

    private func beginRequest() {
        self.state = .receiving
        if let channel = self.channel { self.slots.waiting(channel) }
        self.arm(self.requestTimeout)
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

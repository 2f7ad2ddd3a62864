//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// The two read deadlines of an HTTP/1.1 connection, kept before the decoder where the bytes are still
/// bytes: the idle timeout and the request-head deadline (slowloris).
///
/// **Idle.** No bytes from the client for `idleTimeout` fires `IdleStateHandler.IdleStateEvent.read` down the
/// pipeline (again after every further idle period), which the connection handler acts on. This replaces
/// NIO's `IdleStateHandler`, a handler of its own that every read, write and flush of every request crossed;
/// here the deadline is a ``DeadlineTimer`` moved at the end of each read batch, which schedules one task per
/// idle period instead of one per read.
///
/// **Request head.** The first byte of a new request starts the clock of `limits.request_header_timeout`; the
/// decoded head (the connection handler calls ``headReceived()``) stops it. Between requests only the idle
/// timeout applies, so a keep-alive connection may wait quietly for its next request, but not dribble one.
/// A timer is only scheduled when the read that brought the first bytes did not complete the head: a head
/// that arrives whole (nearly every request) costs a clock read, not a scheduled task and its cancel.
final class HTTP1ReadDeadlines: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let headTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    /// True between the end of an exchange (or the connection's start) and the next decoded head.
    private var awaitingHead = true
    private var headTimer: Scheduled<Void>?
    /// When the first byte of the head being awaited arrived.
    private var headStartedAt: NIODeadline?
    private var idleTimer: DeadlineTimer?

    init(headTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.headTimeout = headTimeout
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Added after a TLS handshake the channel is active already; on a plain listener it becomes active later.
        if context.channel.isActive {
            self.startIdleTimer(context: context)
        }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.startIdleTimer(context: context)
        context.fireChannelActive()
    }

    private func startIdleTimer(context: ChannelHandlerContext) {
        guard self.idleTimer == nil else { return }
        let timer = DeadlineTimer(eventLoop: context.eventLoop) { [weak self] in
            guard let self, let timer = self.idleTimer else { return }
            // Fired again after every further idle period, as NIO's IdleStateHandler does.
            timer.arm(at: context.eventLoop.now + self.idleTimeout)
            context.fireUserInboundEventTriggered(IdleStateHandler.IdleStateEvent.read)
        }
        self.idleTimer = timer
        timer.arm(at: context.eventLoop.now + self.idleTimeout)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Only bytes start a head: an empty read (a TLS record with no application data) must not start the
        // clock on an idle keep-alive connection.
        if self.awaitingHead, self.headStartedAt == nil, self.unwrapInboundIn(data).readableBytes > 0 {
            self.headStartedAt = context.eventLoop.now
        }
        context.fireChannelRead(data)
        // Still no whole head after this read: now the deadline needs a timer.
        if self.awaitingHead, self.headTimer == nil, let started = self.headStartedAt {
            self.headTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: started + self.headTimeout) {
                self.headTimer = nil
                if self.awaitingHead {
                    context.close(promise: nil)
                }
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // The idle period starts again once a read batch is over (where IdleStateHandler took its time too).
        self.idleTimer?.arm(at: context.eventLoop.now + self.idleTimeout)
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.cancelTimers()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.cancelTimers()
    }

    private func cancelTimers() {
        self.headTimer?.cancel()
        self.headTimer = nil
        self.idleTimer?.cancel()
        self.idleTimer = nil
    }

    /// A whole head arrived: the deadline is met.
    func headReceived() {
        self.awaitingHead = false
        self.headStartedAt = nil
        self.headTimer?.cancel()
        self.headTimer = nil
    }

    /// The exchange is over: the next bytes start a new head, and a new deadline.
    func awaitNextHead() {
        self.awaitingHead = true
    }
}

@available(*, unavailable)
extension HTTP1ReadDeadlines: Sendable {}

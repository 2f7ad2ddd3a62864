//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// Bounds the time a client may take to send a request head once it has started one (slowloris): sits
/// before the HTTP/1.1 decoder, where the bytes are still bytes.
///
/// The first byte of a new request starts the clock of `limits.request_header_timeout`; the decoded head
/// (the connection handler calls ``headReceived()``) stops it. Between requests the idle timeout applies
/// instead, so a keep-alive connection may wait quietly for its next request, but not dribble one.
///
/// A timer is only scheduled when the read that brought the first bytes did not complete the head: a
/// head that arrives whole (nearly every request) costs a clock read, not a scheduled task and its cancel.
final class RequestHeadDeadline: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let timeout: TimeAmount
    /// True between the end of an exchange (or the connection's start) and the next decoded head.
    private var awaitingHead = true
    private var timer: Scheduled<Void>?
    /// When the first byte of the head being awaited arrived.
    private var headStartedAt: NIODeadline?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Only bytes start a head: an empty read (a TLS record with no application data) must not start the
        // clock on an idle keep-alive connection.
        if self.awaitingHead, self.headStartedAt == nil, self.unwrapInboundIn(data).readableBytes > 0 {
            self.headStartedAt = context.eventLoop.now
        }
        context.fireChannelRead(data)
        // Still no whole head after this read: now the deadline needs a timer.
        if self.awaitingHead, self.timer == nil, let started = self.headStartedAt {
            self.timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: started + self.timeout) {
                self.timer = nil
                if self.awaitingHead {
                    context.close(promise: nil)
                }
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        context.fireChannelInactive()
    }

    /// A whole head arrived: the deadline is met.
    func headReceived() {
        self.awaitingHead = false
        self.headStartedAt = nil
        self.timer?.cancel()
        self.timer = nil
    }

    /// The exchange is over: the next bytes start a new head, and a new deadline.
    func awaitNextHead() {
        self.awaitingHead = true
    }
}

@available(*, unavailable)
extension RequestHeadDeadline: Sendable {}

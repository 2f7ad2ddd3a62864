//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// Bounds the time a client may take to send a request head once it has started one (slowloris): sits
/// before the HTTP/1.1 decoder, where the bytes are still bytes.
///
/// The first byte of a new request arms a timer of `limits.request_header_timeout`; the decoded head (the
/// connection handler calls ``headReceived()``) disarms it. Between requests the idle timeout applies
/// instead, so a keep-alive connection may wait quietly for its next request, but not dribble one.
final class RequestHeadDeadline: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let timeout: TimeAmount
    /// True between the end of an exchange (or the connection's start) and the next decoded head.
    private var awaitingHead = true
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if self.awaitingHead, self.timer == nil {
            self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: self.timeout) {
                self.timer = nil
                if self.awaitingHead {
                    context.close(promise: nil)
                }
            }
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        context.fireChannelInactive()
    }

    /// A whole head arrived: the deadline is met.
    func headReceived() {
        self.awaitingHead = false
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

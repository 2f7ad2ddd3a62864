//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateHTTP

/// Keeps an admin connection's deadlines (``AdminConnectionPhase``): it sits in front of NIO's HTTP/1.1
/// decoder, where it sees the connection's bytes (after TLS) and its start and end, and
/// ``AdminConnectionHandler`` behind the decoder reports the decoded requests and the written answers to the
/// same phase object.
///
/// Bytes are counted before they are passed on: on an idle connection they begin a request, which the
/// decoder may complete within the same call.
package final class AdminReadDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer

    private let phase: AdminConnectionPhase

    package init(phase: AdminConnectionPhase) {
        self.phase = phase
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive {
            self.phase.start(context: context)
        }
    }

    package func channelActive(context: ChannelHandlerContext) {
        self.phase.start(context: context)
        context.fireChannelActive()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.phase.bytesArrived(self.unwrapInboundIn(data).readableBytes)
        context.fireChannelRead(data)
    }

    package func channelInactive(context: ChannelHandlerContext) {
        self.phase.stop()
        context.fireChannelInactive()
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        self.phase.stop()
    }
}

@available(*, unavailable)
extension AdminReadDeadlineHandler: Sendable {}

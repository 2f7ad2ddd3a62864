//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateTLS

/// The top of an HTTP/1.1 bench connection's pipeline: sends prepared requests, hands answers and connection events to
/// its ConnectionSlot. Thin on purpose; the slot decides.
final class BenchClientHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let slot: ConnectionSlot
    private var context: ChannelHandlerContext?
    private var status = 0
    private var keepAlive = true

    init(slot: ConnectionSlot) {
        self.slot = slot
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted(let negotiated, _, let version) = event {
            self.slot.handshakeCompleted(.http1(self), alpn: negotiated, tlsVersion: version)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.status = Int(head.status.code)
            self.keepAlive = head.isKeepAlive
        case .body:
            break
        case .end:
            self.slot.responseCompleted(tag: 0, status: self.status, keepAlive: self.keepAlive)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.slot.channelError(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.slot.channelClosed()
        context.fireChannelInactive()
    }

    /// Head, optional body and end in one flush: one TLS record batch, one write syscall.
    func send(_ request: PreparedRequest) {
        guard let context = self.context else { return }
        context.write(self.wrapOutboundOut(.head(request.head)), promise: nil)
        if let body = request.body {
            context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
    }

    func close() {
        self.context?.close(promise: nil)
    }
}

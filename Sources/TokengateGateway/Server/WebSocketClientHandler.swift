//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateHTTP

/// The client side of a WebSocket tunnel: takes the place of ``HTTP1ConnectionHandler`` in the client
/// connection's pipeline once the backend's `101` is accepted (behind the TLS handler, which stays), and from
/// then on passes bytes, not HTTP. Reads are held back while the backend is not taking what the client sends
/// (``pauseReading()``), so a client flooding frames fills its own socket buffer and not the gateway's memory.
final class WebSocketClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let tunnel: WebSocketTunnel
    private var context: ChannelHandlerContext?
    private var readGate = TunnelReadGate()

    init(tunnel: WebSocketTunnel) {
        self.tunnel = tunnel
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.tunnel.fromClient(self.unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.tunnel.clientReadComplete()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.tunnel.clientWritabilityChanged(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.tunnel.close(.clientClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.tunnel.close(.clientError)
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is GatewayShutdownEvent {
            // A tunnel has no request boundary to wait for: a graceful shutdown ends it now (the peers' WebSocket
            // clients reconnect, to another instance).
            self.tunnel.close(.shutdown)
            return
        }
        if event is GatewayDrainEndedEvent {
            self.tunnel.close(.shutdown)
            return
        }
        if case .inputClosed = event as? ChannelEvent {
            self.tunnel.clientFinished()
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func read(context: ChannelHandlerContext) {
        if self.readGate.admitsRead() {
            context.read()
        }
    }

    func pauseReading() {
        self.readGate.pause()
    }

    func resumeReading() {
        if self.readGate.resume(), let context = self.context {
            context.read()
        }
    }
}

@available(*, unavailable)
extension WebSocketClientHandler: Sendable {}

/// What ``HTTP1ConnectionHandler/handOver(to:)`` leaves the tunnel: the client's bytes read behind the
/// upgrade request and not parsed.
struct WebSocketHandOver {
    let unparsed: ByteBuffer?
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateTLS

/// The backend side of a WebSocket tunnel: a connection of its own (never pooled, never reused), which
/// first reads the backend's answer to the upgrade (``WebSocketHandshakeCheck``) and then hands every byte
/// to the ``WebSocketTunnel``. Reads are held back while the client is not taking what the backend sends
/// (``pauseReading()``): the backend's frames then wait in its own socket buffer, not in the gateway.
final class WebSocketUpstreamHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Phase {
        case connecting
        case awaitingHead(check: WebSocketHandshakeCheck, received: ByteBuffer?)
        case tunnel
        case closed
    }

    private var phase = Phase.connecting
    private var context: ChannelHandlerContext?
    /// Told of the backend's answer, once (``WebSocketHandshakeCheck/Verdict``), with the bytes behind its head.
    var onHead: ((WebSocketHandshakeCheck.Verdict, ByteBuffer?) -> Void)?
    /// The tunnel, once the `101` was accepted.
    var tunnel: WebSocketTunnel?
    /// Completed by the TLS handshake on an `https://` target.
    var handshakePromise: EventLoopPromise<Void>?
    private var readGate = TunnelReadGate()

    var isWritable: Bool { self.context?.channel.isWritable ?? false }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Sends the upgrade request and starts waiting for the answer.
    func sendUpgrade(_ head: ByteBuffer, key: String) {
        guard let context = self.context else { return }
        self.phase = .awaitingHead(check: WebSocketHandshakeCheck(key: key), received: nil)
        context.writeAndFlush(self.wrapOutboundOut(head), promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            self.handshakePromise.take()?.succeed()
        }
        if case .inputClosed = event as? ChannelEvent {
            // The backend finished sending (a TCP half-close): what it sent is delivered, then the tunnel ends.
            self.tunnel?.backendFinished()
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = self.unwrapInboundIn(data)
        switch self.phase {
        case .tunnel:
            self.tunnel?.fromBackend(bytes)
        case .awaitingHead(let check, var received):
            if received == nil {
                received = bytes
            } else {
                var more = bytes
                received!.writeBuffer(&more)
            }
            let verdict = check.judge(received!.readableBytesView)
            switch verdict {
            case .needMore:
                self.phase = .awaitingHead(check: check, received: received)
            case .switched(_, let headLength):
                self.phase = .tunnel
                received!.moveReaderIndex(forwardBy: headLength)
                self.onHead.take()?(verdict, received!.readableBytes > 0 ? received : nil)
            case .refused, .invalid:
                self.phase = .closed
                self.onHead.take()?(verdict, nil)
                context.close(promise: nil)
            }
        case .connecting, .closed:
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.tunnel?.backendReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.tunnel?.backendWritabilityChanged(context.channel.isWritable)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.closed(.backendClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.handshakePromise.take()?.fail(error)
        self.closed(.backendError)
        context.close(promise: nil)
    }

    private func closed(_ reason: WebSocketTunnel.CloseReason) {
        self.handshakePromise.take()?.fail(UpstreamError.connectionClosed)
        if let onHead = self.onHead.take() {
            onHead(.invalid("the backend closed the connection before its answer"), nil)
        }
        self.phase = .closed
        self.tunnel.take()?.close(reason)
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
extension WebSocketUpstreamHandler: Sendable {}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import FloorWork
import NIOCore
import NIOPosix

/// One client connection of the floor proxy: each request head it reads (after the gateway's TLS handler has
/// decrypted it) goes to the backend as it came, over one keep-alive upstream connection of its own, and each
/// response goes back as it came.
///
/// This is the least a TLS-terminating keep-alive HTTP/1.1 proxy does on SwiftNIO: two channels per client,
/// the gateway's `TLSHandler`, one write per response and the upstream flushes batched per tick. It has no
/// token check, no parser, no header rewrite, no limits, no timeouts, no metrics, no pool shared between
/// clients: bodiless requests only. Whatever the gateway spends beyond it is the gateway's own work; whatever
/// it spends itself, a proxy built the same way cannot avoid.
final class FloorClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let backend: SocketAddress
    private let flushBatch: FloorFlushBatch
    private var upstream: (any Channel)?
    /// Request heads read before the upstream connection was up.
    private var waiting: [ByteBuffer] = []
    private var splitter = FloorMessageSplitter()

    init(backend: SocketAddress, flushBatch: FloorFlushBatch) {
        self.backend = backend
        self.flushBatch = flushBatch
    }

    func channelActive(context: ChannelHandlerContext) {
        let client = context.channel
        let upstreamHandler = FloorUpstreamHandler()
        upstreamHandler.deliver = { response in
            client.writeAndFlush(response, promise: nil)
        }
        // A backend that closes ends its client's connection too: nothing else would answer its requests.
        upstreamHandler.closed = { client.close(promise: nil) }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let boundUpstreamHandler = NIOLoopBound(upstreamHandler, eventLoop: context.eventLoop)
        ClientBootstrap(group: context.eventLoop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(boundUpstreamHandler.value)
                }
            }
            .connect(to: self.backend)
            .whenComplete { result in
                let handler = loopBound.value
                switch result {
                case .success(let channel):
                    // The client may have gone while the connect ran: its upstream goes too.
                    guard client.isActive else {
                        channel.close(promise: nil)
                        return
                    }
                    handler.upstream = channel
                    for request in handler.waiting { handler.send(request) }
                    handler.waiting.removeAll()
                case .failure:
                    client.close(promise: nil)
                }
            }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.upstream?.close(promise: nil)
        self.upstream = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.splitter.split(
            Self.unwrapInboundIn(data),
            length: FloorHeadScan.requestLength
        ) { request in
            if self.upstream == nil {
                self.waiting.append(request)
            } else {
                self.send(request)
            }
        }
    }

    private func send(_ request: ByteBuffer) {
        guard let upstream = self.upstream else { return }
        upstream.write(request, promise: nil)
        self.flushBatch.add(upstream)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOHTTP1
import TokengateHTTP

/// Looks once at the first byte a TLS listener receives, in front of the TLS handler.
///
/// A TLS connection opens with a handshake record (content type 22), or an SSLv2-style hello (high bit set);
/// a client that sends plain HTTP to the HTTPS port (`http://host:443/`, a misconfigured health check) opens
/// with a method, whose first byte is an uppercase letter. That client gets a readable `400` (JSON, `tls_required`) that says what
/// went wrong, as nginx's does, instead of a TLS alert it cannot read and a closed connection. Anything else
/// passes to the TLS handler untouched, and this handler removes itself after the first read either way, so
/// a connection pays for it once, never per request.
final class PlainHTTPOnTLSPortHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let logger: Logger
    private let onRefused: () -> Void

    /// - Parameter onRefused: called when a connection is refused this way (the TLS failure metric).
    init(logger: Logger, onRefused: @escaping () -> Void) {
        self.logger = logger
        self.onRefused = onRefused
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        guard let first = buffer.readableBytesView.first else {
            context.fireChannelRead(data)  // Nothing to judge yet: wait for a byte.
            return
        }
        guard first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z") else {
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            return
        }
        self.onRefused()
        self.logger.info(
            "plain HTTP on a TLS listener",
            metadata: ["peer": "\(context.channel.remoteAddress?.description ?? "-")"]
        )
        let answer = GatewayAnswer.plainHTTPOnTLSPort()
        let response = answer.http1Response(version: .http1_1, requestMethod: .GET, allocator: context.channel.allocator)
        // Written past the TLS handler (this handler sits in front of it), then closed: nothing else is read.
        context.writeAndFlush(self.wrapOutboundOut(response)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}

@available(*, unavailable)
extension PlainHTTPOnTLSPortHandler: Sendable {}

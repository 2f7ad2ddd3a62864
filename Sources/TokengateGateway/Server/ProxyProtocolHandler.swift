//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import TokengateHTTP

/// The client address a connection's PROXY protocol header gave, kept for the handlers that come after the
/// header (``ALPNRouter`` reads it once the TLS handshake is done). One per connection, on its event loop.
final class ProxiedAddress {
    /// `nil` until the header is read, and after a header that names no address (`LOCAL`, `UNKNOWN`).
    var address: String?

    init() {}
}

@available(*, unavailable)
extension ProxiedAddress: Sendable {}

/// First in the pipeline of a connection from a load balancer listed in its listener's `proxy_protocol.from`:
/// reads the PROXY protocol header (``ProxyProtocolParser``), keeps its client address in ``ProxiedAddress``,
/// passes the bytes after it on and removes itself. Such a peer must send the header: a connection that
/// starts otherwise, or with a broken header, is closed before any TLS byte is read. Peers outside the list
/// never get this handler, so a header they send is only the start of a failed handshake.
///
/// The header waits under the TLS handshake timeout, which runs from the connection's start.
final class ProxyProtocolHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let target: ProxiedAddress
    private let logger: Logger
    private let refused: () -> Void
    private var received: ByteBuffer?

    /// - Parameter refused: counts a connection closed for its header.
    init(target: ProxiedAddress, logger: Logger, refused: @escaping () -> Void) {
        self.target = target
        self.logger = logger
        self.refused = refused
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = self.unwrapInboundIn(data)
        if var received = self.received {
            self.received = nil
            received.writeBuffer(&buffer)
            buffer = received
        }
        switch ProxyProtocolParser.parse(buffer.readableBytesView) {
        case .incomplete:
            self.received = buffer
        case .header(let source, let length):
            self.target.address = source
            buffer.moveReaderIndex(forwardBy: length)
            let sync = context.pipeline.syncOperations
            if buffer.readableBytes > 0 {
                context.fireChannelRead(self.wrapInboundOut(buffer))
            }
            sync.removeHandler(context: context, promise: nil)
        case .invalid(let why):
            self.refused()
            self.logger.debug(
                "connection closed: bad PROXY protocol header",
                metadata: ["peer": "\(context.channel.remoteAddress?.description ?? "-")", "why": "\(why)"]
            )
            context.close(promise: nil)
        }
    }
}

@available(*, unavailable)
extension ProxyProtocolHandler: Sendable {}

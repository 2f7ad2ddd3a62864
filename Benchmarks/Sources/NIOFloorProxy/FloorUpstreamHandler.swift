//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import FloorWork
import NIOCore

/// Reads the backend's responses on a floor proxy's upstream connection and hands each whole one, as the
/// bytes it came in, to the client connection it belongs to.
///
/// Framing is the least a keep-alive proxy can do: the head ends at the first empty line and the body is
/// `Content-Length` bytes (the bench backend always sends one). No field is checked or rewritten.
final class FloorUpstreamHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    /// Where each whole response goes; cleared when the client connection closes.
    var deliver: ((ByteBuffer) -> Void)?
    /// Called once when the backend's connection closes.
    var closed: (() -> Void)?
    private var splitter = FloorMessageSplitter()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.splitter.split(Self.unwrapInboundIn(data), length: FloorHeadScan.responseLength) { response in
            self.deliver?(response)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.deliver = nil
        self.closed?()
        self.closed = nil
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// The last handler of an upstream connection's pipeline: hands response parts to the exchange that
/// uses the connection, and holds `read()` back while that exchange's client cannot take more bytes.
///
/// Holding reads is the response half of the proxy's backpressure (the GlueHandler pattern of
/// swift-nio-examples): the backend's bytes wait in the kernel, not in the gateway's memory.
final class UpstreamResponseHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    /// The exchange using the connection; `nil` while the connection is idle in the pool.
    weak var receiver: (any UpstreamResponseReceiver)?
    /// Called once when the channel goes inactive, so the pool forgets the connection.
    var onClose: (() -> Void)?
    private var readingPaused = false
    private var pendingRead = false

    init() {}

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = self.unwrapInboundIn(data)
        guard let receiver = self.receiver else {
            // Bytes on an idle connection: the backend broke the protocol. It can never be reused.
            context.close(promise: nil)
            return
        }
        receiver.upstreamReceived(part)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.receiver?.upstreamReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        let receiver = self.receiver
        self.receiver = nil
        receiver?.upstreamFailed(UpstreamError.connectionClosed)
        self.onClose?()
        self.onClose = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let receiver = self.receiver
        self.receiver = nil
        receiver?.upstreamFailed(error)
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.receiver?.upstreamWritabilityChanged(isWritable: context.channel.isWritable)
    }

    func read(context: ChannelHandlerContext) {
        if self.readingPaused {
            self.pendingRead = true
        } else {
            context.read()
        }
    }

    func pauseReading() {
        self.readingPaused = true
    }

    /// Lets reads through again and replays the one held back, through the whole pipeline from its tail.
    func resumeReading(channel: any Channel) {
        self.readingPaused = false
        if self.pendingRead {
            self.pendingRead = false
            channel.read()
        }
    }
}

@available(*, unavailable)
extension UpstreamResponseHandler: Sendable {}

/// Why an exchange with a backend failed; mapped to 502/503/504 by the connection handler.
struct UpstreamError: Error, Hashable, CustomStringConvertible {
    let code: String
    var description: String { self.code }

    static let connectionClosed = UpstreamError(code: "upstream_closed")
    static let noTargetAvailable = UpstreamError(code: "no_upstream_available")
    static let connectFailed = UpstreamError(code: "upstream_connect_failed")
    static let responseTimeout = UpstreamError(code: "upstream_timeout")
    static let malformedResponse = UpstreamError(code: "upstream_malformed_response")
}

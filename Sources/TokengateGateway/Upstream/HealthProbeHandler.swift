//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateTLS

/// The last handler of a health check's connection: sends `GET path` once the channel is active (the TLS
/// handler in front holds it until its handshake completed) and completes its promise with the status of the
/// response head, then closes the connection without reading the body. Any error before that, or a close,
/// fails the promise; the checker's timer bounds the whole check.
final class HealthProbeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    /// Why a check ended without a status, in the words the admin endpoint and the log use.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private let request: HTTPRequestHead
    private var promise: EventLoopPromise<Int>?

    init(request: HTTPRequestHead, promise: EventLoopPromise<Int>) {
        self.request = request
        self.promise = promise
    }

    func channelActive(context: ChannelHandlerContext) {
        context.write(self.wrapOutboundOut(.head(self.request)), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = self.unwrapInboundIn(data) else { return }
        let promise = self.promise
        self.promise = nil
        promise?.succeed(Int(head.status.code))
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let promise = self.promise
        self.promise = nil
        if let error = error as? TLSError, error.code == .readFailed {
            // After the handshake: a backend refusing the client certificate under TLS 1.3 (`certificate required`).
            promise?.fail(Failure(description: "TLS connection failed: \(error.message)"))
        } else if error is HTTPParserError {
            promise?.fail(Failure(description: "not an HTTP/1.1 response (\(error))"))
        } else {
            promise?.fail(Failure(description: UpstreamPool.describe(error)))
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let promise = self.promise
        self.promise = nil
        promise?.fail(Failure(description: "connection closed before a response"))
        context.fireChannelInactive()
    }
}

@available(*, unavailable)
extension HealthProbeHandler: Sendable {}

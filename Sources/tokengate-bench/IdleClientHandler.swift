//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateTLS

/// The top of an idle-bench connection's pipeline: once the TLS handshake is done it sends its one request,
/// reports the answer's status, and then does nothing, so the connection sits idle in keep-alive.
///
/// Confined to its channel's event loop.
final class IdleClientHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    /// One connection attempt's outcome, completed exactly once: by the answer, by the connection's end or
    /// timeout, or by a failed connect (when no handler was ever added). Confined to the event loop.
    final class Attempt {
        let promise: EventLoopPromise<Int>
        private var settled = false

        init(promise: EventLoopPromise<Int>) {
            self.promise = promise
        }

        func succeed(status: Int) {
            guard !self.settled else { return }
            self.settled = true
            self.promise.succeed(status)
        }

        func fail(_ error: any Error) {
            guard !self.settled else { return }
            self.settled = true
            self.promise.fail(error)
        }

        var isSettled: Bool { self.settled }
    }

    private let request: PreparedRequest
    private let attempt: Attempt
    private let answerTimeout: TimeAmount
    private var timer: Scheduled<Void>?
    private var status = 0
    private var lastError: String?

    init(request: PreparedRequest, attempt: Attempt, answerTimeout: TimeAmount) {
        self.request = request
        self.attempt = attempt
        self.answerTimeout = answerTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // The whole attempt (connect, handshake, request, answer) is bounded, so the bench always ends.
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: self.answerTimeout) {
            self.timer = nil
            guard !self.attempt.isSettled else { return }
            self.attempt.fail(BenchError("timeout", "no answer within \(self.answerTimeout)"))
            context.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.attempt.fail(BenchError("closed", self.lastError ?? "connection closed before the answer"))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            context.write(self.wrapOutboundOut(.head(self.request.head)), promise: nil)
            if let body = self.request.body {
                context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            }
            context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.status = Int(head.status.code)
        case .body:
            break
        case .end:
            self.timer?.cancel()
            self.timer = nil
            self.attempt.succeed(status: self.status)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let tls = error as? TLSError {
            self.lastError = "tls: \(tls.code)"
        } else {
            self.lastError = String(String(describing: error).prefix(80))
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.attempt.fail(BenchError("closed", self.lastError ?? "connection closed before the answer"))
        context.fireChannelInactive()
    }
}

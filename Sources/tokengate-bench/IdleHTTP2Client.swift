//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateTLS

/// `tokengate-bench idle --http 2`, one connection: the owner of its BenchHTTP2Handler (the same libnghttp2
/// client `run --http 2` uses). Once the handshake is done it submits its one request; the stream's end
/// settles the attempt with the response's decoded `:status`. After that it does nothing, so the connection
/// sits idle (nghttp2 still acknowledges the server's SETTINGS and PINGs).
///
/// Failures settle the attempt when the connection closes, with the last error seen as the reason, as
/// IdleClientHandler does on HTTP/1.1. Confined to its channel's event loop.
final class IdleHTTP2Client {
    private let request: PreparedRequest
    private let attempt: IdleClientHandler.Attempt
    /// Set at the handshake, cleared when the connection closes (the handler holds this client as its owner).
    private var handler: BenchHTTP2Handler?
    private var timer: Scheduled<Void>?
    private var lastError: String?

    /// Bounds the whole attempt (connect, handshake, request, answer) from now, so the bench always ends:
    /// when `answerTimeout` passes unanswered, the attempt fails and `channel` is closed.
    init(
        request: PreparedRequest,
        attempt: IdleClientHandler.Attempt,
        channel: any Channel,
        answerTimeout: TimeAmount
    ) {
        self.request = request
        self.attempt = attempt
        self.timer = channel.eventLoop.assumeIsolated().scheduleTask(in: answerTimeout) {
            self.timer = nil
            guard !self.attempt.isSettled else { return }
            self.attempt.fail(BenchError("timeout", "no answer within \(answerTimeout)"))
            channel.close(promise: nil)
        }
    }

    func handshakeCompleted(_ handler: BenchHTTP2Handler) {
        self.handler = handler
        // The handler writes the preface, its SETTINGS and this request's HEADERS together right after this.
        if handler.send(self.request) == nil {
            self.lastError = "the HTTP/2 session took no request"
            handler.close()
        }
    }

    func responseCompleted(status: Int) {
        self.timer?.cancel()
        self.timer = nil
        self.attempt.succeed(status: status)
    }

    func streamFailed(reason: String) {
        self.lastError = reason
        self.handler?.close()
    }

    func goawayReceived(reason: String) {
        // Before the answer it explains the close that follows; during the hold the close itself is counted.
        if !self.attempt.isSettled {
            self.lastError = reason
        }
    }

    func channelError(_ error: any Error) {
        if let bench = error as? BenchError {
            self.lastError = bench.message
        } else if let tls = error as? TLSError {
            self.lastError = "tls: \(tls.code)"
        } else {
            self.lastError = String(String(describing: error).prefix(80))
        }
    }

    func channelClosed() {
        self.handler = nil
        self.timer?.cancel()
        self.timer = nil
        self.attempt.fail(BenchError("closed", self.lastError ?? "connection closed before the answer"))
    }
}

@available(*, unavailable)
extension IdleHTTP2Client: Sendable {}

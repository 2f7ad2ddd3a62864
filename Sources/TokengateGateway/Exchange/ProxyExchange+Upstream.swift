//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Prometheus
import Logging
import NIOCore
import TokengateTLS
import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

// MARK: The upstream side.

extension ProxyExchange {
    var pool: UpstreamPool { self.pools.pools[self.upstreamIndex] }

    func connectUpstream() {
        let pool = self.pool
        let failedTarget = self.machine.failedTarget
        // A retry after a failed connect skips the round-robin's idle pick, which could be the failed target.
        if failedTarget == nil, let connection = pool.acquireIdle() {
            self.upstreamConnected(connection)
            return
        }
        pool.acquire(after: failedTarget, requestID: self.requestID).assumeIsolated().whenComplete { result in
            switch result {
            case .success(let connection):
                self.upstreamConnected(connection)
            case .failure(let error):
                let failure: ProxyExchangeStateMachine.ConnectFailure
                if let failed = error as? UpstreamPool.ConnectFailure {
                    failure = .target(failed.targetIndex)
                } else if error as? UpstreamError == .noTargetAvailable {
                    failure = .noTargetAvailable
                } else {
                    failure = .other
                }
                switch self.machine.upstreamConnectFailed(failure) {
                case .none: break
                case .retry: self.connectUpstream()
                case .end(let outcome): self.run(outcome)
                }
            }
        }
    }

    private func upstreamConnected(_ connection: UpstreamConnection) {
        let send: ProxyExchangeStateMachine.RequestSend
        switch self.machine.upstreamConnected() {
        case .releaseUnused:
            // The client went away while we connected: the connection is fresh and clean, keep it.
            self.pool.release(connection, reusable: true)
            return
        case .send(let request):
            send = request
        }
        guard let head = self.upstreamHead else {
            preconditionFailure("an upstream connection arrived for a request that is not forwarded")
        }
        self.connection = connection
        connection.handler.receiver = self
        // A pooled connection comes back with reads flowing (``UpstreamResponseHandler/detach()``).
        if !self.client.isWritable {
            connection.handler.pauseReading()
        }
        if send.sendContinue {
            self.sendContinue()
        }
        connection.handler.send(head)
        let now = NIODeadline.now()
        self.upstreamSentAt = now
        if let body = send.replayBody {
            connection.handler.sendBody(body)
        }
        for buffer in send.queued {
            connection.handler.sendBody(buffer)
        }
        if send.sendEnd {
            connection.handler.sendEnd()
        }
        if send.flush {
            connection.handler.flush()
        }
        if send.armResponseTimer {
            self.startResponseTimer(now: now)
        }
        self.setReadingPaused(!connection.handler.isWritable)
    }

    /// The response timeout lives on the upstream connection (``DeadlineTimer``), so back-to-back requests
    /// over one connection do not schedule a task each.
    /// `now`, when the caller has just read the clock (each read is a system call's worth of time under a VM).
    func startResponseTimer(now: NIODeadline? = nil) {
        guard let connection = self.connection else { return }
        let timeout = self.runtime.upstreams[self.upstreamIndex].responseTimeout
        connection.responseTimer.arm(at: (now ?? connection.channel.eventLoop.now) + timeout)
    }

    func cancelResponseTimer() {
        self.connection?.responseTimer.disarm()
    }

    func upstreamTimedOut() {
        self.run(self.machine.upstreamTimedOut())
    }

    func upstreamReceived(_ part: UpstreamResponsePart) {
        switch part {
        case .head(let head):
            guard let connection = self.connection else { return }
            switch self.machine.upstreamReceivedHead(head, requestMayBeUnsent: connection.handler.requestMayBeUnsent) {
            case .none:
                return
            case .started:
                // From here on the same timeout bounds the backend's silence between reads of the body (as nginx's
                // `proxy_read_timeout` does): a backend that sends a head and stops would otherwise hold both
                // connections for ever.
                let now = NIODeadline.now()
                self.startResponseTimer(now: now)
                if let sent = self.upstreamSentAt {
                    self.upstreamWait = (now - sent).nanoseconds
                    self.runtime.metrics.upstreams[self.upstreamIndex].latency.recordNanoseconds((now - sent).nanoseconds)
                }
                self.respondingTarget = connection.targetIndex
                // What a token body held of ``GatewayRuntime/tokenBodyMemory`` goes back now, not after a long
                // response.
                self.releaseTokenBodyMemory()
            }
        case .body(let buffer):
            switch self.machine.upstreamReceivedBody(buffer) {
            case .none: break
            case .writeToClient(let buffer):
                self.sentBodyBytes += buffer.readableBytes
                self.client.write(.body(.byteBuffer(buffer)))
            }
        case .end(let trailers):
            guard let connection = self.connection,
                case .finish(let heldHead, let heldBody, let reusable) = self.machine.upstreamReceivedEnd(
                    keepsConnection: connection.handler.keepsConnection)
            else { return }
            let close = self.machine.closesAfterResponse(draining: self.client.isDraining)
            self.writeHeld(heldHead, heldBody, close: close)
            self.connection = nil
            self.pool.release(connection, reusable: reusable)  // Detaches the handler from this exchange.
            self.cancelStallTimer()
            self.log(status: self.machine.status?.code ?? 0, reason: "-")
            self.client.writeEnd(trailers, closing: close)
            // No flush here: `exchangeCompleted` flushes once the codec is ready for the next request, because
            // a flush can hand over the next pipelined request at once.
            self.client.exchangeCompleted(closeConnection: close, requestEnded: self.machine.requestEnded)
        }
    }

    /// Writes a held head and body to the client.
    private func writeHeld(_ head: UpstreamResponseHead?, _ body: ByteBuffer?, close: Bool) {
        guard let head else { return }
        self.client.writeResponseHead(
            fromUpstream: head, version: self.head.version, close: close, hsts: self.runtime.hsts,
            added: self.traffic.responseFields)
        if let body {
            self.sentBodyBytes += body.readableBytes
            self.client.write(.body(.byteBuffer(body)))
        }
    }

    func upstreamReadComplete() {
        let action = self.machine.upstreamReadComplete()
        if let head = action.heldHead {
            self.writeHeld(head, action.heldBody, close: self.machine.closesAfterResponse(draining: self.client.isDraining))
        }
        if self.machine.movesResponseTimer(clientIsWritable: self.client.isWritable) {
            self.startResponseTimer()  // Moves the deadline; no task per read (``DeadlineTimer``).
        }
        self.client.flush()
    }

    func upstreamFailed(_ error: any Error) {
        guard let connection = self.connection else { return }
        // A head the client has not received yet (HTTP/2 queues it until the next round: a backend that closes in
        // the middle of its first read leaves it there) is taken back, and the gateway answers in its place.
        let withdrawn = self.machine.clientHasBackendHead && self.client.withdrawResponseHead()
        let malformed = error is HTTP1ResponseParser.Failure
        if let error = error as? TLSError {
            // The backend's TLS refused the connection after the handshake: with TLS 1.3 a server checks the client
            // certificate only then (`certificate_required`, `unknown_ca`, `bad_certificate`), so a missing or
            // untrusted `tls.client_certificate` shows here and not as a connect failure.
            let upstream = self.runtime.upstreams[self.upstreamIndex]
            self.logger.warning(
                "upstream TLS connection failed",
                metadata: [
                    "upstream": "\(upstream.name)", "target": "\(upstream.targets[connection.targetIndex].display)",
                    "request_id": "\(self.requestID)", "error": "\(error.message)",
                ])
        }
        let action = self.machine.upstreamFailed(
            malformed: malformed, reused: connection.reused, idempotent: Self.isIdempotent(self.head.method), headWithdrawn: withdrawn)
        switch action {
        case .none:
            return
        case .retry:
            self.closeConnection()
            self.connectUpstream()
        case .end(let outcome, let malformed):
            self.closeConnection()
            if case .abort = outcome {
                self.logger.warning("upstream failed mid-response", metadata: ["request_id": "\(self.requestID)", "error": "\(error)"])
            } else if malformed {
                self.logger.warning("upstream sent a malformed response", metadata: ["request_id": "\(self.requestID)", "error": "\(error)"])
            }
            self.run(outcome)
        }
    }

    func upstreamWritabilityChanged(isWritable: Bool) {
        if self.machine.isForwarding {
            self.setReadingPaused(!isWritable)
        }
    }

    /// RFC 9110 §9.2.2: the methods a retry may repeat.
    static func isIdempotent(_ method: HTTPMethod) -> Bool {
        switch method {
        case .GET, .HEAD, .OPTIONS, .PUT, .DELETE: true
        default: false
        }
    }
}

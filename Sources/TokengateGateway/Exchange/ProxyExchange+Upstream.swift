//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CoreMetrics
import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

// MARK: The upstream side.

extension ProxyExchange {
    private var pool: UpstreamPool { self.pools.pools[self.upstreamIndex] }

    func connectUpstream() {
        let pool = self.pool
        // A retry after a failed connect skips the round-robin's idle pick, which could be the failed target.
        if self.failedTarget == nil, let connection = pool.acquireIdle() {
            self.upstreamConnected(connection)
            return
        }
        pool.acquire(after: self.failedTarget, requestID: self.requestID).assumeIsolated().whenComplete { result in
            guard case .awaitingUpstream = self.state else {
                // The client went away while we connected: the connection is fresh and clean, keep it.
                if case .success(let connection) = result { pool.release(connection, reusable: true) }
                return
            }
            switch result {
            case .success(let connection):
                self.upstreamConnected(connection)
            case .failure(let error):
                // No connection, so nothing of the request reached a backend: sending it again is safe whatever
                // the method, and its body is all still here (queued, or not read yet).
                if let failure = error as? UpstreamPool.ConnectFailure, self.failedConnects < pool.settings.retries {
                    self.failedConnects += 1
                    self.failedTarget = failure.targetIndex
                    self.connectUpstream()
                    return
                }
                if error as? UpstreamError == .noTargetAvailable {
                    self.answer(.serviceUnavailable("no backend is available", reason: UpstreamError.noTargetAvailable.code))
                } else {
                    self.answer(.badGateway("the backend could not be reached", reason: UpstreamError.connectFailed.code))
                }
            }
        }
    }

    private func upstreamConnected(_ connection: UpstreamConnection) {
        guard let head = self.upstreamHead else {
            preconditionFailure("an upstream connection arrived for a request that is not forwarded")
        }
        connection.handler.receiver = self
        // A pooled connection comes back with reads flowing (``UpstreamResponseHandler/detach()``).
        if !self.client.isWritable {
            connection.handler.pauseReading()
        }
        let queued = self.queued
        self.queued = []
        self.state = .forwarding(connection)
        self.sendContinueIfExpected()
        connection.handler.send(head)
        let now = NIODeadline.now()
        self.upstreamSentAt = now
        if let body = self.replayableBody, self.requestEnded {
            connection.handler.sendBody(body)
            if queued.isEmpty {
                connection.handler.sendEnd()
            }
        }
        for part in queued {
            switch part {
            case .head: preconditionFailure("a queued request part was a head")
            case .body(let buffer): connection.handler.sendBody(buffer)
            case .end: connection.handler.sendEnd()
            }
        }
        // A request without a body whose end has not been read yet is about to get it in this same read
        // batch (the common keep-alive GET): leave the flush to ``clientReadComplete()`` so the head and the
        // end leave in one write. Anything else goes out now.
        if self.requestEnded || self.hasBody {
            connection.handler.flush()
        }
        if self.requestEnded {
            self.startResponseTimer(now: now)
        }
        self.setReadingPaused(!connection.handler.isWritable)
    }

    func release(_ connection: UpstreamConnection, reusable: Bool) {
        self.pool.release(connection, reusable: reusable)  // Detaches the handler from this exchange.
    }

    /// The response timeout lives on the upstream connection (``DeadlineTimer``), so back-to-back requests
    /// over one connection do not schedule a task each.
    /// `now`, when the caller has just read the clock (each read is a system call's worth of time under a VM).
    func startResponseTimer(now: NIODeadline? = nil) {
        guard case .forwarding(let connection) = self.state else { return }
        let timeout = self.runtime.upstreams[self.upstreamIndex].responseTimeout
        connection.responseTimer.arm(at: (now ?? connection.channel.eventLoop.now) + timeout)
    }

    func cancelResponseTimer() {
        if case .forwarding(let connection) = self.state {
            connection.responseTimer.disarm()
        }
    }

    func upstreamTimedOut() {
        guard case .forwarding(let connection) = self.state else { return }
        self.release(connection, reusable: false)
        if self.responseStarted {
            self.log(status: self.status?.code ?? 0, reason: "upstream_timeout")
            self.state = .finished
            self.client.abort()
        } else {
            self.answer(.gatewayTimeout())
        }
    }

    func upstreamReceived(_ part: UpstreamResponsePart) {
        guard case .forwarding(let connection) = self.state else { return }
        switch part {
        case .head(let head):
            if head.status.code < 200 {
                return  // 1xx from the backend: interim, not forwarded (100-continue is handled hop by hop).
            }
            // From here on the same timeout bounds the backend's silence between reads of the body (as nginx's
            // `proxy_read_timeout` does): a backend that sends a head and stops would otherwise hold both
            // connections for ever.
            let now = NIODeadline.now()
            self.startResponseTimer(now: now)
            if let sent = self.upstreamSentAt {
                self.runtime.metrics.upstreams[self.upstreamIndex].latency.recordNanoseconds((now - sent).nanoseconds)
            }
            self.responseStarted = true
            // Early: the client's request had not ended, or it had but its last bytes were still on their way to
            // the backend (written in this tick, flushed at its end, or held by a full socket).
            self.answeredEarly = !self.requestEnded || connection.handler.requestMayBeUnsent
            self.status = head.status
            self.heldHead = head
            // The backend answered, so the request is never sent again: its body need not be kept for a retry,
            // and what a token body held of ``GatewayRuntime/tokenBodyMemory`` goes back now, not after a long
            // response.
            self.replayableBody = nil
            self.releaseTokenBodyMemory()
        case .body(let buffer):
            guard self.heldHead != nil else {
                self.client.write(.body(.byteBuffer(buffer)))
                return
            }
            if self.heldBody == nil {
                self.heldBody = buffer
            } else {
                var buffer = buffer
                self.heldBody!.writeBuffer(&buffer)  // Several chunks in the first read: copied, once.
            }
        case .end(let trailers):
            self.writeHeldResponse()
            // Reusable only when the backend had the whole request before it answered (an early answer, a 413
            // say, leaves the connection's framing unknown, also when the rest of the body went out before the
            // answer ended) and did not say it closes (`Connection: close`, HTTP/1.0) nor announced a body its
            // response cannot have (``HTTP1ResponseParser``).
            let reusable = self.requestEnded && !self.answeredEarly && connection.handler.keepsConnection
            self.release(connection, reusable: reusable)
            self.cancelStallTimer()
            self.state = .finished
            self.log(status: self.status?.code ?? 0, reason: "-")
            self.client.writeEnd(trailers, closing: self.closesAfterResponse)
            // No flush here: `exchangeCompleted` flushes once the codec is ready for the next request, because
            // a flush can hand over the next pipelined request at once.
            self.client.exchangeCompleted(closeConnection: self.closesAfterResponse, requestEnded: self.requestEnded)
        }
    }

    /// Writes what ``heldHead`` and ``heldBody`` hold to the client.
    private func writeHeldResponse() {
        guard let head = self.heldHead else { return }
        self.heldHead = nil
        self.clientHasBackendHead = true
        self.client.writeResponseHead(fromUpstream: head, version: self.head.version, close: self.closesAfterResponse, hsts: self.runtime.hsts)
        if let body = self.heldBody {
            self.heldBody = nil
            self.client.write(.body(.byteBuffer(body)))
        }
    }

    func upstreamReadComplete() {
        self.writeHeldResponse()
        if self.responseStarted, case .forwarding = self.state, self.client.isWritable {
            self.startResponseTimer()  // Moves the deadline; no task per read (``DeadlineTimer``).
        }
        self.client.flush()
    }

    func upstreamFailed(_ error: any Error) {
        guard case .forwarding(let connection) = self.state else { return }
        self.cancelResponseTimer()
        self.release(connection, reusable: false)
        // A head the client has not received yet (HTTP/2 queues it until the next round: a backend that closes in
        // the middle of its first read leaves it there) is taken back, and the gateway answers in its place.
        if self.clientHasBackendHead, self.client.withdrawResponseHead() {
            self.clientHasBackendHead = false
        }
        if self.clientHasBackendHead {
            // The client has the head (and maybe some of the body): all it can be told now is that the response
            // is cut off. Its line carries the backend's status, which the client got.
            self.logger.warning("upstream failed mid-response", metadata: ["request_id": "\(self.requestID)", "error": "\(error)"])
            self.log(status: self.status?.code ?? 0, reason: "upstream_aborted")
            self.state = .finished
            self.client.abort()
            return
        }
        // Nothing reached the client yet: a held head (the backend answered, so the request is not sent again)
        // is dropped and the gateway answers instead.
        self.heldHead = nil
        self.heldBody = nil
        // A reused connection the backend had closed while idle: nothing of the response arrived, and with
        // the whole request still at hand it is safe to send again on a fresh connection.
        let malformed = error is HTTP1ResponseParser.Failure
        if !self.responseStarted, connection.reused, self.replayableBody != nil, Self.isIdempotent(self.head.method), !malformed {
            self.state = .awaitingUpstream
            self.connectUpstream()
            return
        }
        if malformed {
            self.logger.warning("upstream sent a malformed response", metadata: ["request_id": "\(self.requestID)", "error": "\(error)"])
        }
        self.answer(
            malformed
                ? .badGateway("the backend sent a malformed response", reason: UpstreamError.malformedResponse.code)
                : .badGateway("the backend closed the connection", reason: UpstreamError.connectionClosed.code)
        )
    }

    func upstreamWritabilityChanged(isWritable: Bool) {
        if case .forwarding = self.state {
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

    /// HTTP/1.1 closes after this response when the client asked, or when the request was not read to its
    /// end before the backend answered.
    private var closesAfterResponse: Bool {
        self.client.closesConnectionOnAnswer && (self.closeRequested || self.client.isDraining || !self.requestEnded)
    }
}

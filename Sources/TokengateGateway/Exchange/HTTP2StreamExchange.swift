//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateHTTP
import TokengateTLS

/// One HTTP/2 stream as a ``ProxyExchange`` client: the same routing, tokens, forwarding and answers as
/// HTTP/1.1, with the stream's own transport rules.
///
/// Flow control is the backpressure: request body bytes are reported consumed (so the client gets its
/// WINDOW_UPDATE) only once they have been handed to the upstream connection and reading is not paused;
/// while the upstream is not writable they stay unconsumed and the client's window closes. A response the
/// backend does not finish resets the stream; the connection and its other streams go on.
final class HTTP2StreamExchange: HTTP2StreamHandler, ExchangeClient {
    private let stream: HTTP2ServerStream
    private let generations: GatewayGenerationHolder
    private let logger: Logger
    let eventLoop: any EventLoop
    let clientAddress: String?
    let listenerIndex: Int
    let certificateNames: TLSCertificateNames?
    private var exchange: ProxyExchange?
    private var pendingHead: ClientRequestHead?
    private var paused = false
    /// Body bytes received but not yet reported consumed, because reading was paused.
    private var unconsumed = 0
    private let requestID: String
    /// Response body bytes written to the stream: less what is still queued, what the client took.
    private var bytesWritten = 0
    /// Made when the stream's queue first passes 64 KiB: the client's pace while bytes wait for it.
    private var slowClient: SlowClientWatch?

    init(
        stream: HTTP2ServerStream,
        generations: GatewayGenerationHolder,
        eventLoop: any EventLoop,
        clientAddress: String?,
        listenerIndex: Int = 0,
        certificateNames: TLSCertificateNames? = nil,
        connectionID: String,
        logger: Logger
    ) {
        self.listenerIndex = listenerIndex
        self.certificateNames = certificateNames
        self.stream = stream
        self.generations = generations
        self.eventLoop = eventLoop
        self.clientAddress = clientAddress
        self.logger = logger
        self.requestID = RequestRewriter.streamRequestID(connection: connectionID, stream: stream.id)
    }

    // MARK: HTTP2StreamHandler

    func received(_ part: ClientRequestPart) {
        switch part {
        case .head(var head):
            // The exchange must know the body's framing before it writes the upstream head. A `content-length`
            // says it; so does `expect: 100-continue` (a body follows, of unknown length), whose client sends
            // nothing more until the exchange answers `100 Continue`. Otherwise the head is held until the next
            // part says whether a body follows (HEADERS with END_STREAM has none).
            if head.fields.contains(name: "content-length") {
                self.begin(head)
            } else if head.fields.expectsContinue {
                head.fields.add(name: "transfer-encoding", value: "chunked")
                self.begin(head)
            } else {
                self.pendingHead = head
            }
        case .body(let buffer):
            if var head = self.pendingHead {
                self.pendingHead = nil
                // A body of unknown length (a head with `content-length` began at once): in HTTP/1.1 terms, chunked.
                head.fields.add(name: "transfer-encoding", value: "chunked")
                self.begin(head)
            }
            let bytes = buffer.readableBytes
            self.exchange?.receivedBody(buffer)
            // Passed on (or dropped after an answer): the window opens again unless the upstream is full.
            if self.paused {
                self.unconsumed += bytes
            } else {
                self.stream.consumed(bytes: bytes)
            }
            self.exchange?.clientReadComplete()
        case .end(let trailers):
            if let head = self.pendingHead {
                self.pendingHead = nil
                self.begin(head)
            }
            self.exchange?.receivedEnd(trailers)
            self.exchange?.clientReadComplete()
        }
    }

    private func begin(_ head: ClientRequestHead) {
        let generation = self.generations.load()
        let exchange = ProxyExchange(
            head: head,
            requestID: RequestRewriter.requestID(from: head) { self.requestID },
            client: self,
            runtime: generation.runtime,
            pools: generation.pools.pools(for: self.eventLoop),
            tokenCache: generation.tokenCaches.cache(for: self.eventLoop),
            logger: self.logger,
            closeRequested: false
        )
        self.exchange = exchange
        exchange.begin()
        // Each stream part is its own batch: push whatever the exchange wrote upstream.
        exchange.clientReadComplete()
    }

    func streamReset(_ code: HTTP2ErrorCode) {
        self.slowClient?.stop()
        self.exchange?.clientClosed()
        self.exchange = nil
    }

    func writabilityChanged(_ writable: Bool) {
        self.exchange?.clientWritabilityChanged(isWritable: writable)
    }

    func drainEnded() {
        self.exchange?.drainEnded()
    }

    // MARK: ExchangeClient

    var allocator: ByteBufferAllocator { self.stream.allocator }
    var isWritable: Bool { self.stream.isWritable }
    var viaTrustedProxy: Bool { false }
    var closesConnectionOnAnswer: Bool { false }
    var isDraining: Bool { false }
    var isRequestBodyHeldBack: Bool { self.stream.isReceiveWindowShut }

    func write(_ part: HTTPServerResponsePart) {
        switch part {
        case .head(let head) where head.status == .continue:
            self.stream.writeContinue()
        case .head(let head):
            self.stream.writeHead(head)
        case .body(.byteBuffer(let buffer)):
            self.stream.writeBody(buffer)
            self.bytesWritten &+= buffer.readableBytes
            if self.bytesWritten > SlowClientWatch.ownBuffer, self.slowClient?.isLooking != true {
                self.watchIfBehind()
            }
        case .body(.fileRegion):
            preconditionFailure("the gateway never writes file regions")
        case .end(let trailers):
            self.stream.writeEnd(trailers)
        }
    }

    func writeResponseHead(
        fromUpstream head: UpstreamResponseHead, version: HTTPVersion, close: Bool, hsts: String?, added: [ResponseField]
    ) {
        self.stream.writeHead(fromUpstream: head, close: close, hsts: hsts, added: added)
    }

    func writeEnd(_ trailers: HTTPHeaders?, closing: Bool) {
        // A stream's end never closes the connection: `closing` is HTTP/1.1's concern.
        self.stream.writeEnd(trailers)
    }

    func flush() {
        // The codec gathers the writes of one event-loop turn into one network write by itself.
    }

    func setRequestReadingPaused(_ paused: Bool) {
        self.paused = paused
        if !paused, self.unconsumed > 0 {
            let bytes = self.unconsumed
            self.unconsumed = 0
            self.stream.consumed(bytes: bytes)
        }
    }

    func exchangeCompleted(closeConnection: Bool, requestEnded: Bool) {
        // The stream ends with its response; a request still sending is reset (NO_ERROR) by the codec.
        self.setRequestReadingPaused(false)
    }

    func withdrawResponseHead() -> Bool {
        self.stream.withdrawHead()
    }

    func abort() {
        self.slowClient?.stop()
        self.stream.reset(code: .internalError)
        self.exchange = nil
    }

    // MARK: A client that falls behind

    /// More than 64 KiB of response waits in the stream's queue (the codec gave it a grant from
    /// `limits.response_buffer_total` if it could): the client's pace is watched until nothing waits.
    private func watchIfBehind() {
        let queued = self.stream.queuedResponseBytes
        guard queued > SlowClientWatch.ownBuffer else { return }
        let watch: SlowClientWatch
        if let existing = self.slowClient {
            watch = existing
        } else {
            let runtime = self.exchange?.runtime ?? self.generations.load().runtime
            let rate = self.exchange?.routeIndex.map { runtime.routes[$0].responseMinRate } ?? runtime.limits.responseMinRate
            // The grant is the codec's (it owns the queue); this watch holds none.
            watch = SlowClientWatch(
                eventLoop: self.eventLoop,
                budget: runtime.responseBuffers,
                timeout: TimeAmount(runtime.limits.responseSendTimeout),
                minimumRate: rate
            )
            self.slowClient = watch
        }
        watch.start {
            self.lookAtSlowClient()
        }
    }

    /// Once a second while bytes wait: a client below its rate gets its stream reset (CANCEL); the watch stops
    /// once nothing waits (or the stream is gone: its queue reads empty).
    private func lookAtSlowClient() {
        guard let watch = self.slowClient else { return }
        let queued = self.stream.queuedResponseBytes
        if watch.observe(sent: self.bytesWritten - queued, waiting: queued > 0) {
            watch.stop()
            if let exchange = self.exchange, !exchange.machine.isFinished {
                exchange.clientTooSlow()
            } else {
                self.logger.info("response cut", metadata: ["reason": "client_too_slow", "request_id": "\(self.requestID)"])
            }
            self.exchange = nil
            self.stream.reset(code: .cancel)
            return
        }
        if queued == 0 {
            watch.stop()
        }
    }
}

@available(*, unavailable)
extension HTTP2StreamExchange: Sendable {}

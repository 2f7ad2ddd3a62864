//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CoreMetrics
import Logging
import NIOCore
import NIOHTTP1
import TokengateTLS
import TokengateHTTP

/// The HTTP/1.1 codec side of a client connection: one ``ProxyExchange`` at a time, keep-alive, and the
/// framing checks only HTTP/1.1 has.
///
/// Requests are read here from the connection's bytes by ``HTTP1RequestParser`` rather than by NIO's
/// `HTTPRequestDecoder` in a handler of its own: one handler less for every read, read-complete and write to
/// cross, and no `NIOAny` per request part.
///
/// Pipelining is handled here rather than by NIO's `HTTPServerPipelineHandler`: that handler stops reading
/// from the socket for the whole time a response is pending, which costs two `epoll_ctl` calls on every
/// request of every keep-alive connection (read interest off, then on again). Here the socket keeps being
/// read; only when bytes of a *next* request actually arrive while one is in flight are they left unparsed
/// (in ``unparsed``) and reading paused until the exchange completes, so a pipelining client buffers at most
/// one read's worth of requests. Everything about the request itself — routing, tokens, forwarding,
/// answers — is the exchange's, shared with HTTP/2.
///
/// Responses are serialized here (``HTTP1ResponseSerializer``) rather than by NIO's `HTTPResponseEncoder`:
/// a response's head, body and end are gathered into one buffer and go down the pipeline as one write,
/// instead of three or more `NIOAny` parts each crossing every handler to the TLS handler. A body part
/// larger than `ByteBuffer.http1CopyLimit` is passed on as its own buffer rather than copied.
final class HTTP1ConnectionHandler: ChannelDuplexHandler, ExchangeClient {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case idle
        case exchanging(ProxyExchange)
        /// The exchange is over before its request was: the rest of the request is read and dropped, then
        /// the connection goes on or closes.
        case discarding(close: Bool)
        case closed
    }

    private var state: State = .idle
    private let generations: GatewayGenerationHolder
    private let logger: Logger
    let clientAddress: String?
    let viaTrustedProxy: Bool
    private var context: ChannelHandlerContext?
    /// The exchange holds the request body back (its upstream is not there yet, or not writable).
    private var readingPaused = false
    /// Bytes of a next request are waiting in ``unparsed``: read no more until they are processed.
    private var pipelinePaused = false
    /// Set only when the connection closes after the current response: the close waits for its write.
    private var lastResponseEnd: EventLoopFuture<Void>?
    /// The idle timeout and the slowloris guard, told about every read, when a head arrived and when the next
    /// one is due.
    private let readDeadlines: HTTP1ReadDeadlines
    /// The request in flight was read to its end: whatever follows belongs to the next one.
    private var requestEndReceived = false
    /// The current response's `.end` was written. The exchange still has bookkeeping to do before
    /// ``exchangeCompleted(closeConnection:requestEnded:)``, and a read resumed in between (a TLS handler may
    /// deliver buffered plaintext at once) must not start anything: such bytes wait in ``unparsed`` too.
    private var responseEndWritten = false
    /// The current response's final (non-1xx) head was written: from then on a failure can only cut the
    /// response short, never replace it with an answer of the gateway's own.
    private var responseHeadWritten = false
    private var parser: HTTP1RequestParser
    /// Bytes read and not parsed yet: a later request's, held while one is in flight. `nil` when there are
    /// none, so an idle connection holds no buffer.
    private var unparsed: ByteBuffer?
    /// ``parseAndProcess(context:)`` is on the stack: an exchange completing inside it must not start another
    /// loop (a pipeline of requests answered at once would nest one loop per request).
    private var parsing = false
    private var pendingRead = false
    private var requestCounter = 0
    private let connectionID: String
    /// Set by graceful shutdown: finish the exchange in flight, then close.
    private var closeWhenIdle = false
    /// The method of the request being answered: a response to `HEAD` has no body.
    private var requestMethod: HTTPMethod = .GET
    private var serializer = HTTP1ResponseSerializer()
    /// The current response's bytes not yet written to the pipeline: written at its end, at a flush, or
    /// before a large body part.
    private var output: ByteBuffer?
    /// The channel's writability, kept from `channelWritabilityChanged` instead of asked of the channel (an
    /// existential call into NIO's write state) for every request the exchange and the parse loop look at it.
    private var channelWritable = true
    /// The response written must be followed by the connection's close: a body delimited by it, or a head that
    /// told the client `Connection: close`.
    private var closeAfterResponse = false

    init(
        generations: GatewayGenerationHolder,
        clientAddress: String?,
        viaTrustedProxy: Bool = false,
        readDeadlines: HTTP1ReadDeadlines,
        logger: Logger
    ) {
        self.generations = generations
        self.readDeadlines = readDeadlines
        self.viaTrustedProxy = viaTrustedProxy
        self.clientAddress = clientAddress
        self.logger = logger
        self.connectionID = RequestRewriter.newConnectionID()
        self.parser = HTTP1RequestParser(limits: HTTP1RequestParser.Limits(generations.load().runtime.limits))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.channelWritable = context.channel.isWritable
        // Added after a TLS handshake the channel is active already; on a plain listener it becomes active later.
        if context.channel.isActive {
            self.startReadDeadlines(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.readDeadlines.stop()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        self.startReadDeadlines(context: context)
        context.fireChannelActive()
    }

    private func startReadDeadlines(context: ChannelHandlerContext) {
        // Strong: held until `readDeadlines.stop()` in `channelInactive` or `handlerRemoved` (see its `start`).
        self.readDeadlines.start(context: context) {
            guard let context = self.context else { return }
            self.idleTimedOut(context: context)
        }
    }

    // MARK: Inbound from the client.

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = self.unwrapInboundIn(data)
        self.readDeadlines.bytesArrived(bytes.readableBytes)
        if var held = self.unparsed.take() {
            held.writeImmutableBuffer(bytes)
            self.unparsed = held
        } else {
            self.unparsed = bytes
        }
        self.parseAndProcess(context: context)
        self.readDeadlines.bytesParsed(context: context)
    }

    /// Parses what the client sent and acts on each part, as far as the state allows: bytes of a request
    /// that follows the one in flight stay in ``unparsed`` (and reading pauses) until that one is answered.
    private func parseAndProcess(context: ChannelHandlerContext) {
        guard !self.parsing else { return }  // The loop further up the stack goes on with the new state.
        self.parsing = true
        defer { self.parsing = false }
        while var buffer = self.unparsed.take() {
            if case .closed = self.state {
                return  // Pipelined bytes after a close are never acted upon.
            }
            if self.mustDefer {
                if buffer.readableBytes > 0 {
                    self.unparsed = buffer
                    self.pipelinePaused = true
                }
                return
            }
            let part: ClientRequestPart?
            do {
                part = try self.parser.next(from: &buffer)
            } catch {
                self.parseFailed(error, context: context)
                return
            }
            guard let part else {
                // More bytes are needed; the parser kept what it gathered.
                self.pipelinePaused = false
                return
            }
            // Kept even when empty: a part may be followed by another without new bytes (a head by its end).
            self.unparsed = buffer
            self.process(part, context: context)
        }
        self.pipelinePaused = false
    }

    /// Whether what the client sends now must wait: it is for a later request than the one in flight, or for
    /// a next request while the client is not taking the answers already written. The gateway answers many
    /// requests itself at once (a pipeline of refusals); a client that sends them and never reads would
    /// otherwise have every answer queued in memory, without bound.
    private var mustDefer: Bool {
        switch self.state {
        case .exchanging: self.requestEndReceived || self.responseEndWritten
        case .idle: !self.isWritable
        case .discarding, .closed: false
        }
    }

    private func process(_ part: ClientRequestPart, context: ChannelHandlerContext) {
        switch (part, self.state) {
        case (_, .closed):
            return
        case (.head(let head), .idle):
            self.readDeadlines.headReceived()
            self.requestCounter += 1
            self.requestMethod = head.method
            let requestID = RequestRewriter.requestID(from: head) { self.connectionID + "-" + String(self.requestCounter) }
            // One atomic load per request: the configuration it is served with, even across a reload.
            let generation = self.generations.load()
            let exchange = ProxyExchange(
                head: head,
                requestID: requestID,
                client: self,
                runtime: generation.runtime,
                pools: generation.pools.pools(for: context.eventLoop),
                logger: self.logger,
                closeRequested: !head.isKeepAlive || self.closeWhenIdle
            )
            self.state = .exchanging(exchange)
            self.responseEndWritten = false
            self.responseHeadWritten = false
            self.requestEndReceived = false
            exchange.begin()
        case (.head, .exchanging), (.head, .discarding):
            preconditionFailure("a request head arrived while another request was in flight")
        case (.body(let buffer), .exchanging(let exchange)):
            exchange.receivedBody(buffer)
        case (.end(let trailers), .exchanging(let exchange)):
            self.requestEndReceived = true
            exchange.receivedEnd(trailers)
        case (.end, .discarding(let close)):
            self.finishDiscarding(close: close, context: context)
        case (.body, .discarding):
            break
        case (.body, .idle), (.end, .idle):
            preconditionFailure("a request part arrived with no request in flight")
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.readDeadlines.readBatchEnded(context: context)
        if case .exchanging(let exchange) = self.state {
            exchange.clientReadComplete()
        }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.readDeadlines.stop()
        if case .exchanging(let exchange) = self.state {
            exchange.clientClosed()
        }
        self.state = .closed
        self.unparsed = nil
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.channelWritable = context.channel.isWritable
        switch self.state {
        case .exchanging(let exchange):
            exchange.clientWritabilityChanged(isWritable: self.channelWritable)
        case .idle where self.channelWritable:
            self.resumeParsing(context: context)  // What waited for the answers before it to be taken.
        case .idle, .discarding, .closed:
            break
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is GatewayShutdownEvent {
            self.closeWhenIdle = true
            if case .idle = self.state {
                self.state = .closed
                context.close(promise: nil)
            }
            return
        }
        if event is GatewayDrainEndedEvent {
            if case .exchanging(let exchange) = self.state {
                exchange.drainEnded()
            }
            return
        }
        if case .handshakeCompleted = event as? TLSUserEvent {
            self.generations.load().runtime.metrics.tlsHandshakes.increment()
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// No bytes from the client for the idle timeout. Between requests that ends the connection; during an
    /// exchange the response timeout is the one that counts, unless the client stalls its own body.
    private func idleTimedOut(context: ChannelHandlerContext) {
        switch self.state {
        case .idle, .discarding:
            self.state = .closed
            context.close(promise: nil)
        case .exchanging(let exchange) where exchange.isReadingRequestBody && !self.readingPaused:
            // The client stopped sending a body it announced, and not because the gateway held it back: it
            // must not keep an upstream connection waiting forever.
            exchange.clientClosed()
            self.state = .closed
            context.close(promise: nil)
        case .exchanging, .closed:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let tlsError = error as? TLSError {
            self.generations.load().runtime.metrics.recordTLSFailure(tlsError.code.description)
        } else {
            self.logger.debug("client connection error", metadata: ["error": "\(error)"])
        }
        if case .exchanging(let exchange) = self.state {
            exchange.clientClosed()
        }
        self.state = .closed
        context.close(promise: nil)
    }

    /// The client's bytes broke HTTP/1.1. Between requests that gets an answer; within a body (a broken
    /// chunk) the request is already on its way and can only be cut off. Either way the connection closes:
    /// where the next request would start is unknown.
    private func parseFailed(_ failure: HTTP1ParseFailure, context: ChannelHandlerContext) {
        self.unparsed = nil
        switch self.state {
        case .idle:
            self.answer(.parseFailure(failure), context: context)
        case .exchanging(let exchange):
            // A broken request body (a bad chunk line, oversized trailers) of a request already in flight:
            // the exchange ends, its upstream connection is closed (it saw part of a request), and the client
            // gets the 400 that names the rule unless a response has begun already, when all that is left is
            // to cut it short.
            exchange.requestBodyBroken()
            if !self.responseHeadWritten {
                // The exchange logged and counted the request under its route (`malformed_http`); this answer to
                // it is not one more request, and not an unrouted one.
                self.answer(.bodyParseFailure(failure), counted: false, context: context)
                return
            }
            self.state = .closed
            context.close(promise: nil)
        case .discarding:
            self.state = .closed
            context.close(promise: nil)
        case .closed:
            break
        }
    }

    /// Answers bytes that are not HTTP/1.1 (400), a head over its limit (431, or 414 for the target) or a
    /// broken request body (400), then closes.
    /// - Parameter counted: whether this answer is a request of its own for the metrics (an unrouted answer);
    ///   `false` for the 400 to a request whose exchange already counted it.
    private func answer(_ answer: GatewayAnswer, counted: Bool = true, context: ChannelHandlerContext) {
        let body = answer.jsonBody
        let runtime = self.generations.load().runtime
        self.requestMethod = .GET
        // With HSTS, like every answer over TLS (the exchange's, and the HTTP/2 codec's own).
        let head = answer.responseHead(version: .http1_1, contentLength: body.utf8.count, hsts: runtime.hsts)
        self.write(.head(head))
        self.write(.body(.byteBuffer(context.channel.allocator.buffer(string: body))))
        self.writeEnd(nil, closing: false)
        context.flush()
        if counted {
            runtime.metrics.recordUnrouted(reason: answer.reasonCode)
        }
        if runtime.accessLog {
            self.logger.info("request", metadata: ["status": "\(answer.status.code)", "reason": "\(answer.reasonCode)"])
        }
        self.state = .closed
        context.close(promise: nil)
    }

    // MARK: Outbound: backpressure on the client's reads.

    func read(context: ChannelHandlerContext) {
        if self.readingPaused || self.pipelinePaused {
            self.pendingRead = true
        } else {
            context.read()
        }
    }

    private func finishDiscarding(close: Bool, context: ChannelHandlerContext) {
        if close {
            self.state = .closed
            context.close(promise: nil)
        } else {
            self.state = .idle
            self.readDeadlines.awaitNextHead()
        }
    }
}

// MARK: The exchange's view of this connection.

extension HTTP1ConnectionHandler {
    var eventLoop: any EventLoop { self.context!.eventLoop }
    var allocator: ByteBufferAllocator { self.context!.channel.allocator }
    var isWritable: Bool { self.context != nil && self.channelWritable }
    var closesConnectionOnAnswer: Bool { true }
    var isDraining: Bool { self.closeWhenIdle }
    var isRequestBodyHeldBack: Bool { false }

    func write(_ part: HTTPServerResponsePart) {
        guard let context = self.context else { return }
        switch part {
        case .head(let head):
            if head.status.code >= 200 {
                self.responseHeadWritten = true
            }
            var buffer = self.takeOutput(context: context)
            self.serializer.writeHead(head, requestMethod: self.requestMethod, into: &buffer)
            self.output = buffer
        case .body(.byteBuffer(let body)):
            self.writeBody(body, context: context)
        case .body(.fileRegion):
            preconditionFailure("the gateway never writes file regions")
        case .end(let trailers):
            self.writeEnd(trailers, closing: false)
        }
    }

    func writeResponseHead(fromUpstream head: UpstreamResponseHead, version: HTTPVersion, close: Bool, hsts: String?) {
        guard let context = self.context else { return }
        var buffer = self.takeOutput(context: context)
        self.serializer.writeUpstreamHead(head, version: version, close: close, hsts: hsts, requestMethod: self.requestMethod, into: &buffer)
        self.output = buffer
        // A head that told the client `Connection: close` binds the connection to close after this response
        // (RFC 9112 §9.6), also when the exchange's reason for it is gone by the end: a request whose body was
        // still coming when the backend answered has ended by then, and the client waits for the close.
        if close {
            self.closeAfterResponse = true
        }
    }

    func writeEnd(_ trailers: HTTPHeaders?, closing: Bool) {
        guard let context = self.context else { return }
        self.responseEndWritten = true
        // An HTTP/1.0 body of unknown length ends with the connection, whatever the exchange decided; and so does a
        // response whose head said `Connection: close`.
        let closing = closing || self.closeAfterResponse || self.serializer.closesToDelimitBody
        if closing {
            self.closeAfterResponse = true
        }
        guard self.output != nil || self.serializer.endHasBytes || closing else {
            self.serializer.reset()  // A body that ended with a large part already written: nothing is left.
            return
        }
        var buffer = self.takeOutput(context: context)
        self.serializer.writeEnd(trailers, into: &buffer)
        ClientOutputBuffers.output.giveBack(buffer)
        if closing {
            // Kept so that the close waits until the response is out; a promise per request only when needed.
            let promise = context.eventLoop.makePromise(of: Void.self)
            self.lastResponseEnd = promise.futureResult
            context.write(self.wrapOutboundOut(buffer), promise: promise)
        } else {
            context.write(self.wrapOutboundOut(buffer), promise: nil)
        }
    }

    func flush() {
        guard let context = self.context else { return }
        self.writeOutput(context: context)
        context.flush()
    }

    /// The current response's buffer, taken out of ``output`` so that writing into it does not copy it; a new
    /// response's from the thread's lent buffer (``ClientOutputBuffers``), given back when it is written.
    private func takeOutput(context: ChannelHandlerContext) -> ByteBuffer {
        self.output.take() ?? ClientOutputBuffers.output.take(allocator: context.channel.allocator, minimumCapacity: 512)
    }

    /// Hands what was gathered of the current response to the pipeline.
    private func writeOutput(context: ChannelHandlerContext) {
        if let buffer = self.output.take(), buffer.readableBytes > 0 {
            ClientOutputBuffers.output.giveBack(buffer)
            context.write(self.wrapOutboundOut(buffer), promise: nil)
        }
    }

    private func writeBody(_ body: ByteBuffer, context: ChannelHandlerContext) {
        guard self.serializer.framing != .none, body.readableBytes > 0 else { return }
        var buffer = self.takeOutput(context: context)
        if body.readableBytes <= ByteBuffer.http1CopyLimit {
            self.serializer.writeBody(body, into: &buffer)
            self.output = buffer
            return
        }
        // Large: what was gathered (and the chunk's size line) goes first, then the part itself, uncopied.
        let chunked = self.serializer.framing == .chunked
        if chunked {
            buffer.writeChunkSizeLine(body.readableBytes)
        }
        self.output = buffer
        self.writeOutput(context: context)
        context.write(self.wrapOutboundOut(body), promise: nil)
        if chunked {
            var suffix = context.channel.allocator.buffer(capacity: 64)
            suffix.writeStaticString("\r\n")
            self.output = suffix
        }
    }

    func setRequestReadingPaused(_ paused: Bool) {
        self.readingPaused = paused
        self.readIfHeldBack()
    }

    /// Passes on the read held back while paused, once nothing pauses reading any more.
    private func readIfHeldBack() {
        if !self.readingPaused, !self.pipelinePaused, self.pendingRead, let context = self.context {
            self.pendingRead = false
            context.read()
        }
    }

    func exchangeCompleted(closeConnection: Bool, requestEnded: Bool) {
        guard let context = self.context else { return }
        self.setRequestReadingPaused(false)
        let close = closeConnection || self.closeWhenIdle || self.closeAfterResponse
        if !requestEnded {
            self.state = .discarding(close: close)
            context.flush()
            self.resumeParsing(context: context)
            if close {
                // Give the client a moment to read the answer before the socket goes: closing at once with
                // unread body bytes in the kernel becomes a reset that can eat the answer. A client that
                // finishes its body sooner gets the close at its `.end`.
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(200)) {
                    if case .discarding = self.state {
                        self.state = .closed
                        context.close(promise: nil)
                    }
                }
            }
            return
        }
        if close {
            self.state = .closed
            context.flush()
            if let written = self.lastResponseEnd {
                written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            } else {
                context.close(promise: nil)
            }
        } else {
            self.state = .idle
            self.readDeadlines.awaitNextHead()
            context.flush()
            self.resumeParsing(context: context)
        }
    }

    /// Parses what arrived for later requests while the previous exchange was in flight. Each may start and
    /// even finish an exchange; parsing stops again as soon as an exchange is in flight with its request read,
    /// and reading resumes once nothing is left.
    private func resumeParsing(context: ChannelHandlerContext) {
        guard !self.parsing else { return }  // Inside a read: its loop goes on, and channelReadComplete follows.
        guard self.unparsed != nil else {
            self.pipelinePaused = false
            self.readIfHeldBack()
            return
        }
        self.parseAndProcess(context: context)
        // These parts came outside a read batch: no channelReadComplete follows to push them upstream.
        if case .exchanging(let exchange) = self.state {
            exchange.clientReadComplete()
        }
        self.readIfHeldBack()
    }

    func abort() {
        guard let context = self.context else { return }
        self.state = .closed
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension HTTP1ConnectionHandler: Sendable {}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Prometheus
#if canImport(Glibc)
import Glibc  // `linger`, for the abortive close of a client that reads too slowly.
#endif
import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
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
final class HTTP1ConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler, ExchangeClient {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Which request is in flight, what may be parsed next, when reads are held back and when to close: the
    /// connection's state, a value this handler drives (its contract is ``HTTP1ConnectionStateMachine``'s).
    private var machine: HTTP1ConnectionStateMachine
    /// The exchange of the request in flight, from its head until it completes.
    private var exchange: ProxyExchange?
    private let generations: GatewayGenerationHolder
    private let logger: Logger
    let clientAddress: String?
    let viaTrustedProxy: Bool
    let listenerIndex: Int
    let certificateNames: TLSCertificateNames?
    /// Set on a `forward_auth` listener: each exchange is a front proxy's check, answered and never forwarded.
    private let forwardAuth: ForwardAuthCheck?
    private var context: ChannelHandlerContext?
    /// Set only when the connection closes after the current response: the close waits for its write.
    private var lastResponseEnd: EventLoopFuture<Void>?
    /// The idle timeout and the slowloris guard, told about every read, when a head arrived and when the next
    /// one is due.
    private let readDeadlines: HTTP1ReadDeadlines
    /// ``parseAndProcess(context:)`` is on the stack: an exchange completing inside it must not start another
    /// loop (a pipeline of requests answered at once would nest one loop per request).
    private var parsing = false
    private let connectionID: String
    /// The method of the request being answered: a response to `HEAD` has no body.
    private var requestMethod: HTTPMethod = .GET
    private var serializer = HTTP1ResponseSerializer()
    /// The current response's bytes not yet written to the pipeline: written at its end, at a flush, or
    /// before a large body part.
    private var output: ByteBuffer?
    /// Response bytes handed to the pipeline on this connection: less what still waits in the channel, what
    /// the client took (``SlowClientWatch``).
    private var bytesWritten = 0
    /// Made when the client first falls behind (the channel's write buffer passed its high mark); looks at it
    /// while bytes wait for it.
    private var slowClient: SlowClientWatch?
    /// ``bytesWritten`` when the current response began: how large it is, at its end.
    private var responseStart = 0

    init(
        generations: GatewayGenerationHolder,
        clientAddress: String?,
        viaTrustedProxy: Bool = false,
        listenerIndex: Int = 0,
        certificateNames: TLSCertificateNames? = nil,
        forwardAuth: ForwardAuthCheck? = nil,
        readDeadlines: HTTP1ReadDeadlines,
        logger: Logger
    ) {
        self.listenerIndex = listenerIndex
        self.certificateNames = certificateNames
        self.forwardAuth = forwardAuth
        self.generations = generations
        self.readDeadlines = readDeadlines
        self.viaTrustedProxy = viaTrustedProxy
        self.clientAddress = clientAddress
        self.logger = logger
        self.connectionID = RequestRewriter.newConnectionID()
        self.machine = HTTP1ConnectionStateMachine(limits: HTTP1RequestParser.Limits(generations.load().runtime.limits))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        _ = self.machine.writabilityChanged(isWritable: context.channel.isWritable)
        // Added after a TLS handshake the channel is active already; on a plain listener it becomes active later.
        if context.channel.isActive {
            self.startReadDeadlines(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.readDeadlines.stop()
        self.slowClient?.stop()
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
        self.machine.bytesRead(bytes)
        self.parseAndProcess(context: context)
        self.readDeadlines.bytesParsed(context: context)
    }

    /// Runs what the machine finds in the bytes read, as far as its state allows: bytes of a request that
    /// follows the one in flight stay unparsed (and reading pauses) until that one is answered.
    private func parseAndProcess(context: ChannelHandlerContext) {
        guard !self.parsing else { return }  // The loop further up the stack goes on with the new state.
        self.parsing = true
        defer { self.parsing = false }
        while true {
            switch self.machine.nextRequestAction() {
            case .wait:
                return
            case .startExchange(let head, let requestNumber, let closeRequested):
                self.startExchange(head, requestNumber: requestNumber, closeRequested: closeRequested, context: context)
            case .forwardBody(let buffer):
                self.exchange?.receivedBody(buffer)
            case .forwardEnd(let trailers):
                self.exchange?.receivedEnd(trailers)
            case .awaitNextHead:
                self.readDeadlines.awaitNextHead()
            case .answerAndClose(let answer):
                self.answer(answer, context: context)
                return
            case .abortExchange(let answer):
                // A broken request body (a bad chunk line, oversized trailers) of a request already in flight: the
                // exchange ends, its upstream connection is closed (it saw part of a request), and the client
                // gets the 400 that names the rule unless a response has begun already, when all that is left is
                // to cut it short.
                self.exchange.take()?.requestBodyBroken()
                if let answer {
                    // The exchange logged and counted the request under its route (`malformed_http`); this answer
                    // to it is not one more request, and not an unrouted one.
                    self.answer(answer, counted: false, context: context)
                } else {
                    context.close(promise: nil)
                }
                return
            case .close:
                context.close(promise: nil)
                return
            }
        }
    }

    private func startExchange(_ head: ClientRequestHead, requestNumber: Int, closeRequested: Bool, context: ChannelHandlerContext) {
        self.readDeadlines.headReceived()
        self.requestMethod = head.method
        self.responseStart = self.bytesWritten
        let requestID = RequestRewriter.requestID(from: head) { self.connectionID + "-" + String(requestNumber) }
        // One atomic load per request: the configuration it is served with, even across a reload.
        let generation = self.generations.load()
        let exchange = ProxyExchange(
            head: head,
            requestID: requestID,
            client: self,
            runtime: generation.runtime,
            pools: generation.pools.pools(for: context.eventLoop),
            tokenCache: generation.tokenCaches.cache(for: context.eventLoop),
            logger: self.logger,
            closeRequested: closeRequested,
            forwardAuth: self.forwardAuth
        )
        self.exchange = exchange
        exchange.begin()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.readDeadlines.readBatchEnded(context: context)
        self.exchange?.clientReadComplete()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.readDeadlines.stop()
        self.slowClient?.stop()
        self.connectionClosed()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if !context.channel.isWritable {
            self.clientFellBehind(context: context)
        }
        self.updateWritability(context: context)
        context.fireChannelWritabilityChanged()
    }

    /// Tells the machine (and so the exchange) whether the client takes more response now: while the channel
    /// is writable, or while what waits in it fits the client's grant (``SlowClientWatch``), down to half of
    /// that once it did not fit, so a reader at the limit does not flap.
    private func updateWritability(context: ChannelHandlerContext) {
        var writable = context.channel.isWritable
        // The grant is for the response in flight (so that its backend connection is released); between
        // exchanges only the channel counts, so a client that takes nothing has no further answers queued.
        if !writable, self.exchange != nil, let granted = self.slowClient?.granted, granted > 0 {
            let limit = SlowClientWatch.ownBuffer + granted
            writable = self.bufferedBytes(context) <= (self.machine.isWritable ? limit : limit / 2)
        }
        guard writable != self.machine.isWritable else { return }
        switch self.machine.writabilityChanged(isWritable: writable) {
        case .tellExchange(let isWritable):
            self.exchange?.clientWritabilityChanged(isWritable: isWritable)
        case .resumeParsing:
            self.resumeParsing(context: context)  // What waited for the answers before it to be taken.
        case .none:
            break
        }
    }

    private func bufferedBytes(_ context: ChannelHandlerContext) -> Int {
        (try? context.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) ?? 0
    }

    /// The channel's write buffer passed its high mark: from now on a grant of `limits.response_buffer_per_connection`
    /// (when the budget has one) lets the exchange read on, and the client's pace is watched while bytes wait.
    private func clientFellBehind(context: ChannelHandlerContext) {
        let runtime = self.exchange?.runtime ?? self.generations.load().runtime
        let watch: SlowClientWatch
        if let existing = self.slowClient {
            watch = existing
        } else {
            // The rate of the route whose response the client first fell behind on.
            let rate = self.exchange?.routeIndex.map { runtime.routes[$0].responseMinRate } ?? runtime.limits.responseMinRate
            watch = SlowClientWatch(
                eventLoop: context.eventLoop,
                budget: runtime.responseBuffers,
                timeout: TimeAmount(runtime.limits.responseSendTimeout),
                minimumRate: rate
            )
            self.slowClient = watch
        }
        _ = watch.takeGrant(runtime.limits.responseBufferPerConnection)
        watch.start {
            self.lookAtSlowClient()
        }
    }

    /// A large response ended without the client falling behind in the gateway: the kernel's send buffer (which
    /// Linux grows to megabytes, even for a reader whose window is shut) may hold the rest of it for a client that
    /// reads a few bytes a second. One `TCP_INFO` read per response of more than 64 KiB (which took several writes
    /// already) says so; such a client is watched (and cut below its route's rate) like one that fell behind in
    /// the gateway. Not on a route whose rate check is off: there is nothing to watch for.
    private func watchIfTheKernelHoldsTheResponse(context: ChannelHandlerContext) {
        let runtime = self.exchange?.runtime ?? self.generations.load().runtime
        let rate = self.exchange?.routeIndex.map { runtime.routes[$0].responseMinRate } ?? runtime.limits.responseMinRate
        guard rate > 0, let progress = TCPSendProgress.read(context.channel), progress.notSent > 0 else { return }
        self.clientFellBehind(context: context)
    }

    /// Once a second while bytes wait for a client that fell behind: cut it when it is below its rate, stop
    /// watching (and give its grant back) once nothing waits.
    private func lookAtSlowClient() {
        guard let context = self.context, let watch = self.slowClient else { return }
        let buffered = self.bufferedBytes(context)
        // What the client's TCP acknowledged, not what left for the kernel's send buffer (which Linux grows to
        // megabytes for a peer whose window is shut); bytes in that buffer wait for the client as much as ours.
        let sent: Int
        let waiting: Bool
        if let progress = TCPSendProgress.read(context.channel) {
            sent = progress.acknowledged
            waiting = buffered > 0 || progress.notSent > 0
        } else {
            sent = self.bytesWritten - buffered
            waiting = buffered > 0
        }
        if watch.observe(sent: sent, waiting: waiting) {
            watch.stop()
            let exchange = self.exchange.take()
            _ = self.machine.connectionClosed()
            if let exchange {
                exchange.clientTooSlow()
            } else {
                // The response is all in the gateway and was logged when it ended; this says why it is cut.
                self.logger.info("response cut", metadata: ["reason": "client_too_slow", "buffered": "\(buffered)"])
            }
            // An abortive close (RST), as nginx's `reset_timedout_connection`: the kernel drops what this client
            // has not taken, instead of holding it for as long as the client takes to read it.
            if let socket = context.channel as? any SocketOptionProvider {
                socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            } else {
                context.close(promise: nil)
            }
            return
        }
        if !waiting, context.channel.isWritable {
            watch.stop()
        }
        self.updateWritability(context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is GatewayShutdownEvent {
            if self.machine.shutdownRequested() {
                context.close(promise: nil)
            }
            return
        }
        if event is GatewayDrainEndedEvent {
            self.exchange?.drainEnded()
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
        switch self.machine.idleTimedOut(exchangeReadsBody: self.exchange?.isReadingRequestBody ?? false) {
        case .close:
            context.close(promise: nil)
        case .closeWithExchange:
            self.exchange.take()?.clientClosed()
            context.close(promise: nil)
        case .none:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let tlsError = error as? TLSError {
            self.generations.load().runtime.metrics.recordTLSFailure(tlsError.code.description)
        } else {
            self.logger.debug("client connection error", metadata: ["error": "\(error)"])
        }
        self.connectionClosed()
        context.close(promise: nil)
    }

    /// The connection is gone or going: an exchange in flight hears of it as the client's close.
    private func connectionClosed() {
        let exchange = self.exchange.take()
        if self.machine.connectionClosed() {
            exchange?.clientClosed()
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
            var record = AccessLogRecord(status: answer.status.code, reason: answer.reasonCode)
            record.client = self.clientAddress
            self.logger.info("request", metadata: record.metadata)
        }
        context.close(promise: nil)
    }

    // MARK: A WebSocket tunnel takes the connection over.

    var channel: (any Channel)? { self.context?.channel }

    /// After the backend's `101`: `tunnel` takes this handler's place in the pipeline (the TLS handler stays in
    /// front), the read deadlines stop (the tunnel has its own idle timeout), and the bytes read behind the
    /// upgrade request are returned for the tunnel. `nil` when the connection is gone already.
    func handOver(to tunnel: WebSocketClientHandler) -> WebSocketHandOver? {
        guard let context = self.context else { return nil }
        let unparsed = self.machine.handOver()
        self.exchange = nil
        do {
            try context.pipeline.syncOperations.addHandler(tunnel, position: .after(self))
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        } catch {
            context.close(promise: nil)
            return nil
        }
        return WebSocketHandOver(unparsed: unparsed)
    }

    // MARK: Outbound: backpressure on the client's reads.

    func read(context: ChannelHandlerContext) {
        if self.machine.readRequested() {
            context.read()
        }
    }
}

// MARK: The exchange's view of this connection.

extension HTTP1ConnectionHandler {
    var eventLoop: any EventLoop { self.context!.eventLoop }
    var allocator: ByteBufferAllocator { self.context!.channel.allocator }
    var isWritable: Bool { self.context != nil && self.machine.isWritable }
    var closesConnectionOnAnswer: Bool { true }
    var isDraining: Bool { self.machine.isDraining }
    var isRequestBodyHeldBack: Bool { false }

    func write(_ part: HTTPServerResponsePart) {
        guard let context = self.context else { return }
        switch part {
        case .head(let head):
            self.machine.responseHeadWritten(status: head.status)
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

    func writeResponseHead(
        fromUpstream head: UpstreamResponseHead, version: HTTPVersion, close: Bool, hsts: String?, added: [ResponseField]
    ) {
        guard let context = self.context else { return }
        var buffer = self.takeOutput(context: context)
        self.serializer.writeUpstreamHead(
            head, version: version, close: close, hsts: hsts, added: added, requestMethod: self.requestMethod, into: &buffer)
        self.output = buffer
        // A head that told the client `Connection: close` binds the connection to close after this response
        // (RFC 9112 §9.6), also when the exchange's reason for it is gone by the end: a request whose body was
        // still coming when the backend answered has ended by then, and the client waits for the close.
        if close {
            self.machine.responseHeadSaysClose()
        }
    }

    func writeEnd(_ trailers: HTTPHeaders?, closing: Bool) {
        guard let context = self.context else { return }
        // An HTTP/1.0 body of unknown length ends with the connection, whatever the exchange decided; and so does a
        // response whose head said `Connection: close`.
        let closing = self.machine.responseEnded(closing: closing || self.serializer.closesToDelimitBody)
        guard self.output != nil || self.serializer.endHasBytes || closing else {
            self.serializer.reset()  // A body that ended with a large part already written: nothing is left.
            return
        }
        var buffer = self.takeOutput(context: context)
        self.serializer.writeEnd(trailers, into: &buffer)
        ClientOutputBuffers.output.giveBack(buffer)
        self.bytesWritten &+= buffer.readableBytes
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
        if self.slowClient?.granted ?? 0 > 0 {
            self.updateWritability(context: context)  // Past the grant: the exchange holds the backend's reads.
        }
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
            self.bytesWritten &+= buffer.readableBytes
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
        self.bytesWritten &+= body.readableBytes
        context.write(self.wrapOutboundOut(body), promise: nil)
        if chunked {
            var suffix = context.channel.allocator.buffer(capacity: 64)
            suffix.writeStaticString("\r\n")
            self.output = suffix
        }
    }

    func setRequestReadingPaused(_ paused: Bool) {
        if self.machine.setRequestReadingPaused(paused), let context = self.context {
            context.read()
        }
    }

    /// Passes on the read held back while paused, once nothing pauses reading any more.
    private func readIfHeldBack() {
        if let context = self.context, self.machine.takeHeldRead() {
            context.read()
        }
    }

    func exchangeCompleted(closeConnection: Bool, requestEnded: Bool) {
        guard let context = self.context else { return }
        self.setRequestReadingPaused(false)
        if self.bytesWritten &- self.responseStart > SlowClientWatch.ownBuffer, !(self.slowClient?.isLooking ?? false) {
            self.watchIfTheKernelHoldsTheResponse(context: context)
        }
        self.exchange = nil
        if self.machine.isWritable, !context.channel.isWritable {
            // Writable only by the finished response's grant: the next request waits for the client to read.
            _ = self.machine.writabilityChanged(isWritable: false)
        }
        switch self.machine.exchangeCompleted(closeConnection: closeConnection, requestEnded: requestEnded) {
        case .discardRequest(let closeSoon):
            context.flush()
            self.resumeParsing(context: context)
            if closeSoon {
                // Give the client a moment to read the answer before the socket goes: closing at once with
                // unread body bytes in the kernel becomes a reset that can eat the answer. A client that
                // finishes its body sooner gets the close at its `.end`.
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(200)) {
                    if self.machine.discardGraceEnded() {
                        context.close(promise: nil)
                    }
                }
            }
        case .closeAfterWrite:
            context.flush()
            if let written = self.lastResponseEnd {
                written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            } else {
                context.close(promise: nil)
            }
        case .awaitNextHead:
            self.readDeadlines.awaitNextHead()
            context.flush()
            self.resumeParsing(context: context)
        case .none:
            break
        }
    }

    /// Parses what arrived for later requests while the previous exchange was in flight. Each may start and
    /// even finish an exchange; parsing stops again as soon as an exchange is in flight with its request read,
    /// and reading resumes once nothing is left.
    private func resumeParsing(context: ChannelHandlerContext) {
        guard !self.parsing else { return }  // Inside a read: its loop goes on, and channelReadComplete follows.
        switch self.machine.parsingResumes() {
        case .parse:
            break
        case .read:
            context.read()
            return
        case .none:
            return
        }
        self.parseAndProcess(context: context)
        // These parts came outside a read batch: no channelReadComplete follows to push them upstream.
        self.exchange?.clientReadComplete()
        self.readIfHeldBack()
    }

    /// The head is written with the first flush after it, which follows the read it came in: by the time the
    /// backend can fail, it is the client's.
    func withdrawResponseHead() -> Bool {
        false
    }

    func abort() {
        guard let context = self.context else { return }
        self.exchange = nil
        _ = self.machine.connectionClosed()
        context.close(promise: nil)
    }
}
@available(*, unavailable)
extension HTTP1ConnectionHandler: Sendable {}

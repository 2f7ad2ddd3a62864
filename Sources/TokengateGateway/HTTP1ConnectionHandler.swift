//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateTokens

/// The gateway's side of one client HTTP/1.1 connection: route, authorize, forward, stream back.
///
/// ### Overview
/// `HTTPServerPipelineHandler` sits before this handler, so requests arrive one at a time: the next
/// head is only delivered once this handler has written the previous response's `.end`.
///
/// ### Function
/// For each request the state moves `idle → (readingBody →) awaitingUpstream → forwarding → idle`, or
/// straight to an answer written here. Bodies stream both ways with backpressure: while the upstream
/// connection is not there yet or not writable, `read()` on the client channel is held back; while the
/// client is not writable, the upstream connection's reads are held back.
///
/// ### Failure
/// A backend that fails before its response starts gets a 502/503/504 answer; one that fails after
/// the response started makes the client connection close, so the client sees a truncated response and
/// never a clean end.
final class HTTP1ConnectionHandler: ChannelDuplexHandler, UpstreamResponseReceiver {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// One request in flight.
    private struct Exchange {
        var head: HTTPRequestHead
        var routeName: String
        var upstreamIndex: Int
        var upstreamHead: HTTPRequestHead?
        var identity: VerifiedToken?
        var requestID: String
        var start: NIODeadline
        var keepAlive: Bool
        /// Targets that already refused a connection for this request.
        var triedTargets: Set<Int> = []
        /// Request body parts received while no upstream connection was ready yet.
        var queued: [HTTPServerRequestPart] = []
        var requestEnded = false
        /// Every body byte was kept (no body, or a body read to look for a token): a retry can resend it.
        var replayableBody: ByteBuffer?
        var responseStarted = false
        var status: HTTPResponseStatus?
    }

    private enum State {
        case idle
        /// Reading a form or JSON body to look for the token in it.
        case readingBody(Exchange, route: Int, body: ByteBuffer, limit: Int)
        case awaitingUpstream(Exchange)
        case forwarding(Exchange, UpstreamConnection)
        /// An answer was written before the request ended: its remaining parts are dropped; at its end the
        /// connection waits for the next request, or closes when the answer said so.
        case discarding(close: Bool)
        case closed
    }

    private var state: State = .idle
    private let runtime: GatewayRuntime
    private let pools: LoopUpstreamPools
    private let logger: Logger
    private let clientAddress: String?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private var responseTimer: Scheduled<Void>?
    private var requestCounter = 0
    private let connectionID: String
    /// Set by graceful shutdown: finish the exchange in flight, then close.
    private var closeWhenIdle = false

    init(runtime: GatewayRuntime, pools: LoopUpstreamPools, clientAddress: String?, logger: Logger) {
        self.runtime = runtime
        self.pools = pools
        self.clientAddress = clientAddress
        self.logger = logger
        self.connectionID = String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: Inbound from the client.

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .closed = self.state {
            return  // Pipelined bytes after a close: never acted upon.
        }
        let part = self.unwrapInboundIn(data)
        switch part {
        case .head(let head):
            self.receivedHead(head, context: context)
        case .body(let buffer):
            self.receivedBody(buffer, context: context)
        case .end(let trailers):
            self.receivedEnd(trailers, context: context)
        }
    }

    private func receivedHead(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        guard case .idle = self.state else {
            preconditionFailure("a request head arrived while another request was in flight: \(self.state)")
        }
        self.requestCounter += 1
        let requestID = RequestRewriter.requestID(from: head) { "\(self.connectionID)-\(self.requestCounter)" }
        var exchange = Exchange(
            head: head,
            routeName: "-",
            upstreamIndex: 0,
            requestID: requestID,
            start: .now(),
            keepAlive: head.isKeepAlive && !self.closeWhenIdle
        )
        if let answer = self.validate(head) {
            self.answer(answer, exchange: exchange, requestEnded: false, context: context)
            return
        }
        guard let routeIndex = self.runtime.routeTable.match(host: head.headers.first(name: "host"), path: head.uri)
        else {
            self.answer(.noRoute(), exchange: exchange, requestEnded: false, context: context)
            return
        }
        let route = self.runtime.routes[routeIndex]
        exchange.routeName = route.name
        exchange.upstreamIndex = route.upstreamIndex
        self.authorize(exchange, route: routeIndex, body: nil, context: context)
    }

    /// Runs the authorizer and acts on its decision. `body` is the whole request body when the
    /// authorizer asked for it, and `nil` on the first call.
    private func authorize(_ exchange: Exchange, route routeIndex: Int, body: ByteBuffer?, context: ChannelHandlerContext) {
        var exchange = exchange
        let route = self.runtime.routes[routeIndex]
        let authorizer = RequestAuthorizer(route: route, verifier: self.runtime.verifier, realm: self.runtime.realm)
        let bodyBytes = body.map { Array($0.readableBytesView) }
        let decision = authorizer.decide(
            head: exchange.head,
            body: bodyBytes,
            cutoffs: self.runtime.cutoffs.load(),
            now: self.runtime.now()
        )
        switch decision {
        case .answer(let answer):
            // With a body the request has ended (the body was read to its end); without, `.end` is still due.
            self.answer(answer, exchange: exchange, requestEnded: body != nil, context: context)
        case .readBody(let limit):
            guard body == nil else {
                // The authorizer asked for the body it was just given: a bug, never a forward.
                self.answer(.malformedHTTP("the request body could not be read"), exchange: exchange, requestEnded: true, context: context)
                return
            }
            let size = exchange.head.headers.first(name: "content-length").flatMap(Int.init) ?? 0
            if size > limit {
                self.answer(.payloadTooLarge(), exchange: exchange, requestEnded: false, context: context)
                return
            }
            self.state = .readingBody(exchange, route: routeIndex, body: context.channel.allocator.buffer(capacity: size), limit: limit)
        case .forward(let identity, let strip):
            var newBody: ByteBuffer?
            if let strip, let bodyBytes {
                switch strip {
                case .form(let field):
                    newBody = ByteBuffer(bytes: FormURLEncoded.removing(field, from: bodyBytes))
                case .json(let field):
                    newBody = JSONBody.removing(field, from: bodyBytes).map { ByteBuffer(bytes: $0) }
                case .authorization, .header, .cookie:
                    break
                }
            }
            exchange.identity = identity
            exchange.upstreamHead = RequestRewriter.upstreamHead(
                from: exchange.head,
                identity: identity,
                strip: strip,
                newBodyLength: newBody?.readableBytes ?? body?.readableBytes,
                forwarding: .init(clientAddress: self.clientAddress, requestID: exchange.requestID, scheme: "https")
            )
            if body != nil {
                exchange.requestEnded = true
                exchange.replayableBody = newBody ?? body
            } else if !TokenExtractor.hasBody(exchange.head.headers) {
                exchange.replayableBody = context.channel.allocator.buffer(capacity: 0)
            }
            self.state = .awaitingUpstream(exchange)
            self.connectUpstream(context: context)
        }
    }

    private func receivedBody(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        switch self.state {
        case .readingBody(let exchange, let route, var body, let limit):
            if body.readableBytes + buffer.readableBytes > limit {
                self.answer(.payloadTooLarge(), exchange: exchange, requestEnded: false, context: context)
                return
            }
            self.state = .closed  // Parked while the buffer is mutated, so it is not copied on write.
            var buffer = buffer
            body.writeBuffer(&buffer)
            self.state = .readingBody(exchange, route: route, body: body, limit: limit)
        case .awaitingUpstream(var exchange):
            self.state = .closed
            exchange.queued.append(.body(buffer))
            exchange.replayableBody = nil
            self.state = .awaitingUpstream(exchange)
        case .forwarding(var exchange, let connection):
            exchange.replayableBody = nil
            self.state = .forwarding(exchange, connection)
            connection.channel.write(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: nil)
        case .discarding, .closed:
            break
        case .idle:
            preconditionFailure("a body part arrived with no request in flight")
        }
    }

    private func receivedEnd(_ trailers: HTTPHeaders?, context: ChannelHandlerContext) {
        switch self.state {
        case .readingBody(let exchange, let route, let body, _):
            self.state = .idle
            self.authorize(exchange, route: route, body: body, context: context)
        case .awaitingUpstream(var exchange):
            self.state = .closed
            exchange.queued.append(.end(trailers))
            exchange.requestEnded = true
            self.state = .awaitingUpstream(exchange)
        case .forwarding(var exchange, let connection):
            exchange.requestEnded = true
            self.state = .forwarding(exchange, connection)
            connection.channel.writeAndFlush(HTTPClientRequestPart.end(trailers), promise: nil)
            self.startResponseTimer(connection: connection, context: context)
        case .discarding(let close):
            if close {
                // The client was told `Connection: close`: honour it now that its request is read.
                self.state = .closed
                context.close(promise: nil)
            } else {
                self.state = .idle
                self.replayPendingRead(context: context)
            }
        case .closed:
            break
        case .idle:
            preconditionFailure("a request end arrived with no request in flight")
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if case .forwarding(_, let connection) = self.state {
            connection.channel.flush()
        }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.responseTimer?.cancel()
        switch self.state {
        case .forwarding(let exchange, let connection):
            // The client went away mid-exchange: the upstream connection is in an unknown state.
            connection.handler.receiver = nil
            self.pools.pools[exchange.upstreamIndex].release(connection, reusable: false)
        case .idle, .readingBody, .awaitingUpstream, .discarding, .closed:
            break
        }
        self.state = .closed
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if case .forwarding(_, let connection) = self.state {
            if context.channel.isWritable {
                connection.handler.resumeReading(channel: connection.channel)
            } else {
                connection.handler.pauseReading()
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is GatewayShutdownEvent {
            self.closeWhenIdle = true
            if case .idle = self.state {
                context.close(promise: nil)
            }
            return
        }
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            // No bytes from the client for the idle timeout. Between requests or while it should be
            // sending a body, that ends the connection; while the backend works, the response timeout
            // is the one that counts.
            switch self.state {
            case .idle, .readingBody, .discarding:
                self.state = .closed
                context.close(promise: nil)
            case .awaitingUpstream, .forwarding, .closed:
                break
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let parserError = error as? HTTPParserError {
            let answer: GatewayAnswer =
                parserError == .headerOverflow ? .headersTooLarge() : .malformedHTTP("the request is not valid HTTP/1.1")
            switch self.state {
            case .idle:
                self.writeAnswer(answer, version: .http1_1, context: context)
                self.logAnswer(answer, method: "-", path: "-", route: "-")
            case .readingBody, .awaitingUpstream, .forwarding, .discarding, .closed:
                break
            }
        } else {
            self.logger.debug("client connection error", metadata: ["error": "\(error)"])
        }
        self.abortUpstream()
        self.state = .closed
        context.close(promise: nil)
    }

    // MARK: Outbound: backpressure on the client's reads.

    func read(context: ChannelHandlerContext) {
        switch self.state {
        case .awaitingUpstream:
            self.pendingRead = true
        case .forwarding(_, let connection) where !connection.channel.isWritable:
            self.pendingRead = true
        case .idle, .readingBody, .forwarding, .discarding, .closed:
            context.read()
        }
    }

    private func replayPendingRead(context: ChannelHandlerContext) {
        if self.pendingRead {
            self.pendingRead = false
            context.read()
        }
    }
}

// MARK: The upstream side.

extension HTTP1ConnectionHandler {
    private var upstreamIndex: Int {
        switch self.state {
        case .awaitingUpstream(let exchange), .forwarding(let exchange, _), .readingBody(let exchange, _, _, _):
            exchange.upstreamIndex
        case .idle, .discarding, .closed:
            0
        }
    }

    private func connectUpstream(context: ChannelHandlerContext) {
        guard case .awaitingUpstream(let exchange) = self.state else { return }
        let pool = self.pools.pools[exchange.upstreamIndex]
        pool.acquire(excluding: exchange.triedTargets).assumeIsolated().whenComplete { result in
            guard let context = self.context, case .awaitingUpstream = self.state else {
                // The client went away while we connected: the connection is fresh and clean, keep it.
                if case .success(let connection) = result { pool.release(connection, reusable: true) }
                return
            }
            switch result {
            case .success(let connection):
                self.upstreamConnected(connection, context: context)
            case .failure(let error):
                self.upstreamUnavailable(error as? UpstreamError ?? .connectFailed, context: context)
            }
        }
    }

    private func upstreamConnected(_ connection: UpstreamConnection, context: ChannelHandlerContext) {
        guard case .awaitingUpstream(var exchange) = self.state, let head = exchange.upstreamHead else {
            preconditionFailure("an upstream connection arrived with no request waiting for it")
        }
        exchange.triedTargets.insert(connection.targetIndex)
        connection.handler.receiver = self
        if !context.channel.isWritable {
            connection.handler.pauseReading()
        }
        let queued = exchange.queued
        exchange.queued = []
        self.state = .forwarding(exchange, connection)
        connection.channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if let body = exchange.replayableBody, exchange.requestEnded {
            if body.readableBytes > 0 {
                connection.channel.write(HTTPClientRequestPart.body(.byteBuffer(body)), promise: nil)
            }
            if queued.isEmpty {
                connection.channel.write(HTTPClientRequestPart.end(nil), promise: nil)
            }
        }
        for part in queued {
            switch part {
            case .head: preconditionFailure("a queued request part was a head")
            case .body(let buffer): connection.channel.write(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: nil)
            case .end(let trailers): connection.channel.write(HTTPClientRequestPart.end(trailers), promise: nil)
            }
        }
        connection.channel.flush()
        if exchange.requestEnded {
            self.startResponseTimer(connection: connection, context: context)
        }
        self.replayPendingRead(context: context)
    }

    private func upstreamUnavailable(_ error: UpstreamError, context: ChannelHandlerContext) {
        guard case .awaitingUpstream(let exchange) = self.state else { return }
        let answer: GatewayAnswer =
            error == .noTargetAvailable
            ? .serviceUnavailable("no backend is available", reason: error.code)
            : .badGateway("the backend could not be reached", reason: error.code)
        self.answer(answer, exchange: exchange, requestEnded: exchange.requestEnded, context: context)
    }

    private func startResponseTimer(connection: UpstreamConnection, context: ChannelHandlerContext) {
        self.responseTimer?.cancel()
        let timeout = self.runtime.upstreams[self.upstreamIndex].responseTimeout
        self.responseTimer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            self.responseTimedOut()
        }
    }

    private func responseTimedOut() {
        guard let context = self.context, case .forwarding(let exchange, let connection) = self.state else { return }
        self.responseTimer = nil
        connection.handler.receiver = nil
        self.pools.pools[exchange.upstreamIndex].release(connection, reusable: false)
        if exchange.responseStarted {
            self.state = .closed
            context.close(promise: nil)
        } else {
            self.state = .awaitingUpstream(exchange)
            self.answer(.gatewayTimeout(), exchange: exchange, requestEnded: exchange.requestEnded, context: context)
        }
    }

    func upstreamReceived(_ part: HTTPClientResponsePart) {
        guard let context = self.context, case .forwarding(var exchange, let connection) = self.state else { return }
        switch part {
        case .head(let head):
            if head.status.code < 200 {
                return  // 1xx from the backend: interim, not forwarded (100-continue is handled hop by hop).
            }
            self.responseTimer?.cancel()
            self.responseTimer = nil
            exchange.responseStarted = true
            exchange.status = head.status
            if !exchange.requestEnded {
                // The backend answered before the body was all sent (an early 413, say): after this
                // response the connection's framing is unknown on both sides.
                exchange.keepAlive = false
            }
            self.state = .forwarding(exchange, connection)
            let clientHead = RequestRewriter.clientResponseHead(
                from: head,
                version: exchange.head.version,
                close: !exchange.keepAlive
            )
            context.write(self.wrapOutboundOut(.head(clientHead)), promise: nil)
        case .body(let buffer):
            context.write(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        case .end(let trailers):
            let reusable = exchange.requestEnded
            connection.handler.receiver = nil
            self.pools.pools[exchange.upstreamIndex].release(connection, reusable: reusable)
            self.state = .idle
            self.logExchange(exchange, status: exchange.status?.code ?? 0, reason: "-")
            let keepAlive = exchange.keepAlive && !self.closeWhenIdle
            let written = context.writeAndFlush(self.wrapOutboundOut(.end(trailers)))
            if !keepAlive {
                self.state = .closed
                written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            } else {
                self.replayPendingRead(context: context)
            }
        }
    }

    func upstreamReadComplete() {
        self.context?.flush()
    }

    func upstreamFailed(_ error: any Error) {
        guard let context = self.context, case .forwarding(var exchange, let connection) = self.state else { return }
        self.responseTimer?.cancel()
        self.responseTimer = nil
        connection.handler.receiver = nil
        self.pools.pools[exchange.upstreamIndex].release(connection, reusable: false)
        if exchange.responseStarted {
            // Never a clean end for a response the backend did not finish.
            self.logger.warning(
                "upstream failed mid-response",
                metadata: ["request_id": "\(exchange.requestID)", "error": "\(error)"]
            )
            self.logExchange(exchange, status: exchange.status?.code ?? 0, reason: "upstream_aborted")
            self.state = .closed
            context.close(promise: nil)
            return
        }
        // A reused connection the backend had closed while idle: nothing of the response arrived, and
        // when the whole request is still at hand it is safe to send again on a fresh connection.
        if connection.reused, let body = exchange.replayableBody, exchange.queued.isEmpty {
            exchange.replayableBody = body
            exchange.triedTargets.remove(connection.targetIndex)
            self.state = .awaitingUpstream(exchange)
            self.connectUpstream(context: context)
            return
        }
        self.state = .awaitingUpstream(exchange)
        let answer: GatewayAnswer =
            error is HTTPParserError
            ? .badGateway("the backend sent a malformed response", reason: UpstreamError.malformedResponse.code)
            : .badGateway("the backend closed the connection", reason: UpstreamError.connectionClosed.code)
        self.answer(answer, exchange: exchange, requestEnded: exchange.requestEnded, context: context)
    }

    func upstreamWritabilityChanged(isWritable: Bool) {
        guard isWritable, let context = self.context else { return }
        self.replayPendingRead(context: context)
    }

    private func abortUpstream() {
        self.responseTimer?.cancel()
        self.responseTimer = nil
        switch self.state {
        case .forwarding(let exchange, let connection):
            connection.handler.receiver = nil
            self.pools.pools[exchange.upstreamIndex].release(connection, reusable: false)
        case .idle, .readingBody, .awaitingUpstream, .discarding, .closed:
            break
        }
    }
}

// MARK: Answers written by the gateway itself.

extension HTTP1ConnectionHandler {
    /// Checks what NIOHTTP1's parser lets through but a gateway must not: a URI over the limit, a
    /// missing or repeated `Host`, a `Transfer-Encoding` other than exactly `chunked`.
    private func validate(_ head: HTTPRequestHead) -> GatewayAnswer? {
        if head.uri.utf8.count > self.runtime.limits.maxURIBytes {
            return .uriTooLong()
        }
        var headerBytes = 0
        for (name, value) in head.headers { headerBytes += name.utf8.count + value.utf8.count + 4 }
        if headerBytes > self.runtime.limits.maxHeaderBytes {
            return .headersTooLarge()
        }
        if head.version.major != 1 {
            return .malformedHTTP("unsupported HTTP version")
        }
        let hosts = head.headers[canonicalForm: "host"]
        if hosts.count > 1 || (hosts.isEmpty && head.version.minor >= 1) {
            return .malformedHTTP("a request needs exactly one Host header")
        }
        let encodings = head.headers[canonicalForm: "transfer-encoding"]
        if !encodings.isEmpty, encodings.count != 1 || encodings[0].lowercased() != "chunked" {
            return .malformedHTTP("only the chunked transfer coding is accepted")
        }
        if !head.uri.hasPrefix("/") {
            return .malformedHTTP("the request target must be an absolute path")
        }
        return nil
    }

    /// Writes `answer`, then either waits for the next request or closes.
    ///
    /// `requestEnded` says whether the request's `.end` has arrived. When it has not, the rest of the
    /// request is read and dropped; if a body was still to come, the connection closes (the gateway will
    /// not read an unbounded body it has already refused), otherwise keep-alive goes on as usual.
    private func answer(_ answer: GatewayAnswer, exchange: Exchange, requestEnded: Bool, context: ChannelHandlerContext) {
        var answer = answer
        let bodyPending = !requestEnded && TokenExtractor.hasBody(exchange.head.headers)
        if bodyPending || !exchange.keepAlive || self.closeWhenIdle {
            answer.closeConnection = true
        }
        self.writeAnswer(answer, version: exchange.head.version, context: context)
        self.logExchange(exchange, status: answer.status.code, reason: answer.reasonCode)
        if requestEnded {
            if answer.closeConnection {
                self.state = .closed
                context.close(promise: nil)
            } else {
                self.state = .idle
                self.replayPendingRead(context: context)
            }
            return
        }
        self.state = .discarding(close: answer.closeConnection)
        if bodyPending {
            // Give the client a moment to read the answer before the socket goes: closing right away with
            // unread body bytes in the kernel turns into a reset that can eat the answer. A client that
            // finishes its body sooner gets the close at its `.end`.
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(200)) {
                if case .discarding = self.state {
                    self.state = .closed
                    context.close(promise: nil)
                }
            }
        }
        self.replayPendingRead(context: context)
    }

    private func writeAnswer(_ answer: GatewayAnswer, version: HTTPVersion, context: ChannelHandlerContext) {
        let body = answer.jsonBody
        var head = answer.responseHead(version: version, contentLength: body.utf8.count)
        head.headers.add(name: "strict-transport-security", value: "max-age=31536000")
        context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
    }

    // MARK: Access log: one line per request; never a token, never a query string.

    private func logExchange(_ exchange: Exchange, status: UInt, reason: String) {
        guard self.runtime.accessLog else { return }
        let path = exchange.head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let latency = (NIODeadline.now() - exchange.start).nanoseconds / 1000
        var metadata: Logger.Metadata = [
            "request_id": "\(exchange.requestID)",
            "route": "\(exchange.routeName)",
            "method": "\(exchange.head.method.rawValue)",
            "path": "\(path)",
            "status": "\(status)",
            "reason": "\(reason)",
            "latency_us": "\(latency)",
        ]
        if let identity = exchange.identity {
            metadata["user"] = "\(identity.subject)"
            metadata["token_kind"] = "\(identity.kind.rawValue)"
        }
        if exchange.upstreamHead != nil {
            metadata["upstream"] = "\(self.runtime.upstreams[exchange.upstreamIndex].name)"
        }
        self.logger.info("request", metadata: metadata)
    }

    private func logAnswer(_ answer: GatewayAnswer, method: String, path: String, route: String) {
        guard self.runtime.accessLog else { return }
        self.logger.info(
            "request",
            metadata: [
                "route": "\(route)", "method": "\(method)", "path": "\(path)",
                "status": "\(answer.status.code)", "reason": "\(answer.reasonCode)",
            ]
        )
    }
}

@available(*, unavailable)
extension HTTP1ConnectionHandler: Sendable {}

/// Sent down every connection's pipeline on graceful shutdown: finish what is in flight, then close.
struct GatewayShutdownEvent: Sendable {}

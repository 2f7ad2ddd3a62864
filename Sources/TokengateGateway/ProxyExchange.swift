//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CoreMetrics
import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateTokens

/// One request through the gateway, whatever protocol carried it: route, authorize, forward, stream the
/// response back — or answer here.
///
/// ### Function
/// The state moves `(readingBody →) awaitingUpstream → forwarding → finished`, or to `answered` when the
/// gateway answers itself. Bodies stream both ways with backpressure: while the upstream connection is
/// not there yet or not writable, the client's body reading is paused (``ExchangeClient``); while the
/// client is not writable, the upstream connection's reads are held back.
///
/// ### Failure
/// A connect that fails is tried again, up to the upstream's `retries`, on another target first (nothing
/// of the request was sent). A backend that fails before its response starts gets a 502/503/504 answer (or,
/// for a reused keep-alive connection the backend had closed, one retry on a fresh connection when the whole
/// request is still at hand); one that fails after the response started makes the client side abort, so the
/// client sees a truncated response and never a clean end.
final class ProxyExchange: UpstreamResponseReceiver {
    private enum State {
        /// Reading a form or JSON body to look for the token in it.
        case readingBody(route: Int, body: ByteBuffer, limit: Int)
        case awaitingUpstream
        case forwarding(UpstreamConnection)
        /// The gateway answers itself once an asynchronous step is done (the token page's whoami call).
        case answerPending
        /// The gateway answered; the rest of the request is dropped.
        case answered
        case finished
    }

    private var state: State = .awaitingUpstream
    private unowned let client: any ExchangeClient
    private let runtime: GatewayRuntime
    private let pools: LoopUpstreamPools
    private let logger: Logger
    private let closeRequested: Bool

    /// The request's head; its target is replaced once by its normalized form (``RequestTargetCheck``).
    private var head: ClientRequestHead
    /// The head announces a body (read once: several steps of the exchange ask).
    private let hasBody: Bool
    private let requestID: String
    private let start: NIODeadline
    private var routeName = "-"
    private var routeIndex: Int?
    /// Where the first `Host` value lies in the head's field lines: found once, by ``checkLimits()``, for its
    /// check and for routing.
    private var hostRange: Range<Int>?
    private var upstreamSentAt: NIODeadline?
    private var upstreamIndex = 0
    private var upstreamHead: UpstreamRequestHead?
    private var identity: VerifiedToken?
    /// Request body parts received while no upstream connection was ready yet.
    private var queued: [HTTPServerRequestPart] = []
    private var requestEnded = false
    /// Body bytes received so far, for `limits.max_body_bytes`.
    private var bodyBytes = 0
    /// The whole request body while it is still at hand (no body, or one read to look for a token), so a
    /// retry can send it again.
    private var replayableBody: ByteBuffer?
    /// The backend's response head arrived (it may still be held, see ``heldHead``).
    private var responseStarted = false
    /// The backend's head, and the body bytes that came with it, held until the response's end or the end of
    /// the read batch that brought them, whichever comes first: nothing of the response reaches the client
    /// before then. A response that turns out broken within that first batch (a head and a malformed chunk
    /// in one segment, or a close right after the head) is then answered `502` — until the client was sent
    /// nothing at all, its connection closed without a status line. The common response (head, body and end
    /// in one read) is written at its end, as before.
    private var heldHead: UpstreamResponseHead?
    private var heldBody: ByteBuffer?
    private var status: HTTPResponseStatus?
    /// Runs while the client is not writable during forwarding (see ``armStallTimer()``).
    private var stallTimer: Scheduled<Void>?
    /// The client sent `Expect: 100-continue` (HTTP/1.1 or HTTP/2) and waits for a `100 Continue` before its body.
    private var continueExpected: Bool
    /// Connects that failed for this request so far; it gets ``UpstreamSettings/retries`` of them before the
    /// gateway answers 502.
    private var failedConnects = 0
    /// The target whose connect failed last: the retry looks at every other target first.
    private var failedTarget: Int?
    /// The request body's pace, for a request with a body while the check is on (``startBodyDeadline()``).
    private var bodyPace: RequestBodyPace?
    /// Scheduled at the pace's deadline while the body is under way.
    private var bodyDeadline: Scheduled<Void>?
    /// Bytes of ``GatewayRuntime/tokenBodyMemory`` this exchange holds for the body it reads for a token.
    private var tokenBodyBytesHeld = 0

    /// - Parameter closeRequested: the client asked to close after this exchange (HTTP/1.1 `Connection:
    ///   close`, HTTP/1.0, or a graceful shutdown in progress).
    init(
        head: ClientRequestHead,
        requestID: String,
        client: any ExchangeClient,
        runtime: GatewayRuntime,
        pools: LoopUpstreamPools,
        logger: Logger,
        closeRequested: Bool
    ) {
        self.head = head
        self.hasBody = TokenExtractor.hasBody(head.fields)
        self.requestID = requestID
        self.client = client
        self.runtime = runtime
        self.pools = pools
        self.logger = logger
        self.closeRequested = closeRequested
        self.start = .now()
        self.continueExpected =
            (head.version == .http1_1 || head.version.major == 2) && self.hasBody && head.fields.expectsContinue
    }

    /// Answers `Expect: 100-continue` hop by hop, as nginx does, once the gateway wants the body: when it must
    /// read the body for the token, or when the backend connection is there to take it. A refused request
    /// never gets a 100 (its answer closes the connection instead), and the backend never sees the
    /// expectation (``RequestRewriter`` drops `Expect`), so clients such as curl do not wait a second for a
    /// 100 that would otherwise never come.
    private func sendContinueIfExpected() {
        guard self.continueExpected, !self.requestEnded else { return }
        self.continueExpected = false
        self.client.write(.head(HTTPResponseHead(version: self.head.version, status: .continue)))
        self.client.flush()
    }

    var isFinished: Bool {
        switch self.state {
        case .finished: true
        case .readingBody, .awaitingUpstream, .forwarding, .answerPending, .answered: false
        }
    }

    // MARK: Events from the client side.

    /// Whether the trusted proxy in front says its client used TLS: the *last* `X-Forwarded-Proto` value (the
    /// last line, and the last element of a comma-separated list) is `https`. A proxy that appends to the
    /// field rather than replacing it puts its own value last; the values before it are the client's to
    /// choose. (The first value was read before, so `X-Forwarded-Proto: https` sent by a plain-HTTP client,
    /// followed by the proxy's `http`, passed as TLS.)
    static func trustedProxySaysHTTPS(_ values: [String]) -> Bool {
        guard var last = values.last?.split(separator: ",", omittingEmptySubsequences: false).last else { return false }
        while let first = last.first, first == " " || first == "\t" { last.removeFirst() }
        while let final = last.last, final == " " || final == "\t" { last.removeLast() }
        return last.lowercased() == "https"
    }

    /// The request head arrived. `rejection` is the codec's own verdict on the head (framing problems
    /// only the codec can see), answered before anything else.
    func begin(rejection: GatewayAnswer?) {
        if let rejection {
            self.answer(rejection)
            return
        }
        if self.client.viaTrustedProxy, !Self.trustedProxySaysHTTPS(self.head.fields.values(name: "x-forwarded-proto")) {
            // A trusted proxy forwarding a request its client sent in the clear: TLS is still required.
            self.answer(.tlsRequired())
            return
        }
        if let answer = self.checkLimits() {
            self.answer(answer)
            return
        }
        let routeIndex = self.matchRoute(path: self.head.uri)
        if let trimmed = RequestTargetCheck.withSegmentTailsTrimmed(self.head.uri) {
            let trimmedRoute = self.matchRoute(path: trimmed)
            if trimmedRoute != routeIndex {
                // A backend that trims them would read another route's path (`/api./x`, `/api%20/x` as `/api/x`).
                // Counted under the route that backend would serve: the one such a request aims at.
                if let aimed = trimmedRoute ?? routeIndex {
                    self.routeIndex = aimed
                    self.routeName = self.runtime.routes[aimed].name
                }
                self.answer(.ambiguousPath())
                return
            }
        }
        guard let routeIndex else {
            self.answer(.noRoute())
            return
        }
        let route = self.runtime.routes[routeIndex]
        self.routeIndex = routeIndex
        self.routeName = route.name
        self.upstreamIndex = route.upstreamIndex
        if let tokenPage = route.tokenPage {
            // The page redirects to the login with the target as its return path: a token in the URL would
            // travel on in `Location`.
            if TokenExtractor.targetCarriesJWT(self.head.uri) {
                self.answer(.invalidRequest("tokens must not be sent in the URL", realm: self.runtime.realm, reason: "token_in_url"))
                return
            }
            if TokenExtractor.isCrossSiteSubresource(self.head.fields) {
                self.answer(.crossSiteTokenPage())
                return
            }
            if self.head.method == .POST {
                self.readTokenPageRedemption(route: routeIndex)
                return
            }
            self.serveTokenPage(tokenPage)
            return
        }
        self.authorize(route: routeIndex, body: nil)
    }

    func receivedBody(_ buffer: ByteBuffer) {
        self.bodyPace?.received(buffer.readableBytes)
        switch self.state {
        case .readingBody(let route, var body, let limit):
            if body.readableBytes + buffer.readableBytes > limit {
                self.answer(.payloadTooLarge())
                return
            }
            guard self.holdTokenBodyMemory(body.readableBytes + buffer.readableBytes) else {
                self.answer(.tokenBodyMemoryFull())
                return
            }
            self.state = .finished  // Parked while the buffer grows, so it is not copied on write.
            var buffer = buffer
            body.writeBuffer(&buffer)
            self.state = .readingBody(route: route, body: body, limit: limit)
        case .awaitingUpstream:
            if self.countBody(buffer) { return }
            self.queued.append(.body(buffer))
            self.replayableBody = nil
        case .forwarding(let connection):
            if self.countBody(buffer) { return }
            self.replayableBody = nil
            connection.handler.sendBody(buffer)
        case .answerPending, .answered, .finished:
            break
        }
    }

    func receivedEnd(_ trailers: HTTPHeaders?) {
        self.requestEnded = true
        self.cancelBodyDeadline()
        switch self.state {
        case .readingBody(let route, let body, _):
            if let page = self.runtime.routes[route].tokenPage {
                // A PKCE code redemption's form body (``readTokenPageRedemption(route:)``).
                self.state = .answerPending
                let answer = page.responder.redeem(
                    body: Array(body.readableBytesView),
                    cutoffs: self.runtime.cutoffs.load(),
                    now: self.runtime.now()
                )
                self.writeTokenPage(answer)
                return
            }
            self.state = .awaitingUpstream
            self.authorize(route: route, body: body)
        case .awaitingUpstream:
            self.queued.append(.end(nil))
        case .forwarding(let connection):
            // Flushed with the rest of the client's read batch (``clientReadComplete()``), so a head and its
            // end go upstream in one write.
            // Request trailers are not forwarded: they would carry fields (identity, forwarding) past the
            // rewriter, and backends that fold trailers into headers would believe them.
            connection.handler.sendEnd()
            self.startResponseTimer()
        case .answered:
            self.state = .finished
            self.client.exchangeCompleted(closeConnection: self.answerClosed, requestEnded: true)
        case .answerPending, .finished:
            break
        }
    }

    /// The client side finished a read batch: a good moment to push the body upstream.
    func clientReadComplete() {
        if case .forwarding(let connection) = self.state {
            connection.handler.flush()
        }
    }

    /// The client went away (connection closed, stream reset). An exchange still under way gets its access
    /// line here (status `499`, as nginx logs it, unless the backend's status was already forwarded): a
    /// request the backend may have acted on is never missing from the log.
    func clientClosed() {
        self.cutShort(status: 499, reason: "client_closed")
    }

    /// The server's drain ended (`drain_timeout`, or a second signal) with this exchange under way, and the
    /// connection is closed next. A client that has nothing of its response yet is answered `503` (reason
    /// `drain_timeout`, `Connection: close`), which it or a load balancer may retry elsewhere, instead of a
    /// connection that just closes; one whose response has begun gets it cut, logged with the backend's status
    /// and `drain_timeout`. Either way the line says what happened: the closes that follow would log it as the
    /// client going away (`499 client_closed`) or the backend (`502 upstream_closed`), and every deploy would
    /// look like an outage.
    func drainEnded() {
        let clientHasNothing = !self.responseStarted || self.heldHead != nil
        switch self.state {
        case .readingBody, .awaitingUpstream, .answerPending, .forwarding where clientHasNothing:
            self.heldHead = nil
            self.heldBody = nil
            self.answer(.drainEnded())
        case .forwarding, .answered, .finished:
            self.cutShort(status: 503, reason: "drain_timeout")
        }
    }

    /// Ends the exchange from outside, logging `status` (or the backend's, when the client has its head) with
    /// `reason` unless it was logged already.
    private func cutShort(status: UInt, reason: String) {
        self.cancelResponseTimer()
        self.cancelStallTimer()
        switch self.state {
        case .forwarding(let connection):
            // Mid-exchange the upstream connection is in an unknown state: never reuse it.
            self.release(connection, reusable: false)
            self.log(status: self.status?.code ?? status, reason: reason)
        case .readingBody, .awaitingUpstream, .answerPending:
            self.log(status: status, reason: reason)
        case .answered, .finished:
            break  // Logged when answered or finished.
        }
        self.state = .finished
    }

    func clientWritabilityChanged(isWritable: Bool) {
        guard case .forwarding(let connection) = self.state else { return }
        if isWritable {
            self.cancelStallTimer()
            connection.handler.resumeReading(channel: connection.channel)
            if self.responseStarted {
                self.startResponseTimer()
            }
        } else {
            connection.handler.pauseReading()
            // The gateway holds the backend's bytes back now: its silence is not the backend's fault. The stall
            // timer takes over.
            self.cancelResponseTimer()
            self.armStallTimer()
        }
    }

    /// A client that stops taking the response (a slow-read attack, or a phone gone into a tunnel) holds
    /// the upstream connection, whose reads are paused for backpressure, for as long as it likes. If it takes
    /// nothing for `limits.idle_timeout` the exchange ends: the upstream connection is closed and the client
    /// side aborted (HTTP/1.1 closes, HTTP/2 resets the stream), as nginx's `send_timeout` does. A client
    /// that reads slowly but steadily becomes writable again in between and is never cut. Only scheduled
    /// while the client is not writable, so the common path pays nothing.
    private func armStallTimer() {
        guard self.stallTimer == nil else { return }
        let timeout = TimeAmount(self.runtime.limits.idleTimeout)
        self.stallTimer = self.client.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            self.stallTimer = nil
            self.clientStalled()
        }
    }

    private func cancelStallTimer() {
        self.stallTimer?.cancel()
        self.stallTimer = nil
    }

    private func clientStalled() {
        guard case .forwarding(let connection) = self.state, !self.client.isWritable else { return }
        self.cancelResponseTimer()
        self.release(connection, reusable: false)
        self.log(status: self.status?.code ?? 0, reason: "client_stalled")
        self.state = .finished
        self.client.abort()
    }

    /// Counts streamed body bytes against the route's body limit (`body_limit`, else `limits.max_body_bytes`); past it the exchange ends (413 when the
    /// response has not started, an abort when it has). Returns whether it ended.
    private func countBody(_ buffer: ByteBuffer) -> Bool {
        self.bodyBytes += buffer.readableBytes
        let limit = self.routeIndex.map { self.runtime.routes[$0].bodyLimit } ?? self.runtime.limits.maxBodyBytes
        guard self.bodyBytes > limit else { return false }
        if self.responseStarted {
            if case .forwarding(let connection) = self.state { self.release(connection, reusable: false) }
            self.log(status: self.status?.code ?? 0, reason: "body_too_large")
            self.state = .finished
            self.client.abort()
        } else {
            self.answer(.payloadTooLarge())
        }
        return true
    }

    /// The request body is still coming from the client (its end not seen yet).
    var isReadingRequestBody: Bool {
        switch self.state {
        case .readingBody, .awaitingUpstream, .forwarding: !self.requestEnded
        case .answerPending, .answered, .finished: false
        }
    }

    /// Whether the client side should hold its body reads now.
    var wantsRequestReadingPaused: Bool {
        switch self.state {
        case .awaitingUpstream: true
        case .forwarding(let connection): !connection.handler.isWritable
        case .readingBody, .answerPending, .answered, .finished: false
        }
    }

    // MARK: Authorization.

    /// Runs the authorizer and acts on its decision. `body` is the whole request body when the authorizer
    /// asked for it, and `nil` on the first call.
    private func authorize(route routeIndex: Int, body: ByteBuffer?) {
        let route = self.runtime.routes[routeIndex]
        let authorizer = RequestAuthorizer(route: route, realm: self.runtime.realm)
        let bodyBytes = body.map { Array($0.readableBytesView) }
        let decision = authorizer.decide(
            head: self.head,
            body: bodyBytes,
            cutoffs: self.runtime.cutoffs.load(),
            now: self.runtime.now()
        )
        switch decision {
        case .answer(let answer):
            self.answer(answer)
        case .readBody(let limit):
            guard body == nil else {
                // The authorizer asked again for the body it was just given: a bug, never a forward.
                self.answer(.malformedHTTP("the request body could not be read"))
                return
            }
            let size = (self.head.fields.withFirstValue(name: "content-length") { FieldBytes.decimal($0) } ?? nil) ?? 0
            if size > limit {
                self.answer(.payloadTooLarge())
                return
            }
            // The buffer starts at the announced length up to 16 KiB (most token bodies are small, and fit without
            // a copy), and that memory is taken before it is allocated; beyond it, memory is taken as bytes arrive,
            // so a body announced large and never sent holds little.
            let initial = min(size, 16 * 1024)
            self.beginReadingBody(route: routeIndex, initial: initial, limit: limit)
        case .forward(let identity, let strip):
            if body == nil, self.hasBody,
                let length = self.head.fields.withFirstValue(name: "content-length", { FieldBytes.decimal($0) }) ?? nil,
                length > route.bodyLimit
            {
                // Refused before anything reaches the backend or a `100 Continue` invites the body.
                self.answer(.payloadTooLarge())
                return
            }
            var newBody: ByteBuffer?
            if let strip, let bodyBytes {
                switch strip {
                case .form(let field):
                    newBody = ByteBuffer(bytes: FormURLEncoded.removing(field, from: bodyBytes))
                case .json(let field):
                    // The extractor found exactly one such member in these same bytes with the same scan, so
                    // this cannot fail; if it ever did, forwarding the body would hand the token on.
                    guard let stripped = JSONTopLevelMembers.removingMember(named: field, from: bodyBytes) else {
                        self.answer(
                            .invalidRequest(
                                "the JSON body is not an object with one token field",
                                realm: self.runtime.realm,
                                reason: "malformed_body"
                            )
                        )
                        return
                    }
                    newBody = ByteBuffer(bytes: stripped)
                case .authorization, .header, .cookie:
                    break
                }
            }
            self.identity = identity
            guard
                let upstreamHead = RequestRewriter.upstreamHead(
                    from: self.head,
                    identity: identity,
                    strip: strip,
                    withheldCookies: route.withheldCookies,
                    newBodyLength: newBody?.readableBytes ?? body?.readableBytes,
                    forwarding: .init(
                        clientAddress: self.forwardedFor,
                        requestID: self.requestID,
                        scheme: "https"
                    )
                )
            else {
                self.answer(.malformedHTTP("a header field value holds a line break or a NUL byte"))
                return
            }
            self.upstreamHead = upstreamHead
            if body != nil {
                self.replayableBody = newBody ?? body
            } else if !self.hasBody {
                self.replayableBody = ByteBuffer()  // Shared empty storage: no allocation per bodiless request.
            }
            self.state = .awaitingUpstream
            self.startBodyDeadline()
            self.setReadingPaused(true)
            self.connectUpstream()
        }
    }

    /// The route for the request's host and path, compared where the host lies in the field lines (no `String`
    /// for it: a host with a port or of more than 15 bytes would cost one per request). After ``checkLimits()``,
    /// which found the host.
    private func matchRoute(path: String) -> Int? {
        var path = path
        return path.withUTF8 { path in
            guard let range = self.hostRange else { return self.runtime.routeTable.match(hostBytes: nil, pathBytes: path) }
            return self.head.fields.bytes.withUnsafeBytes { lines in
                let host = UnsafeRawBufferPointer(rebasing: lines[range]).assumingMemoryBound(to: UInt8.self)
                return self.runtime.routeTable.match(hostBytes: host, pathBytes: path)
            }
        }
    }

    /// The `X-Forwarded-For` chain for the backend: the peer's address, after the chain a trusted proxy
    /// reported (a client's own chain is never believed).
    private var forwardedFor: String? {
        guard self.client.viaTrustedProxy else { return self.client.clientAddress }
        let reported = self.head.fields.values(name: "x-forwarded-for").flatMap { value in
            value.split(separator: ",").map { $0.trimmingOWS() }.filter { !$0.isEmpty }
        }.joined(separator: ", ")
        guard let peer = self.client.clientAddress else { return reported.isEmpty ? nil : reported }
        return reported.isEmpty ? peer : reported + ", " + peer
    }

    /// The limits every codec shares (the URI and the header section) and the request target's form.
    private func checkLimits() -> GatewayAnswer? {
        if self.head.uri.utf8.count > self.runtime.limits.maxURIBytes {
            return .uriTooLong()
        }
        // The field lines as they are kept: `name: value` and a line end each (an HTTP/1.1 head was held to the
        // limit with its request line already, by the parser).
        if self.head.fields.bytes.count > self.runtime.limits.maxHeaderBytes {
            return .headersTooLarge()
        }
        if self.head.method == .TRACE || self.head.method == .CONNECT {
            return .methodNotAllowed()
        }
        self.hostRange = self.head.fields.firstValueRange(name: "host")?.range
        if let range = self.hostRange,
            !self.head.fields.bytes.withUnsafeBytes({ HostFieldCheck.isValid(UnsafeRawBufferPointer(rebasing: $0[range])) })
        {
            return .malformedHTTP("the Host field is not a valid host and port")
        }
        if !self.head.uri.hasPrefix("/") {
            // RFC 9112 §3.2.2: a server must accept the absolute form. Taken when its authority is the `Host`
            // the request carries (routing reads `Host`), as its path from then on.
            switch AbsoluteFormTarget.originForm(of: self.head.uri, host: self.head.fields.first(name: "host")) {
            case .path(let path):
                self.head.uri = path
            case .authorityDiffersFromHost:
                return .malformedHTTP("the request target's authority differs from the Host field")
            case .notAbsoluteForm:
                return .malformedHTTP("the request target must be an absolute path")
            }
        }
        switch RequestTargetCheck.check(self.head.uri) {
        case .accepted:
            break
        case .normalized(let target):
            self.head.uri = target  // Routed, logged and forwarded as the backend will read it.
        case .refused(let why):
            return .malformedHTTP("the request target \(why)")
        }
        return nil
    }
}

// MARK: The upstream side.

extension ProxyExchange {
    private var pool: UpstreamPool { self.pools.pools[self.upstreamIndex] }

    private func connectUpstream() {
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

    private func release(_ connection: UpstreamConnection, reusable: Bool) {
        self.pool.release(connection, reusable: reusable)  // Detaches the handler from this exchange.
    }

    /// The response timeout lives on the upstream connection (``DeadlineTimer``), so back-to-back requests
    /// over one connection do not schedule a task each.
    /// `now`, when the caller has just read the clock (each read is a system call's worth of time under a VM).
    private func startResponseTimer(now: NIODeadline? = nil) {
        guard case .forwarding(let connection) = self.state else { return }
        let timeout = self.runtime.upstreams[self.upstreamIndex].responseTimeout
        connection.responseTimer.arm(at: (now ?? connection.channel.eventLoop.now) + timeout)
    }

    private func cancelResponseTimer() {
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
            // Reusable only when the backend saw the whole request (an early answer, a 413 say, leaves the
            // connection's framing unknown) and did not say it closes (`Connection: close`, HTTP/1.0).
            self.release(connection, reusable: self.requestEnded && connection.handler.keepsConnection)
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
        if self.responseStarted, self.heldHead == nil {
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

// MARK: Answers written by the gateway itself.

extension ProxyExchange {
    /// Whether the last answer asked the connection to close.
    private var answerClosed: Bool {
        self.client.closesConnectionOnAnswer && (self.closeRequested || self.client.isDraining || self.answerForcedClose)
    }

    private var answerForcedClose: Bool {
        // An answer before the request ended, with body bytes still to come, closes: the gateway will not
        // read an unbounded body it has already refused.
        !self.requestEnded && self.hasBody
    }

    /// Writes `answer` and finishes the exchange (or waits for the request's end, which the codec drops).
    private func answer(_ answer: GatewayAnswer) {
        self.cancelResponseTimer()
        if case .forwarding(let connection) = self.state {
            self.release(connection, reusable: false)
        }
        var answer = answer
        if self.answerClosed {
            answer.closeConnection = true
        }
        if !self.client.closesConnectionOnAnswer {
            answer.closeConnection = false
        }
        let body = answer.jsonBody
        var head = answer.responseHead(version: self.head.version, contentLength: body.utf8.count)
        if let hsts = self.runtime.hsts {
            head.headers.add(name: "strict-transport-security", value: hsts)
        }
        self.client.write(.head(head))
        self.client.write(.body(.byteBuffer(self.client.allocator.buffer(string: body))))
        self.client.writeEnd(nil, closing: answer.closeConnection)
        self.log(status: answer.status.code, reason: answer.reasonCode)
        self.client.setRequestReadingPaused(false)
        if self.requestEnded {
            self.state = .finished
            self.client.exchangeCompleted(closeConnection: answer.closeConnection, requestEnded: true)
        } else {
            self.state = .answered
            self.client.exchangeCompleted(closeConnection: answer.closeConnection, requestEnded: false)
        }
    }

    // MARK: The token page: answered here, never forwarded.

    private func serveTokenPage(_ page: TokenPageRoute) {
        self.state = .answerPending
        // NIO's head, made once (a `String` per field) for the page's two steps.
        let head = self.head.nioHead
        switch page.responder.respond(to: head, cutoffs: self.runtime.cutoffs.load(), now: self.runtime.now()) {
        case .answer(let answer):
            self.writeTokenPage(answer)
        case .askWhoami(_, let cookies):
            guard let whoami = page.whoami else {
                self.writeTokenPage(page.responder.respond(to: head, whoami: .failed, now: self.runtime.now()))
                return
            }
            whoami.ask(cookies: cookies, on: self.client.eventLoop, logger: self.logger).assumeIsolated().whenSuccess {
                result in
                guard case .answerPending = self.state else { return }  // The client went away meanwhile.
                let answer = page.responder.respond(to: head, whoami: result, now: self.runtime.now())
                if let diagnostic = answer.diagnostic {
                    whoami.reportFailure("the answer cannot be used: \(diagnostic)", logger: self.logger)
                }
                self.writeTokenPage(answer)
            }
        }
    }

    /// `POST` to the token page: a PKCE code redemption. Its form body is read like a body searched for a token
    /// (the same pace, the same memory budget), but capped at ``TokenPageRedemptionRequest/maximumBody``; at its
    /// end ``receivedEnd(_:)`` hands it to the responder.
    private func readTokenPageRedemption(route routeIndex: Int) {
        let length = self.head.fields.withFirstValue(name: "content-length") { FieldBytes.decimal($0) } ?? nil
        if let problem = TokenPageResponder.redemptionHeadProblem(
            contentType: TokenExtractor.contentType(self.head.fields),
            contentLength: length
        ) {
            self.state = .answerPending
            self.writeTokenPage(problem)
            return
        }
        let limit = TokenPageRedemptionRequest.maximumBody
        let initial = min(length ?? 0, limit)
        self.beginReadingBody(route: routeIndex, initial: initial, limit: limit)
    }

    /// Starts reading a body the gateway needs whole (a token in a form or JSON body, a code redemption): takes
    /// `initial` bytes of the token-body memory for its buffer first (`503` when they are not there), then
    /// reads at the body's pace, answering an `Expect: 100-continue` now that the body is wanted.
    private func beginReadingBody(route routeIndex: Int, initial: Int, limit: Int) {
        guard self.holdTokenBodyMemory(initial) else {
            self.answer(.tokenBodyMemoryFull())
            return
        }
        self.state = .readingBody(route: routeIndex, body: self.client.allocator.buffer(capacity: initial), limit: limit)
        self.startBodyDeadline()
        self.sendContinueIfExpected()
    }

    /// Writes a token page answer. Its headers and body may carry the token (`Set-Cookie`, `Location`, the
    /// page): only the reason code and the user go to the log.
    private func writeTokenPage(_ answer: TokenPageAnswer) {
        var head = answer.responseHead(version: self.head.version)
        let close = self.answerClosed
        if close {
            head.headers.replaceOrAdd(name: "connection", value: "close")
        }
        if let hsts = self.runtime.hsts {
            head.headers.replaceOrAdd(name: "strict-transport-security", value: hsts)
        }
        self.client.write(.head(head))
        if !answer.body.isEmpty {
            self.client.write(.body(.byteBuffer(self.client.allocator.buffer(bytes: answer.body))))
        }
        self.client.writeEnd(nil, closing: close)
        if let user = answer.user {
            self.identity = VerifiedToken(subject: user, kind: .api, issuedAt: self.runtime.now(), keyID: nil, expiresAt: nil)
        }
        self.log(status: answer.status.code, reason: answer.reasonCode)
        self.state = self.requestEnded ? .finished : .answered
        self.client.exchangeCompleted(closeConnection: close, requestEnded: self.requestEnded)
    }

    // MARK: The request body's pace and memory.

    /// Pauses or resumes reading the client's body, and keeps the time the gateway held it back (a connect under
    /// way, a backend that takes the body slowly) out of the body's pace. A request without a body, or whose
    /// body has ended, reads no clock here.
    private func setReadingPaused(_ paused: Bool) {
        self.client.setRequestReadingPaused(paused)
        guard self.bodyPace != nil, !self.requestEnded else { return }
        if paused {
            self.bodyPace?.pause(at: .now())
        } else {
            self.bodyPace?.resume(at: .now())
        }
    }

    /// Starts the body's pace (``RequestBodyPace``) when the gateway begins to take a body: past its deadline an
    /// unfinished body is answered `408` and its connection closed (``bodyDeadlinePassed()``). One task per
    /// request with a body, scheduled here and moved only when it fires.
    private func startBodyDeadline() {
        guard self.hasBody, !self.requestEnded, self.bodyDeadline == nil else { return }
        let limits = self.runtime.limits
        if self.bodyPace == nil {
            self.bodyPace = RequestBodyPace(
                start: self.start,
                timeout: TimeAmount(limits.requestBodyTimeout),
                minimumRate: limits.requestBodyMinRate
            )
        }
        guard let pace = self.bodyPace else { return }  // `request_body_min_rate: 0`.
        self.scheduleBodyDeadline(at: pace.deadline(at: .now()))
    }

    private func scheduleBodyDeadline(at deadline: NIODeadline) {
        self.bodyDeadline = self.client.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.bodyDeadlinePassed()
        }
    }

    private func bodyDeadlinePassed() {
        self.bodyDeadline = nil
        // A backend that has answered already decides how the exchange ends.
        guard !self.requestEnded, !self.responseStarted, var pace = self.bodyPace else { return }
        switch self.state {
        case .readingBody, .awaitingUpstream, .forwarding:
            break
        case .answerPending, .answered, .finished:
            return
        }
        let now = NIODeadline.now()
        if pace.deadline(at: now) <= now, self.client.isRequestBodyHeldBack {
            pace.heldBack(at: now)
            self.bodyPace = pace
        }
        let deadline = pace.deadline(at: now)
        if deadline > now {
            self.scheduleBodyDeadline(at: deadline)
            return
        }
        self.answer(.requestBodyTooSlow())
    }

    private func cancelBodyDeadline() {
        self.bodyDeadline?.cancel()
        self.bodyDeadline = nil
    }

    /// Takes from ``GatewayRuntime/tokenBodyMemory`` what this exchange's token body needs beyond what it holds,
    /// up to `bytes` in all; false when that does not fit.
    private func holdTokenBodyMemory(_ bytes: Int) -> Bool {
        guard bytes > self.tokenBodyBytesHeld else { return true }
        guard self.runtime.tokenBodyMemory.take(bytes - self.tokenBodyBytesHeld) else { return false }
        self.tokenBodyBytesHeld = bytes
        self.runtime.metrics.tokenBodyMemory.record(self.runtime.tokenBodyMemory.inUse)
        return true
    }

    private func releaseTokenBodyMemory() {
        guard self.tokenBodyBytesHeld > 0 else { return }
        self.runtime.tokenBodyMemory.giveBack(self.tokenBodyBytesHeld)
        self.tokenBodyBytesHeld = 0
        self.runtime.metrics.tokenBodyMemory.record(self.runtime.tokenBodyMemory.inUse)
    }

    // MARK: Metrics and the access log: one line per request; never a token, never a query string.

    private func log(status: UInt, reason: String) {
        // The exchange is over: what it held for its request body goes back.
        self.cancelBodyDeadline()
        self.releaseTokenBodyMemory()
        let nanoseconds = (NIODeadline.now() - self.start).nanoseconds
        self.runtime.metrics.recordRequest(
            route: self.routeIndex,
            unsafeMethod: TokenExtractor.isUnsafe(self.head.method),
            status: status,
            reason: reason,
            nanoseconds: nanoseconds
        )
        guard self.runtime.accessLog else { return }
        let path = AccessLogPath.text(for: self.head.uri)
        let latency = nanoseconds / 1000
        // Plain `.string` values: an interpolated one goes through `DefaultStringInterpolation` per member.
        var metadata: Logger.Metadata = [
            "request_id": .string(self.requestID),
            "route": .string(self.routeName),
            "method": .string(self.head.method.rawValue),
            "path": .string(path),
            "status": .string(String(status)),
            "reason": .string(reason),
            "latency_us": .string(String(latency)),
        ]
        if let identity = self.identity {
            metadata["user"] = .string(identity.subject)
            metadata["token_kind"] = .string(identity.kind.rawValue)
        }
        if self.upstreamHead != nil {
            metadata["upstream"] = .string(self.runtime.upstreams[self.upstreamIndex].name)
        }
        self.logger.info("request", metadata: metadata)
    }
}

@available(*, unavailable)
extension ProxyExchange: Sendable {}

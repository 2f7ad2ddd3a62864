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
    enum State {
        /// Reading a form or JSON body to look for the token in it.
        case readingBody(route: Int, body: ByteBuffer, limit: Int)
        case awaitingUpstream
        case forwarding(UpstreamConnection)
        /// A request to a token page, answered by the gateway and never forwarded (``TokenPageExchange``). Boxed:
        /// the page's value is large, and inline it would make every copy and destroy of the other states pay for it.
        indirect case tokenPage(TokenPageExchange)
        /// The gateway answered; the rest of the request is dropped.
        case answered
        case finished
    }

    var state: State = .awaitingUpstream
    unowned let client: any ExchangeClient
    let runtime: GatewayRuntime
    let pools: LoopUpstreamPools
    let logger: Logger
    let closeRequested: Bool

    /// The request's head; its target is replaced once by its normalized form (``RequestTargetCheck``).
    var head: ClientRequestHead
    /// The head announces a body (read once: several steps of the exchange ask).
    let hasBody: Bool
    let requestID: String
    let start: NIODeadline
    var routeName = "-"
    var routeIndex: Int?
    /// Where the first `Host` value lies in the head's field lines: found once, by ``checkLimits()``, for its
    /// check and for routing.
    var hostRange: Range<Int>?
    var upstreamSentAt: NIODeadline?
    var upstreamIndex = 0
    var upstreamHead: UpstreamRequestHead?
    var identity: VerifiedToken?
    /// Request body parts received while no upstream connection was ready yet.
    var queued: [HTTPServerRequestPart] = []
    var requestEnded = false
    /// Body bytes received so far, for `limits.max_body_bytes`.
    var bodyBytes = 0
    /// The whole request body while it is still at hand (no body, or one read to look for a token), so a
    /// retry can send it again.
    var replayableBody: ByteBuffer?
    /// The backend's response head arrived (it may still be held, see ``heldHead``).
    var responseStarted = false
    /// The backend's (final) response head arrived before the request's end was sent to it: the backend answered
    /// without reading the whole body, and may read the rest as a request of its own (CL.0). Its connection is
    /// not reused, even when the response ends after the request did.
    var answeredEarly = false
    /// The backend's head was written to the client: from here on the client's status is the backend's, and the
    /// exchange can only end it or cut it. Kept apart from ``heldHead``, which a dropped response clears too.
    var clientHasBackendHead = false
    /// The backend's head, and the body bytes that came with it, held until the response's end or the end of
    /// the read batch that brought them, whichever comes first: nothing of the response reaches the client
    /// before then. A response that turns out broken within that first batch (a head and a malformed chunk
    /// in one segment, or a close right after the head) is then answered `502` — until the client was sent
    /// nothing at all, its connection closed without a status line. The common response (head, body and end
    /// in one read) is written at its end, as before.
    var heldHead: UpstreamResponseHead?
    var heldBody: ByteBuffer?
    var status: HTTPResponseStatus?
    /// Runs while the client is not writable during forwarding (see ``armStallTimer()``).
    var stallTimer: Scheduled<Void>?
    /// The client sent `Expect: 100-continue` (HTTP/1.1 or HTTP/2) and waits for a `100 Continue` before its body.
    var continueExpected: Bool
    /// Connects that failed for this request so far; it gets ``UpstreamSettings/retries`` of them before the
    /// gateway answers 502.
    var failedConnects = 0
    /// The target whose connect failed last: the retry looks at every other target first.
    var failedTarget: Int?
    /// The request body's pace, for a request with a body while the check is on (``startBodyDeadline()``).
    var bodyPace: RequestBodyPace?
    /// Scheduled at the pace's deadline while the body is under way.
    var bodyDeadline: Scheduled<Void>?
    /// Bytes of ``GatewayRuntime/tokenBodyMemory`` this exchange holds for the body it reads for a token.
    var tokenBodyBytesHeld = 0

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
    func sendContinueIfExpected() {
        guard self.continueExpected, !self.requestEnded else { return }
        self.continueExpected = false
        self.client.write(.head(HTTPResponseHead(version: self.head.version, status: .continue)))
        self.client.flush()
    }

    var isFinished: Bool {
        switch self.state {
        case .finished: true
        case .readingBody, .awaitingUpstream, .forwarding, .tokenPage, .answered: false
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

    /// The request head arrived.
    func begin() {
        if self.client.viaTrustedProxy, !Self.trustedProxySaysHTTPS(self.head.fields.values(name: "x-forwarded-proto")) {
            // A trusted proxy forwarding a request its client sent in the clear: TLS is still required.
            self.answer(.tlsRequired())
            return
        }
        if let answer = self.checkLimits() {
            self.answer(answer)
            return
        }
        if self.isMisdirected {
            self.answer(.misdirectedRequest())
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
            self.beginTokenPage(tokenPage)
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
        case .tokenPage:
            self.stepTokenPage { $0.receivedBody(buffer) }
        case .answered, .finished:
            break
        }
    }

    func receivedEnd(_ trailers: HTTPHeaders?) {
        self.requestEnded = true
        self.cancelBodyDeadline()
        switch self.state {
        case .readingBody(let route, let body, _):
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
        case .tokenPage:
            self.stepTokenPage {
                $0.receivedEnd(
                    cutoffs: self.runtime.cutoffs.load(), now: self.runtime.now(), nowMilliseconds: self.runtime.nowMilliseconds())
            }
        case .finished:
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

    /// The request body broke HTTP/1.1 (a bad chunk line, oversized trailers) after the exchange began: the
    /// connection handler answers `400` (unless the response has begun) and closes. Logged and counted once, here,
    /// under the route, as what it is: the gateway's refusal, not a client that went away.
    func requestBodyBroken() {
        self.cutShort(status: 400, reason: "malformed_http")
    }

    /// The server's drain ended (`drain_timeout`, or a second signal) with this exchange under way, and the
    /// connection is closed next. A client that has nothing of its response yet is answered `503` (reason
    /// `drain_timeout`, `Connection: close`), which it or a load balancer may retry elsewhere, instead of a
    /// connection that just closes; one whose response has begun gets it cut, logged with the backend's status
    /// and `drain_timeout`. Either way the line says what happened: the closes that follow would log it as the
    /// client going away (`499 client_closed`) or the backend (`502 upstream_closed`), and every deploy would
    /// look like an outage.
    func drainEnded() {
        let clientHasNothing: Bool
        switch self.state {
        case .readingBody, .awaitingUpstream, .tokenPage: clientHasNothing = true
        case .forwarding: clientHasNothing = !self.clientHasBackendHead
        case .answered, .finished: clientHasNothing = false
        }
        if clientHasNothing {
            self.heldHead = nil
            self.heldBody = nil
            self.answer(.drainEnded())
        } else {
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
            self.log(status: self.clientHasBackendHead ? self.status?.code ?? status : status, reason: reason)
        case .readingBody, .awaitingUpstream, .tokenPage:
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

    func cancelStallTimer() {
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
        case .tokenPage(let page): page.isReadingBody && !self.requestEnded
        case .answered, .finished: false
        }
    }

    /// Whether the client side should hold its body reads now.
    var wantsRequestReadingPaused: Bool {
        switch self.state {
        case .awaitingUpstream: true
        case .forwarding(let connection): !connection.handler.isWritable
        case .readingBody, .tokenPage, .answered, .finished: false
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
                    closeConnection: !self.runtime.upstreams[self.upstreamIndex].keepAlive,
                    forwarding: .init(
                        clientAddress: self.forwardedFor,
                        requestID: self.requestID,
                        scheme: "https"
                    )
                )
            else {
                // A value with a line break or a NUL byte (an identity from the token): the one case that reaches
                // here (a client length the rewriter could not write is refused by both client parsers first).
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

    /// The request names a host its connection's certificate does not cover (``MisdirectedRequestCheck``), on a
    /// connection that checks. Compared where the host lies in the field lines, like ``matchRoute(path:)``.
    /// After ``checkLimits()``, which found the host and checked its syntax.
    private var isMisdirected: Bool {
        guard let names = self.client.certificateNames, let range = self.hostRange else { return false }
        return self.head.fields.bytes.withUnsafeBytes { lines in
            MisdirectedRequestCheck.isMisdirected(host: UnsafeRawBufferPointer(rebasing: lines[range]), names: names)
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

    /// The limits every codec shares (the URI and the header section), the `Host` field lines
    /// (``HostFieldCheck``) and the request target's form.
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
        let hosts = self.head.fields.firstValueRange(name: "host")
        self.hostRange = hosts?.range
        let hostProblem = self.head.fields.bytes.withUnsafeBytes { lines in
            HostFieldCheck.problem(
                count: hosts?.count ?? 0,
                first: hosts.map { UnsafeRawBufferPointer(rebasing: lines[$0.range]) },
                required: HostFieldCheck.isRequired(in: self.head.version),
                emptyAllowed: true
            )
        }
        if let hostProblem {
            return .malformedHTTP(hostProblem.description)
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

@available(*, unavailable)
extension ProxyExchange: Sendable {}

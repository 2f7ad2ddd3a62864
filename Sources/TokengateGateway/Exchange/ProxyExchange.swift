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
/// The driver of ``ProxyExchangeStateMachine``, which holds the exchange's phases and rules as a value: this
/// class decides the head (limits, route, authorizer, rewriting), owns what does I/O — the client
/// (``ExchangeClient``), the upstream connection and its pool, the timers, the token-body memory, the access
/// log — hands the machine each event and does what it answers. Bodies stream both ways with backpressure:
/// while the upstream connection is not there yet or not writable, the client's body reading is paused; while
/// the client is not writable, the upstream connection's reads are held back.
///
/// ### Failure
/// A connect that fails is tried again, up to the upstream's `retries`, on another target first (nothing
/// of the request was sent). A backend that fails before its response starts gets a 502/503/504 answer (or,
/// for a reused keep-alive connection the backend had closed, one retry on a fresh connection when the whole
/// request is still at hand); one that fails after the response started makes the client side abort, so the
/// client sees a truncated response and never a clean end.
final class ProxyExchange: UpstreamResponseReceiver {
    /// The exchange's state. Stored and changed in place: never copied out and back.
    var machine: ProxyExchangeStateMachine
    /// The upstream connection, held exactly while the machine forwards.
    var connection: UpstreamConnection?
    /// The token page's own value state machine, for a request routed to one.
    var tokenPage: TokenPageExchange?
    unowned let client: any ExchangeClient
    let runtime: GatewayRuntime
    let pools: LoopUpstreamPools
    /// This loop's verified tokens (nil when `tokens.verified_cache.entries` is 0).
    let tokenCache: VerifiedTokenCache?
    let logger: Logger

    /// The request's head; its target is replaced once by its normalized form (``RequestTargetCheck``).
    var head: ClientRequestHead
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
    /// Runs while the client is not writable during forwarding (``ProxyExchangeStateMachine/WritabilityAction``).
    var stallTimer: Scheduled<Void>?
    /// Scheduled at the body pace's deadline while the body is under way.
    var bodyDeadline: Scheduled<Void>?
    /// Bytes of ``GatewayRuntime/tokenBodyMemory`` this exchange holds for the body it reads for a token.
    var tokenBodyBytesHeld = 0
    /// The client address and the route's CORS fields for this request (``TrafficPolicy``). The address is
    /// resolved at the start and kept here, for the access log too: its line may be written after the
    /// client's codec is gone (``client`` is unowned).
    var traffic = ExchangeTraffic()
    /// Request body bytes received and response body bytes written, for the access log.
    var receivedBodyBytes = 0
    var sentBodyBytes = 0
    /// The target whose response the client got, and how long its head took after the request was sent.
    var respondingTarget: Int?
    var upstreamWait: Int64?
    /// Set when this exchange is a front proxy's check (``ProxyExchange/beginCheck(_:)``): it answers, never forwards.
    let forwardAuth: ForwardAuthCheck?

    /// - Parameter closeRequested: the client asked to close after this exchange (HTTP/1.1 `Connection:
    ///   close`, HTTP/1.0, or a graceful shutdown in progress).
    init(
        head: ClientRequestHead,
        requestID: String,
        client: any ExchangeClient,
        runtime: GatewayRuntime,
        pools: LoopUpstreamPools,
        tokenCache: VerifiedTokenCache?,
        logger: Logger,
        closeRequested: Bool,
        forwardAuth: ForwardAuthCheck? = nil
    ) {
        let start = NIODeadline.now()
        let limits = runtime.limits
        self.machine = ProxyExchangeStateMachine(
            hasBody: TokenExtractor.hasBody(head.fields),
            expectsContinue: (head.version == .http1_1 || head.version.major == 2) && head.fields.expectsContinue,
            closeRequested: closeRequested,
            closesConnectionOnAnswer: client.closesConnectionOnAnswer,
            start: start,
            bodyTimeout: TimeAmount(limits.requestBodyTimeout),
            bodyMinimumRate: limits.requestBodyMinRate
        )
        self.head = head
        self.requestID = requestID
        self.client = client
        self.runtime = runtime
        self.pools = pools
        self.tokenCache = tokenCache
        self.logger = logger
        self.start = start
        self.forwardAuth = forwardAuth
    }

    /// Writes `100 Continue` to the client, as the machine asked.
    func sendContinue() {
        self.client.write(.head(HTTPResponseHead(version: self.head.version, status: .continue)))
        self.client.flush()
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
        if let forwardAuth = self.forwardAuth {
            self.beginCheck(forwardAuth)
            return
        }
        self.resolveClientAddress()
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
        self.routeAndAuthorize()
    }

    /// Routes the request by its host and path, then runs the authorizer on it (or the token page): for a
    /// proxied request and for a front proxy's check alike, after their heads were checked.
    func routeAndAuthorize() {
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
        if let refusal = self.admitByTrafficPolicy(route: routeIndex) {
            self.answer(refusal)
            return
        }
        if let tokenPage = route.tokenPage {
            guard self.forwardAuth == nil else {
                // The token page is the gateway's own: a front proxy routes it to a public listener, not a check.
                self.answer(.noRoute())
                return
            }
            self.beginTokenPage(tokenPage)
            return
        }
        self.authorize(route: routeIndex, body: nil)
    }

    func receivedBody(_ buffer: ByteBuffer) {
        self.receivedBodyBytes += buffer.readableBytes
        switch self.machine.receivedBody(buffer) {
        case .none:
            break
        case .sendUpstream(let buffer):
            self.connection?.handler.sendBody(buffer)
        case .holdTokenBodyMemory(let bytes):
            if !self.holdTokenBodyMemory(bytes) {
                self.answer(.tokenBodyMemoryFull())
            }
        case .tokenPage:
            self.stepTokenPage { $0.receivedBody(buffer) }
        case .end(let outcome):
            self.run(outcome)
        }
    }

    func receivedEnd(_ trailers: HTTPHeaders?) {
        self.cancelBodyDeadline()
        switch self.machine.receivedEnd() {
        case .none:
            break
        case .authorize(let body):
            guard let route = self.routeIndex else { preconditionFailure("a token body was read for a request without a route") }
            self.authorize(route: route, body: body)
        case .sendUpstreamEnd:
            // Flushed with the rest of the client's read batch (``clientReadComplete()``), so a head and its
            // end go upstream in one write.
            // Request trailers are not forwarded: they would carry fields (identity, forwarding) past the
            // rewriter, and backends that fold trailers into headers would believe them.
            self.connection?.handler.sendEnd()
            self.startResponseTimer()
        case .completeAnswered:
            self.client.exchangeCompleted(closeConnection: self.machine.answerCloses(draining: self.client.isDraining), requestEnded: true)
        case .tokenPage:
            self.stepTokenPage {
                $0.receivedEnd(
                    cutoffs: self.runtime.cutoffs.load(), now: self.runtime.now(), nowMilliseconds: self.runtime.nowMilliseconds())
            }
        }
    }

    /// The client side finished a read batch: a good moment to push the body upstream.
    func clientReadComplete() {
        self.connection?.handler.flush()
    }

    /// The client went away (connection closed, stream reset). An exchange still under way gets its access
    /// line here (status `499`, as nginx logs it, unless the backend's status was already forwarded): a
    /// request the backend may have acted on is never missing from the log.
    func clientClosed() {
        self.cancelStallTimer()
        self.run(self.machine.cutShort(status: 499, reason: "client_closed"))
    }

    /// The request body broke HTTP/1.1 (a bad chunk line, oversized trailers) after the exchange began: the
    /// connection handler answers `400` (unless the response has begun) and closes. Logged and counted once, here,
    /// under the route, as what it is: the gateway's refusal, not a client that went away.
    func requestBodyBroken() {
        self.cancelStallTimer()
        self.run(self.machine.cutShort(status: 400, reason: "malformed_http"))
    }

    /// The server's drain ended (`drain_timeout`, or a second signal) with this exchange under way, and the
    /// connection is closed next. A client that has nothing of its response yet is answered `503` (reason
    /// `drain_timeout`, `Connection: close`), which it or a load balancer may retry elsewhere, instead of a
    /// connection that just closes; one whose response has begun gets it cut, logged with the backend's status
    /// and `drain_timeout`. Either way the line says what happened: the closes that follow would log it as the
    /// client going away (`499 client_closed`) or the backend (`502 upstream_closed`), and every deploy would
    /// look like an outage.
    func drainEnded() {
        self.cancelStallTimer()
        self.run(self.machine.drainEnded())
    }

    /// Does what an event's outcome says.
    func run(_ outcome: ProxyExchangeStateMachine.Outcome) {
        switch outcome {
        case .none:
            break
        case .answer(let answer):
            self.answer(answer)
        case .abort(let status, let reason):
            self.closeConnection()
            self.log(status: status, reason: reason)
            self.client.abort()
        case .cutShort(let status, let reason):
            self.closeConnection()
            self.log(status: status, reason: reason)
        }
    }

    /// Closes the upstream connection, if there is one: mid-exchange its state is unknown, never reused.
    func closeConnection() {
        guard let connection = self.connection.take() else { return }
        self.pool.release(connection, reusable: false)  // Detaches the handler and cancels its timer.
    }

    func clientWritabilityChanged(isWritable: Bool) {
        switch self.machine.clientWritabilityChanged(isWritable: isWritable) {
        case .none:
            break
        case .resumeUpstream(let armResponseTimer):
            self.cancelStallTimer()
            guard let connection = self.connection else { return }
            connection.handler.resumeReading(channel: connection.channel)
            if armResponseTimer {
                self.startResponseTimer()
            }
        case .pauseUpstream(let armStallTimer):
            self.connection?.handler.pauseReading()
            // The gateway holds the backend's bytes back now: its silence is not the backend's fault. The stall
            // timer takes over.
            self.cancelResponseTimer()
            if armStallTimer {
                self.armStallTimer()
            }
        }
    }

    /// A client that stops taking the response (a slow-read attack, or a phone gone into a tunnel) holds
    /// the upstream connection, whose reads are paused for backpressure, for as long as it likes. If it takes
    /// nothing for `limits.idle_timeout` the exchange ends: the upstream connection is closed and the client
    /// side aborted (HTTP/1.1 closes, HTTP/2 resets the stream), as nginx's `send_timeout` does. A client
    /// that reads slowly but steadily becomes writable again in between and is never cut. Only scheduled
    /// while the client is not writable, so the common path pays nothing.
    private func armStallTimer() {
        let timeout = TimeAmount(self.runtime.limits.idleTimeout)
        self.stallTimer = self.client.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            self.stallTimer = nil
            // The client is asked only while the exchange forwards: one that ended may have no client any more.
            let writable = self.machine.isForwarding && self.client.isWritable
            self.run(self.machine.stallTimerFired(clientIsWritable: writable))
        }
    }

    func cancelStallTimer() {
        self.stallTimer?.cancel()
        self.stallTimer = nil
    }

    /// The client took its response slower than its route's `response_min_rate` while bytes waited for it
    /// (its codec's ``SlowClientWatch``, which cuts the connection or stream next): logged as such.
    func clientTooSlow() {
        self.cancelStallTimer()
        self.run(self.machine.cutShort(status: 0, reason: "client_too_slow"))
    }

    /// The request body is still coming from the client (its end not seen yet).
    var isReadingRequestBody: Bool { self.machine.isReadingRequestBody }

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
            now: self.runtime.now(),
            cache: self.tokenCache
        )
        switch decision {
        case .answer(let answer):
            self.noteAuthorizationRefusal(answer)
            self.answer(answer)
        case .readBody(let limit):
            guard body == nil, self.forwardAuth == nil else {
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
            self.beginReadingBody(initial: initial, limit: limit)
        case .forward(let identity, let strip):
            if let refusal = self.admitVerifiedUser(identity, route: routeIndex) {
                self.answer(refusal)
                return
            }
            if self.forwardAuth != nil {
                self.identity = identity
                self.answerCheckPassed(identity: identity)
                return
            }
            if body == nil, self.machine.hasBody,
                let length = self.head.fields.withFirstValue(name: "content-length", { FieldBytes.decimal($0) }) ?? nil,
                length > route.bodyLimit
            {
                // Refused before anything reaches the backend or a `100 Continue` invites the body.
                self.answer(.payloadTooLarge())
                return
            }
            if let webSocket = route.webSocket {
                switch WebSocketUpgradeRequest.of(self.head) {
                case .none:
                    break
                case .invalid(let description):
                    self.answer(.webSocketInvalidUpgrade(description))
                    return
                case .upgrade(let key):
                    self.identity = identity
                    self.beginWebSocket(key: key, route: routeIndex, configuration: webSocket, strip: strip)
                    return
                }
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
                    forwardedClaimHeaders: route.forwardedClaimHeaders,
                    secretHeader: self.runtime.upstreams[self.upstreamIndex].secretHeader,
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
            self.machine.forward(body: body != nil ? newBody ?? body : nil, bodyLimit: route.bodyLimit, retries: self.pool.settings.retries)
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

    /// The `X-Forwarded-For` chain for the backend: the client address and the trusted proxies after it
    /// (``ClientAddress``; what a client wrote of its own is never believed).
    private var forwardedFor: String? { self.traffic.client.forwardedFor }

    /// The limits every codec shares (the URI and the header section), the `Host` field lines
    /// (``HostFieldCheck``) and the request target's form.
    func checkLimits() -> GatewayAnswer? {
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

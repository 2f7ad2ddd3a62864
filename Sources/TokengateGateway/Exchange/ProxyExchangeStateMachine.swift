//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateHTTP

/// The life of one request through the gateway — which phase it is in, what of the request the backend has,
/// what of the response the client has, when the upstream connection may be reused — as a value with no I/O.
///
/// ``ProxyExchange`` is its driver: it owns the upstream connection, the client, the timers, the pool, the
/// token-body memory and the access log; it decides the head (limits, route, authorizer, rewriting: pure
/// functions of the configuration) and hands this machine every event, then does what the returned action
/// says. Time comes in as a value (`now:`), so every rule — the body's pace, the stall, the deadlines — is
/// tested without waiting and without a channel (`ProxyExchangeStateMachineTests`).
///
/// ### Phases
/// `awaitingUpstream` (the head is being decided, or a connection is on its way) → `forwarding` → `finished`;
/// `readingBody` first when the token is in a form or JSON body; `tokenPage` for a page the gateway answers;
/// `answered` when the gateway answered before the request's end (the rest is dropped), then `finished`.
///
/// ### Driver contract
/// - The driver holds an upstream connection exactly while ``isForwarding``: every action that leaves
///   `forwarding` says whether the connection goes back to the pool (`reusable`) or is closed, and the driver
///   releases it before it writes anything to the client (a write may call back into the exchange).
/// - ``Outcome/answer(_:)`` asks for one of the gateway's own answers: the driver writes it after calling
///   ``answered(draining:)``, which moves the phase and says how the connection ends; the same for a token page.
/// - ``Outcome/abort(status:reason:)``: the phase is `finished`; the driver closes the upstream connection (if
///   any), logs `status` with `reason` and aborts the client (HTTP/1.1 closes, HTTP/2 resets the stream).
///   ``Outcome/cutShort(status:reason:)`` is the same without touching the client, which went away or is
///   being closed by its connection.
/// - Timers are the driver's; the machine says when to arm and cancel them and is told when they fire: the
///   body deadline (``needsBodyDeadline``, ``startBodyDeadline(now:)``, ``bodyDeadlinePassed(now:heldBack:)``;
///   cancelled by the driver at the request's end and when the exchange is logged), the stall timer
///   (``WritabilityAction``, ``stallTimerFired(clientIsWritable:)``) and the response timer on the upstream
///   connection (``upstreamTimedOut()``).
/// - While the body's pace runs (``pacesBody``), each pause or resumption of the client's body reads goes to
///   ``requestReadingPaused(_:now:)``: time the gateway held the body back is not the client's.
/// - Before ``upstreamFailed(_:reused:idempotent:headWithdrawn:)`` a driver whose client has the backend's
///   head (``clientHasBackendHead``) tries to take that head back (HTTP/2 queues it until its next round) and
///   says whether it could.
package struct ProxyExchangeStateMachine {
    private enum State {
        /// The head is being decided, or the upstream connection is on its way; body parts wait in ``queued``.
        case awaitingUpstream
        /// Reading a form or JSON body to look for the token in it.
        case readingBody(ByteBuffer, limit: Int)
        case forwarding
        /// A request to a token page, answered by the gateway and never forwarded (``TokenPageExchange``).
        case tokenPage(readingBody: Bool)
        /// The gateway answered; the rest of the request is dropped.
        case answered
        case finished
    }

    /// How an event ends the exchange, when it does.
    package enum Outcome: Equatable {
        case none
        /// Answer with the gateway's own answer (``answered(draining:)`` first).
        case answer(GatewayAnswer)
        /// The response cannot end cleanly: close the upstream connection, log, abort the client.
        case abort(status: UInt, reason: String)
        /// The client side went (or is being closed): close the upstream connection if there is one, and log.
        case cutShort(status: UInt, reason: String)
    }

    /// What the driver does with a part of the request body.
    package enum BodyAction: Equatable {
        case none
        /// Send it on the upstream connection (flushed at the end of the client's read batch).
        case sendUpstream(ByteBuffer)
        /// The token body grew: hold `bytes` of the token-body memory in all, answering `503` when they are not there.
        case holdTokenBodyMemory(bytes: Int)
        /// Hand it to the token page's exchange.
        case tokenPage
        case end(Outcome)
    }

    /// What the driver does at the request's end (after cancelling the body deadline).
    package enum EndAction: Equatable {
        case none
        /// The token body is whole: run the authorizer again with it.
        case authorize(body: ByteBuffer)
        /// Send the request's end upstream (trailers are never forwarded) and arm the response timer.
        case sendUpstreamEnd
        /// The gateway had answered: complete the exchange (``answerCloses(draining:)``), the request ended.
        case completeAnswered
        /// Hand it to the token page's exchange.
        case tokenPage
    }

    /// What the driver does when the gateway starts taking a body it reads itself (a token body, a token page's).
    package struct BodyReadingAction: Equatable {
        /// Call ``startBodyDeadline(now:)`` and schedule what it returns.
        package var startBodyDeadline: Bool
        /// Write `100 Continue` to the client and flush.
        package var sendContinue: Bool
    }

    /// How a connect that failed is told.
    package enum ConnectFailure: Equatable {
        /// The connect to this target failed: nothing of the request left the gateway.
        case target(Int)
        /// Every target is ejected or full.
        case noTargetAvailable
        case other
    }

    /// What the driver does when a connect failed.
    package enum ConnectFailedAction: Equatable {
        case none
        /// Connect again, past ``failedTarget``.
        case retry
        case end(Outcome)
    }

    /// What the driver does when the upstream connection it asked for arrives.
    package enum ConnectedAction: Equatable {
        /// The exchange no longer waits for it (the client went away): the connection is fresh, back to the pool.
        case releaseUnused
        /// Send the request: in this order, the head, `replayBody`, the `queued` parts and the end when `sendEnd`.
        case send(RequestSend)
    }

    /// The request as it goes to a connection that just arrived.
    package struct RequestSend: Equatable {
        /// Write `100 Continue` to the client first.
        package var sendContinue: Bool
        /// The whole body, when it is at hand.
        package var replayBody: ByteBuffer?
        /// Body parts received while the connection was on its way.
        package var queued: [ByteBuffer]
        package var sendEnd: Bool
        /// Flush now; otherwise the end of the client's read batch flushes (a bodiless request whose end is
        /// still in the same batch leaves in one write with its head).
        package var flush: Bool
        /// Arm the response timer (the request has ended).
        package var armResponseTimer: Bool
    }

    /// What the driver does when the client's writability changes.
    package enum WritabilityAction: Equatable {
        case none
        /// Resume the upstream connection's reads and cancel the stall timer; re-arm the response timer when
        /// `armResponseTimer`.
        case resumeUpstream(armResponseTimer: Bool)
        /// Hold the upstream connection's reads back and disarm the response timer (the backend's silence is
        /// the gateway's doing now); schedule the stall timer (`limits.idle_timeout`) when `armStallTimer`.
        case pauseUpstream(armStallTimer: Bool)
    }

    /// What the driver does with the backend's response head.
    package enum ResponseHeadAction: Equatable {
        case none
        /// The response started: re-arm the response timer for the body's reads, record the latency, give the
        /// token-body memory back.
        case started
    }

    /// What the driver does with a part of the response body.
    package enum ResponseBodyAction: Equatable {
        case none
        case writeToClient(ByteBuffer)
    }

    /// What the driver does at the end of the response.
    package enum ResponseEndAction: Equatable {
        case none
        /// Write `heldHead` and `heldBody` (when held), release the connection (`reusable` or closed), cancel the
        /// stall timer, log, write the end and complete the exchange (``closesAfterResponse(draining:)``).
        case finish(heldHead: UpstreamResponseHead?, heldBody: ByteBuffer?, reusable: Bool)
    }

    /// What the driver does when the upstream's read batch ended: write the held head and body to the client
    /// (with ``closesAfterResponse(draining:)``), then ask ``movesResponseTimer(clientIsWritable:)``.
    package struct ReadCompleteAction: Equatable {
        package var heldHead: UpstreamResponseHead?
        package var heldBody: ByteBuffer?
    }

    /// What the driver does when the upstream connection failed.
    package enum UpstreamFailedAction: Equatable {
        case none
        /// Close the connection (not reusable), then connect again for the same request.
        case retry
        /// Close the connection, then end as `outcome`. `malformed`: the backend's response broke HTTP/1.1
        /// (worth a warning beside the access line).
        case end(Outcome, malformed: Bool)
    }

    /// What the driver does when the body deadline fires.
    package enum BodyDeadlineAction: Equatable {
        case none
        /// The body earned more time: schedule the deadline again at this time.
        case reschedule(NIODeadline)
        case end(Outcome)
    }

    private var state = State.awaitingUpstream
    /// The head announces a body.
    package let hasBody: Bool
    private let closeRequested: Bool
    private let closesConnectionOnAnswer: Bool
    private let start: NIODeadline
    private let bodyTimeout: TimeAmount
    private let bodyMinimumRate: Int
    /// The streamed body's limit (the route's `body_limit`), set when the request is forwarded.
    private var bodyLimit = Int.max
    /// Connect failures the request may have before it is answered `502`.
    private var retries = 0
    /// The request's end was seen.
    package private(set) var requestEnded = false
    /// The client sent `Expect: 100-continue` and waits for a `100 Continue` before its body.
    private var continueExpected: Bool
    /// Body bytes streamed so far, against ``bodyLimit``.
    private var bodyBytes = 0
    /// The whole request body while it is still at hand (no body, or one read for a token), so a retry can send
    /// it again.
    private var replayableBody: ByteBuffer?
    /// Body parts received while no upstream connection was ready yet.
    private var queued: [ByteBuffer] = []
    /// The backend's response head arrived (it may still be held).
    package private(set) var responseStarted = false
    /// The backend's final head arrived before the request's end was sent to it: the backend answered without
    /// reading the whole body, and may read the rest as a request of its own (CL.0). Its connection is never
    /// reused, even when the response ends after the request did.
    private var answeredEarly = false
    /// The backend's head was written to the client: from here on the client's status is the backend's, and the
    /// exchange can only end it or cut it.
    package private(set) var clientHasBackendHead = false
    /// The backend's head, and the body bytes that came with it, held until the response's end or the end of
    /// the read batch that brought them: a response that turns out broken within that first batch is answered
    /// `502` in its place.
    private var heldHead: UpstreamResponseHead?
    private var heldBody: ByteBuffer?
    /// The backend's status, once its head arrived.
    package private(set) var status: HTTPResponseStatus?
    /// Connects that failed for this request so far.
    private var failedConnects = 0
    /// The target whose connect failed last: the retry looks at every other target first.
    package private(set) var failedTarget: Int?
    /// The request body's pace, once the gateway takes a body while the check is on.
    private var bodyPace: RequestBodyPace?
    private var bodyDeadlineArmed = false
    private var stallTimerArmed = false

    /// - Parameters:
    ///   - hasBody: the head announces a body.
    ///   - expectsContinue: the client sent `Expect: 100-continue` over HTTP/1.1 or HTTP/2, with a body.
    ///   - closeRequested: the client asked to close after this exchange (HTTP/1.1 `Connection: close`,
    ///     HTTP/1.0, or a graceful shutdown in progress).
    ///   - closesConnectionOnAnswer: the transport is HTTP/1.1, whose connection an answer may close (an
    ///     HTTP/2 stream's never does).
    ///   - start: when the request began, for the body's pace.
    ///   - bodyTimeout, bodyMinimumRate: `limits.request_body_timeout` and `limits.request_body_min_rate` (0: off).
    package init(
        hasBody: Bool,
        expectsContinue: Bool,
        closeRequested: Bool,
        closesConnectionOnAnswer: Bool,
        start: NIODeadline,
        bodyTimeout: TimeAmount,
        bodyMinimumRate: Int
    ) {
        self.hasBody = hasBody
        self.continueExpected = expectsContinue && hasBody
        self.closeRequested = closeRequested
        self.closesConnectionOnAnswer = closesConnectionOnAnswer
        self.start = start
        self.bodyTimeout = bodyTimeout
        self.bodyMinimumRate = bodyMinimumRate
    }

    // MARK: What the driver asks.

    /// An upstream connection belongs to the exchange.
    package var isForwarding: Bool {
        if case .forwarding = self.state { return true }
        return false
    }

    package var isAwaitingUpstream: Bool {
        if case .awaitingUpstream = self.state { return true }
        return false
    }

    package var isTokenPage: Bool {
        if case .tokenPage = self.state { return true }
        return false
    }

    package var isFinished: Bool {
        if case .finished = self.state { return true }
        return false
    }

    /// The request body is still coming from the client (its end not seen yet) and the exchange takes it.
    package var isReadingRequestBody: Bool {
        switch self.state {
        case .readingBody, .awaitingUpstream, .forwarding: !self.requestEnded
        case .tokenPage(let readingBody): readingBody && !self.requestEnded
        case .answered, .finished: false
        }
    }

    /// The body's pace runs: pauses of the body's reads go to ``requestReadingPaused(_:now:)``.
    package var pacesBody: Bool { self.bodyPace != nil && !self.requestEnded }

    /// The body deadline should be started now (``startBodyDeadline(now:)``).
    package var needsBodyDeadline: Bool { self.hasBody && !self.requestEnded && !self.bodyDeadlineArmed }

    /// Whether the gateway's own answer closes an HTTP/1.1 connection: the client asked, the server drains, or
    /// the answer comes before the request's end with body bytes still to come (the gateway will not read an
    /// unbounded body it has already refused).
    package func answerCloses(draining: Bool) -> Bool {
        self.closesConnectionOnAnswer && (self.closeRequested || draining || (!self.requestEnded && self.hasBody))
    }

    /// Whether HTTP/1.1 closes after the backend's response: the client asked, the server drains, or the request
    /// was not read to its end before the backend answered.
    package func closesAfterResponse(draining: Bool) -> Bool {
        self.closesConnectionOnAnswer && (self.closeRequested || draining || !self.requestEnded)
    }

    // MARK: The head's decision.

    /// The authorizer wants the whole body to look for the token in it, at most `limit` bytes; `buffer` is where
    /// it collects (its first bytes of the token-body memory already held).
    package mutating func readBodyForToken(into buffer: ByteBuffer, limit: Int) -> BodyReadingAction {
        self.state = .readingBody(buffer, limit: limit)
        return self.beganReadingBody()
    }

    /// The request goes to a token page's exchange.
    package mutating func routedToTokenPage() {
        self.state = .tokenPage(readingBody: false)
    }

    /// The token page reads the request's body (its memory held).
    package mutating func tokenPageReadsBody() -> BodyReadingAction {
        guard case .tokenPage = self.state else { return BodyReadingAction(startBodyDeadline: false, sendContinue: false) }
        self.state = .tokenPage(readingBody: true)
        return self.beganReadingBody()
    }

    private mutating func beganReadingBody() -> BodyReadingAction {
        BodyReadingAction(startBodyDeadline: self.needsBodyDeadline, sendContinue: self.takeContinue())
    }

    /// The request is forwarded: `body` is the whole body as it goes upstream when it was read for the token
    /// (`nil` otherwise), `bodyLimit` the route's limit for a streamed body, `retries` the upstream's. The driver
    /// then starts the body deadline (``needsBodyDeadline``), pauses the body's reads and connects.
    package mutating func forward(body: ByteBuffer?, bodyLimit: Int, retries: Int) {
        self.bodyLimit = bodyLimit
        self.retries = retries
        if let body {
            self.replayableBody = body
        } else if !self.hasBody {
            self.replayableBody = ByteBuffer()  // Shared empty storage: no allocation per bodiless request.
        }
        self.state = .awaitingUpstream
    }

    /// The gateway answers (its own answer, or a token page's). Returns how the exchange ends: whether an
    /// upstream connection is released (never reusable: it saw part of a request), whether the answer closes
    /// an HTTP/1.1 connection, and whether the request had ended (if not, the codec drops the rest).
    package mutating func answered(draining: Bool) -> (releaseConnection: Bool, closeConnection: Bool, requestEnded: Bool) {
        let release = self.isForwarding
        let close = self.answerCloses(draining: draining)
        self.state = self.requestEnded ? .finished : .answered
        return (release, close, self.requestEnded)
    }

    // MARK: The client side.

    /// A part of the request body arrived.
    package mutating func receivedBody(_ buffer: ByteBuffer) -> BodyAction {
        self.bodyPace?.received(buffer.readableBytes)
        switch self.state {
        case .readingBody(var body, let limit):
            if body.readableBytes + buffer.readableBytes > limit {
                return .end(.answer(.payloadTooLarge()))
            }
            self.state = .finished  // Parked while the buffer grows, so it is not copied on write.
            var buffer = buffer
            body.writeBuffer(&buffer)
            let bytes = body.readableBytes
            self.state = .readingBody(body, limit: limit)
            return .holdTokenBodyMemory(bytes: bytes)
        case .awaitingUpstream:
            if let outcome = self.countBody(buffer) { return .end(outcome) }
            self.queued.append(buffer)
            self.replayableBody = nil
            return .none
        case .forwarding:
            if let outcome = self.countBody(buffer) { return .end(outcome) }
            self.replayableBody = nil
            return .sendUpstream(buffer)
        case .tokenPage:
            return .tokenPage
        case .answered, .finished:
            return .none
        }
    }

    /// Counts streamed body bytes against the route's limit; past it the exchange ends (413 when the response has
    /// not started, an abort when it has).
    private mutating func countBody(_ buffer: ByteBuffer) -> Outcome? {
        self.bodyBytes += buffer.readableBytes
        guard self.bodyBytes > self.bodyLimit else { return nil }
        if self.responseStarted {
            self.state = .finished
            return .abort(status: self.status?.code ?? 0, reason: "body_too_large")
        }
        return .answer(.payloadTooLarge())
    }

    /// The request's end arrived.
    package mutating func receivedEnd() -> EndAction {
        self.requestEnded = true
        self.bodyDeadlineArmed = false
        switch self.state {
        case .readingBody(let body, _):
            self.state = .awaitingUpstream
            return .authorize(body: body)
        case .awaitingUpstream:
            return .none  // Sent with the request once the connection is there.
        case .forwarding:
            return .sendUpstreamEnd
        case .answered:
            self.state = .finished
            return .completeAnswered
        case .tokenPage:
            return .tokenPage
        case .finished:
            return .none
        }
    }

    /// The client went away, its request body broke HTTP/1.1, or the drain ended with the response begun: the
    /// exchange ends, logged with `status` (the backend's, once the client has its head) and `reason` unless it
    /// was logged already. An upstream connection mid-exchange is in an unknown state and never reused.
    package mutating func cutShort(status: UInt, reason: String) -> Outcome {
        self.stallTimerArmed = false
        switch self.state {
        case .forwarding:
            self.state = .finished
            return .cutShort(status: self.clientHasBackendHead ? self.status?.code ?? status : status, reason: reason)
        case .readingBody, .awaitingUpstream, .tokenPage:
            self.state = .finished
            return .cutShort(status: status, reason: reason)
        case .answered, .finished:
            self.state = .finished
            return .none  // Logged when answered or finished.
        }
    }

    /// The server's drain ended with this exchange under way: a client that has nothing of its response yet
    /// is answered `503`; one whose response has begun gets it cut (``cutShort(status:reason:)``).
    package mutating func drainEnded() -> Outcome {
        let clientHasNothing: Bool
        switch self.state {
        case .readingBody, .awaitingUpstream, .tokenPage: clientHasNothing = true
        case .forwarding: clientHasNothing = !self.clientHasBackendHead
        case .answered, .finished: clientHasNothing = false
        }
        guard clientHasNothing else { return self.cutShort(status: 503, reason: "drain_timeout") }
        self.heldHead = nil
        self.heldBody = nil
        return .answer(.drainEnded())
    }

    /// The client's writability changed (only an exchange that forwards cares: it holds the backend's reads).
    package mutating func clientWritabilityChanged(isWritable: Bool) -> WritabilityAction {
        guard case .forwarding = self.state else { return .none }
        if isWritable {
            self.stallTimerArmed = false
            return .resumeUpstream(armResponseTimer: self.responseStarted)
        }
        let arm = !self.stallTimerArmed
        self.stallTimerArmed = true
        return .pauseUpstream(armStallTimer: arm)
    }

    /// The stall timer fired: a client that took nothing for `limits.idle_timeout` while the response waited
    /// ends the exchange, as nginx's `send_timeout` does. One that became writable meanwhile is left alone. The
    /// driver asks the client's writability only while ``isForwarding``: an exchange that ended may have no
    /// client any more.
    package mutating func stallTimerFired(clientIsWritable: Bool) -> Outcome {
        self.stallTimerArmed = false
        guard case .forwarding = self.state, !clientIsWritable else { return .none }
        self.state = .finished
        return .abort(status: self.status?.code ?? 0, reason: "client_stalled")
    }

    /// A token page's exchange was answered (or refused) by the page itself; see ``answered(draining:)``.

    // MARK: The body's pace.

    /// Starts the body's pace if it has none yet and returns when the body runs out of time (`nil`: the check
    /// is off, `request_body_min_rate: 0`). The driver schedules the body deadline there.
    package mutating func startBodyDeadline(now: NIODeadline) -> NIODeadline? {
        guard self.needsBodyDeadline else { return nil }
        if self.bodyPace == nil {
            self.bodyPace = RequestBodyPace(start: self.start, timeout: self.bodyTimeout, minimumRate: self.bodyMinimumRate)
        }
        guard let pace = self.bodyPace else { return nil }
        self.bodyDeadlineArmed = true
        return pace.deadline(at: now)
    }

    /// The gateway paused (or resumed) reading the client's body, at `now`.
    package mutating func requestReadingPaused(_ paused: Bool, now: NIODeadline) {
        guard self.pacesBody else { return }
        if paused {
            self.bodyPace?.pause(at: now)
        } else {
            self.bodyPace?.resume(at: now)
        }
    }

    /// The body deadline fired at `now`. `heldBack`: something outside the exchange keeps the client from
    /// sending (HTTP/2: the connection's window), which is not counted against it.
    package mutating func bodyDeadlinePassed(now: NIODeadline, heldBack: Bool) -> BodyDeadlineAction {
        self.bodyDeadlineArmed = false
        // A backend that has answered already decides how the exchange ends.
        guard !self.requestEnded, !self.responseStarted, var pace = self.bodyPace else { return .none }
        switch self.state {
        case .readingBody, .awaitingUpstream, .forwarding:
            break
        case .tokenPage(let readingBody):
            guard readingBody else { return .none }
        case .answered, .finished:
            return .none
        }
        if pace.deadline(at: now) <= now, heldBack {
            pace.heldBack(at: now)
            self.bodyPace = pace
        }
        let deadline = pace.deadline(at: now)
        if deadline > now {
            self.bodyDeadlineArmed = true
            return .reschedule(deadline)
        }
        return .end(.answer(.requestBodyTooSlow()))
    }

    // MARK: The upstream side.

    /// A connect failed. No connection, so nothing of the request reached a backend: sending it again is safe
    /// whatever the method, and its body is all still here (queued, or not read yet).
    package mutating func upstreamConnectFailed(_ failure: ConnectFailure) -> ConnectFailedAction {
        guard case .awaitingUpstream = self.state else { return .none }
        if case .target(let target) = failure, self.failedConnects < self.retries {
            self.failedConnects += 1
            self.failedTarget = target
            return .retry
        }
        if failure == .noTargetAvailable {
            return .end(.answer(.serviceUnavailable("no backend is available", reason: UpstreamError.noTargetAvailable.code)))
        }
        return .end(.answer(.badGateway("the backend could not be reached", reason: UpstreamError.connectFailed.code)))
    }

    /// The upstream connection asked for arrived. The driver touches the client only after this said `send`: a
    /// client that went away meanwhile may be gone. It holds the connection's reads back while the client is not
    /// writable (a pooled connection comes back with reads flowing).
    package mutating func upstreamConnected() -> ConnectedAction {
        guard case .awaitingUpstream = self.state else { return .releaseUnused }
        let queued = self.queued
        self.queued = []
        self.state = .forwarding
        return .send(
            RequestSend(
                sendContinue: self.takeContinue(),
                replayBody: self.requestEnded ? self.replayableBody : nil,
                queued: queued,
                sendEnd: self.requestEnded,
                flush: self.requestEnded || self.hasBody,
                armResponseTimer: self.requestEnded
            )
        )
    }

    /// Answers `Expect: 100-continue` hop by hop, as nginx does, once the gateway wants the body: a refused request
    /// never gets a 100 (its answer closes the connection instead), and the backend never sees the expectation.
    private mutating func takeContinue() -> Bool {
        guard self.continueExpected, !self.requestEnded else { return false }
        self.continueExpected = false
        return true
    }

    /// The backend's response head arrived. `requestMayBeUnsent`: the request's last bytes may still be on their
    /// way to the backend (written in this tick, or held by a full socket).
    package mutating func upstreamReceivedHead(_ head: UpstreamResponseHead, requestMayBeUnsent: Bool) -> ResponseHeadAction {
        guard case .forwarding = self.state, head.status.code >= 200 else {
            return .none  // 1xx from the backend: interim, not forwarded (100-continue is handled hop by hop).
        }
        self.responseStarted = true
        self.answeredEarly = !self.requestEnded || requestMayBeUnsent
        self.status = head.status
        self.heldHead = head
        // The backend answered, so the request is never sent again: its body need not be kept for a retry.
        self.replayableBody = nil
        return .started
    }

    /// A part of the response body arrived: held with the head, or for the client at once.
    package mutating func upstreamReceivedBody(_ buffer: ByteBuffer) -> ResponseBodyAction {
        guard case .forwarding = self.state else { return .none }
        guard self.heldHead != nil else { return .writeToClient(buffer) }
        if self.heldBody == nil {
            self.heldBody = buffer
        } else {
            var buffer = buffer
            self.heldBody!.writeBuffer(&buffer)  // Several chunks in the first read: copied, once.
        }
        return .none
    }

    /// The response ended. `keepsConnection`: the backend did not say it closes (`Connection: close`, HTTP/1.0)
    /// nor announced a body its response cannot have. The connection is reusable only when, beside that, the
    /// backend had the whole request before it answered: an early answer leaves the connection's framing unknown.
    package mutating func upstreamReceivedEnd(keepsConnection: Bool) -> ResponseEndAction {
        guard case .forwarding = self.state else { return .none }
        let (head, body) = self.takeHeld()
        let reusable = self.requestEnded && !self.answeredEarly && keepsConnection
        self.stallTimerArmed = false
        self.state = .finished
        return .finish(heldHead: head, heldBody: body, reusable: reusable)
    }

    /// The upstream connection's read batch ended: what is held goes to the client.
    package mutating func upstreamReadComplete() -> ReadCompleteAction {
        let (head, body) = self.takeHeld()
        return ReadCompleteAction(heldHead: head, heldBody: body)
    }

    /// Whether one more read of the response moves the response timer's deadline: only while the client takes
    /// the response (asked after the held head was written, which can change that).
    package func movesResponseTimer(clientIsWritable: Bool) -> Bool {
        self.responseStarted && self.isForwarding && clientIsWritable
    }

    private mutating func takeHeld() -> (UpstreamResponseHead?, ByteBuffer?) {
        guard let head = self.heldHead else { return (nil, nil) }
        self.heldHead = nil
        self.clientHasBackendHead = true
        let body = self.heldBody
        self.heldBody = nil
        return (head, body)
    }

    /// The backend did not answer (or went silent) within the upstream's response timeout.
    package mutating func upstreamTimedOut() -> Outcome {
        guard case .forwarding = self.state else { return .none }
        if self.responseStarted {
            self.state = .finished
            return .abort(status: self.status?.code ?? 0, reason: "upstream_timeout")
        }
        return .answer(.gatewayTimeout())
    }

    /// The upstream connection failed or closed while the exchange used it. `malformed`: its response broke
    /// HTTP/1.1; `reused`: it came from the pool; `idempotent`: the method may be repeated (RFC 9110 §9.2.2);
    /// `headWithdrawn`: the driver took back a head the client had not received yet.
    package mutating func upstreamFailed(malformed: Bool, reused: Bool, idempotent: Bool, headWithdrawn: Bool) -> UpstreamFailedAction {
        guard case .forwarding = self.state else { return .none }
        if headWithdrawn {
            self.clientHasBackendHead = false
        }
        if self.clientHasBackendHead {
            // The client has the head (and maybe some of the body): all it can be told now is that the response
            // is cut off. Its line carries the backend's status, which the client got.
            self.state = .finished
            return .end(.abort(status: self.status?.code ?? 0, reason: "upstream_aborted"), malformed: false)
        }
        // Nothing reached the client yet: a held head (the backend answered, so the request is not sent again)
        // is dropped and the gateway answers instead.
        self.heldHead = nil
        self.heldBody = nil
        // A reused connection the backend had closed while idle: nothing of the response arrived, and with the
        // whole request still at hand it is safe to send again on a fresh connection.
        if !self.responseStarted, reused, self.replayableBody != nil, idempotent, !malformed {
            self.state = .awaitingUpstream
            return .retry
        }
        let answer: GatewayAnswer =
            malformed
            ? .badGateway("the backend sent a malformed response", reason: UpstreamError.malformedResponse.code)
            : .badGateway("the backend closed the connection", reason: UpstreamError.connectionClosed.code)
        return .end(.answer(answer), malformed: malformed)
    }
}

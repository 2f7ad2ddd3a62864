//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import Testing
import TokengateHTTP

@testable import TokengateGateway

/// The proxy exchange's transitions, fed as values: the head's decision, body parts, the end, writability, the
/// client going away, timers with the time passed in, the upstream's connect, head, body, end and failure, and
/// the drain — with the actions each one returns. No runtime, no configuration, no channel, no clock.
@Suite struct ProxyExchangeStateMachineTests {
    typealias Machine = ProxyExchangeStateMachine

    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    static func machine(
        hasBody: Bool = false,
        expectsContinue: Bool = false,
        closeRequested: Bool = false,
        http1: Bool = true,
        minimumRate: Int = 0
    ) -> Machine {
        Machine(
            hasBody: hasBody,
            expectsContinue: expectsContinue,
            closeRequested: closeRequested,
            closesConnectionOnAnswer: http1,
            start: Self.start,
            bodyTimeout: .seconds(20),
            bodyMinimumRate: minimumRate
        )
    }

    static func head(_ status: HTTPResponseStatus = .ok) -> UpstreamResponseHead {
        let line = "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n"
        return UpstreamResponseHead(
            version: .http1_1, status: status, checkedBlock: ByteBuffer(string: line + "\r\n"),
            fieldsStart: line.utf8.count, fieldCount: 0, connectionNamesFields: false)
    }

    /// A forwarded request whose connection arrived: what the driver's `begin()` and connect do.
    static func forwarding(_ machine: inout Machine, body: ByteBuffer? = nil, bodyLimit: Int = 1_000, retries: Int = 1) -> Machine.RequestSend? {
        machine.forward(body: body, bodyLimit: bodyLimit, retries: retries)
        guard case .send(let send) = machine.upstreamConnected() else { return nil }
        return send
    }

    static func send(
        _ sendContinue: Bool = false, replay: ByteBuffer? = nil, queued: [ByteBuffer] = [], end: Bool, flush: Bool, arm: Bool
    ) -> Machine.RequestSend {
        Machine.RequestSend(
            sendContinue: sendContinue, replayBody: replay, queued: queued, sendEnd: end, flush: flush,
            armResponseTimer: arm)
    }

    // MARK: The common path.

    @Test func aBodilessRequestWhoseEndFollowsLeavesWithItsEndInTheSameWrite() {
        var machine = Self.machine()
        let send = Self.forwarding(&machine)
        // The end is in the same read batch: no flush now, the batch's end flushes head and end together.
        #expect(send == Self.send(end: false, flush: false, arm: false))
        #expect(machine.isForwarding)
        #expect(machine.isReadingRequestBody)
        let end = machine.receivedEnd()
        #expect(end == .sendUpstreamEnd)
        #expect(!machine.isReadingRequestBody)
        let started = machine.upstreamReceivedHead(Self.head(), requestMayBeUnsent: false)
        #expect(started == .started)
        #expect(machine.status == .ok)
        let body = machine.upstreamReceivedBody(ByteBuffer(string: "hello"))
        #expect(body == .none)  // Held with the head.
        let finish = machine.upstreamReceivedEnd(keepsConnection: true)
        #expect(finish == .finish(heldHead: Self.head(), heldBody: ByteBuffer(string: "hello"), reusable: true))
        #expect(machine.clientHasBackendHead)
        #expect(machine.isFinished)
        #expect(!machine.closesAfterResponse(draining: false))
    }

    @Test func anEndBeforeTheConnectionGoesWithTheRequestAndArmsTheResponseTimer() {
        var machine = Self.machine()
        machine.forward(body: nil, bodyLimit: 1_000, retries: 1)
        let end = machine.receivedEnd()
        #expect(end == .none)
        let connected = machine.upstreamConnected()
        #expect(connected == .send(Self.send(replay: ByteBuffer(), end: true, flush: true, arm: true)))
    }

    @Test func bodyPartsWhileConnectingAreQueuedAndDropTheReplayableBody() {
        var machine = Self.machine(hasBody: true)
        machine.forward(body: nil, bodyLimit: 1_000, retries: 1)
        let first = machine.receivedBody(ByteBuffer(string: "ab"))
        #expect(first == .none)
        let end = machine.receivedEnd()
        #expect(end == .none)
        let connected = machine.upstreamConnected()
        #expect(connected == .send(Self.send(queued: [ByteBuffer(string: "ab")], end: true, flush: true, arm: true)))
        let more = machine.receivedBody(ByteBuffer(string: "late"))
        #expect(more == .sendUpstream(ByteBuffer(string: "late")))
    }

    @Test func aConnectionThatArrivesAfterTheClientWentIsReturnedUnused() {
        var machine = Self.machine()
        machine.forward(body: nil, bodyLimit: 1_000, retries: 1)
        let cut = machine.cutShort(status: 499, reason: "client_closed")
        #expect(cut == .cutShort(status: 499, reason: "client_closed"))
        let connected = machine.upstreamConnected()
        #expect(connected == .releaseUnused)
        let failed = machine.upstreamConnectFailed(.target(0))
        #expect(failed == .none)
    }

    @Test func interimResponsesAreNotForwarded() {
        var machine = Self.machine()
        _ = Self.forwarding(&machine)
        let interim = machine.upstreamReceivedHead(Self.head(.continue), requestMayBeUnsent: false)
        #expect(interim == .none)
        #expect(!machine.responseStarted)
    }

    // MARK: Desync rules: no reuse after a misframed or early answer.

    @Test func anAnswerBeforeTheRequestEndedIsNeverReused() {
        var machine = Self.machine(hasBody: true)
        _ = Self.forwarding(&machine)
        let started = machine.upstreamReceivedHead(Self.head(.payloadTooLarge), requestMayBeUnsent: false)
        #expect(started == .started)
        let end = machine.receivedEnd()  // The rest of the body went out before the answer ended.
        #expect(end == .sendUpstreamEnd)
        let finish = machine.upstreamReceivedEnd(keepsConnection: true)
        #expect(finish == .finish(heldHead: Self.head(.payloadTooLarge), heldBody: nil, reusable: false))
    }

    @Test func anAnswerWhileTheRequestsLastBytesMayBeUnsentIsNeverReused() {
        var machine = Self.machine()
        _ = Self.forwarding(&machine)
        _ = machine.receivedEnd()
        _ = machine.upstreamReceivedHead(Self.head(), requestMayBeUnsent: true)
        let finish = machine.upstreamReceivedEnd(keepsConnection: true)
        #expect(finish == .finish(heldHead: Self.head(), heldBody: nil, reusable: false))
    }

    @Test func aResponseThatDoesNotKeepItsConnectionIsNotReused() {
        var machine = Self.machine()
        _ = Self.forwarding(&machine)
        _ = machine.receivedEnd()
        _ = machine.upstreamReceivedHead(Self.head(), requestMayBeUnsent: false)
        // `Connection: close`, HTTP/1.0, or a body the response cannot have (the parser's desync mark).
        let finish = machine.upstreamReceivedEnd(keepsConnection: false)
        #expect(finish == .finish(heldHead: Self.head(), heldBody: nil, reusable: false))
    }

    @Test func aMalformedResponseIsAnswered502AndItsConnectionClosed() {
        var machine = Self.machine()
        _ = Self.forwarding(&machine)
        _ = machine.receivedEnd()
        _ = machine.upstreamReceivedHead(Self.head(), requestMayBeUnsent: false)
        let failed = machine.upstreamFailed(malformed: true, reused: true, idempotent: true, headWithdrawn: false)
        #expect(
            failed
                == .end(
                    .answer(.badGateway("the backend sent a malformed response", reason: UpstreamError.malformedResponse.code)),
                    malformed: true))
        let ending = machine.answered(draining: false)
        #expect(ending.releaseConnection)
        #expect(ending.requestEnded)
        #expect(!machine.clientHasBackendHead)
    }

    @Test func anEarlyAnswerClosesAnHTTP1ConnectionAfterTheResponse() {
        var machine = Self.machine(hasBody: true)
        _ = Self.forwarding(&machine)
        _ = machine.upstreamReceivedHead(Self.head(.unauthorized), requestMayBeUnsent: false)
        #expect(machine.closesAfterResponse(draining: false))
        var stream = Self.machine(hasBody: true, http1: false)
        _ = Self.forwarding(&stream)
        _ = stream.upstreamReceivedHead(Self.head(.unauthorized), requestMayBeUnsent: false)
        #expect(!stream.closesAfterResponse(draining: false))  // An HTTP/2 stream closes nothing.
    }

    // MARK: `Connection: close` and the drain's close.

    @Test func connectionCloseClosesAfterTheResponseAndAfterAnAnswer() {
        var machine = Self.machine(closeRequested: true)
        #expect(machine.answerCloses(draining: false))
        _ = Self.forwarding(&machine)
        _ = machine.receivedEnd()
        #expect(machine.closesAfterResponse(draining: false))
        var kept = Self.machine()
        _ = Self.forwarding(&kept)
        _ = kept.receivedEnd()
        #expect(!kept.closesAfterResponse(draining: false))
        #expect(kept.closesAfterResponse(draining: true))
        #expect(!Self.machine(closeRequested: true, http1: false).answerCloses(draining: true))
    }

    // MARK: `Expect: 100-continue`.

    @Test func continueIsSentOnceWhenTheConnectionIsThere() {
        var machine = Self.machine(hasBody: true, expectsContinue: true)
        let send = Self.forwarding(&machine)
        #expect(send == Self.send(true, end: false, flush: true, arm: false))
        let body = machine.receivedBody(ByteBuffer(string: "x"))
        #expect(body == .sendUpstream(ByteBuffer(string: "x")))
        let end = machine.receivedEnd()
        #expect(end == .sendUpstreamEnd)
    }

    @Test func continueIsSentWhenTheTokenBodyIsWantedAndNotAgain() {
        var machine = Self.machine(hasBody: true, expectsContinue: true)
        let reading = machine.readBodyForToken(into: ByteBuffer(), limit: 100)
        #expect(reading == Machine.BodyReadingAction(startBodyDeadline: true, sendContinue: true))
        _ = machine.receivedBody(ByteBuffer(string: "token=x"))
        let end = machine.receivedEnd()
        #expect(end == .authorize(body: ByteBuffer(string: "token=x")))
        let send = Self.forwarding(&machine, body: ByteBuffer(string: "a=b"))
        #expect(send == Self.send(replay: ByteBuffer(string: "a=b"), end: true, flush: true, arm: true))
    }

    @Test func aRefusedRequestOrOneWithoutBodyGetsNoContinue() {
        var refused = Self.machine(hasBody: true, expectsContinue: true)
        let ending = refused.answered(draining: false)
        #expect(ending.closeConnection)  // The body it refused is not read: the connection closes instead.
        #expect(!ending.requestEnded)
        var bodiless = Self.machine(hasBody: false, expectsContinue: true)
        let send = Self.forwarding(&bodiless)
        #expect(send?.sendContinue == false)
        var ended = Self.machine(hasBody: true, expectsContinue: true)
        ended.forward(body: nil, bodyLimit: 1_000, retries: 1)
        _ = ended.receivedEnd()
        let connected = ended.upstreamConnected()
        #expect(connected == .send(Self.send(end: true, flush: true, arm: true)))
    }

    // MARK: Body pacing (`request_body_min_rate`).

    @Test func theBodyDeadlineIsTheTimeoutPlusWhatTheBytesEarned() throws {
        var machine = Self.machine(hasBody: true, minimumRate: 100)
        machine.forward(body: nil, bodyLimit: 10_000, retries: 1)
        #expect(machine.needsBodyDeadline)
        let started = machine.startBodyDeadline(now: Self.start)
        let deadline = try #require(started)
        #expect(deadline == Self.start + .seconds(20))
        #expect(!machine.needsBodyDeadline)
        _ = machine.receivedBody(ByteBuffer(repeating: 0, count: 500))
        let early = machine.bodyDeadlinePassed(now: Self.start + .seconds(20), heldBack: false)
        #expect(early == .reschedule(Self.start + .seconds(25)))
        let late = machine.bodyDeadlinePassed(now: Self.start + .seconds(25), heldBack: false)
        #expect(late == .end(.answer(.requestBodyTooSlow())))
    }

    @Test func timeTheGatewayHeldTheBodyBackIsNotTheClients() throws {
        var machine = Self.machine(hasBody: true, minimumRate: 100)
        machine.forward(body: nil, bodyLimit: 10_000, retries: 1)
        let started = machine.startBodyDeadline(now: Self.start)
        _ = try #require(started)
        #expect(machine.pacesBody)
        machine.requestReadingPaused(true, now: Self.start)
        machine.requestReadingPaused(false, now: Self.start + .seconds(3))  // The connect took 3 s.
        let passed = machine.bodyDeadlinePassed(now: Self.start + .seconds(20), heldBack: false)
        #expect(passed == .reschedule(Self.start + .seconds(23)))
        let window = machine.bodyDeadlinePassed(now: Self.start + .seconds(23), heldBack: true)  // An HTTP/2 window shut.
        #expect(window == .reschedule(Self.start + .seconds(23) + RequestBodyPace.heldBackGrace))
    }

    @Test func thePaceIsOffAtRateZeroAndEndsWithTheBodyOrTheResponse() {
        var off = Self.machine(hasBody: true, minimumRate: 0)
        off.forward(body: nil, bodyLimit: 1_000, retries: 1)
        let result1 = off.startBodyDeadline(now: Self.start)
        #expect(result1 == nil)
        #expect(!off.pacesBody)
        var bodiless = Self.machine(hasBody: false, minimumRate: 100)
        #expect(!bodiless.needsBodyDeadline)
        let result2 = bodiless.startBodyDeadline(now: Self.start)
        #expect(result2 == nil)
        var answered = Self.machine(hasBody: true, minimumRate: 100)
        _ = Self.forwarding(&answered)
        _ = answered.startBodyDeadline(now: Self.start)
        _ = answered.upstreamReceivedHead(Self.head(), requestMayBeUnsent: false)
        // A backend that answered decides how the exchange ends.
        let passed = answered.bodyDeadlinePassed(now: Self.start + .seconds(60), heldBack: false)
        #expect(passed == .none)
        var ended = Self.machine(hasBody: true, minimumRate: 100)
        _ = Self.forwarding(&ended)
        _ = ended.startBodyDeadline(now: Self.start)
        _ = ended.receivedEnd()
        #expect(!ended.pacesBody)
        let afterEnd = ended.bodyDeadlinePassed(now: Self.start + .seconds(60), heldBack: false)
        #expect(afterEnd == .none)
    }

    // MARK: The body's limit.

    @Test func aStreamedBodyPastTheLimitIs413UntilTheResponseStartedThenAnAbort() {
        var machine = Self.machine(hasBody: true)
        _ = Self.forwarding(&machine, bodyLimit: 4)
        let within = machine.receivedBody(ByteBuffer(string: "abcd"))
        #expect(within == .sendUpstream(ByteBuffer(string: "abcd")))
        let over = machine.receivedBody(ByteBuffer(string: "e"))
        #expect(over == .end(.answer(.payloadTooLarge())))
        var started = Self.machine(hasBody: true)
        _ = Self.forwarding(&started, bodyLimit: 4)
        _ = started.upstreamReceivedHead(Self.head(.created), requestMayBeUnsent: false)
        let cut = started.receivedBody(ByteBuffer(string: "abcde"))
        #expect(cut == .end(.abort(status: 201, reason: "body_too_large")))
        #expect(started.isFinished)
    }

    @Test func aTokenBodyGrowsWithinItsLimitAndMemory() {
        var machine = Self.machine(hasBody: true)
        _ = machine.readBodyForToken(into: ByteBuffer(), limit: 6)
        #expect(machine.isReadingRequestBody)
        let first = machine.receivedBody(ByteBuffer(string: "abc"))
        #expect(first == .holdTokenBodyMemory(bytes: 3))
        let second = machine.receivedBody(ByteBuffer(string: "def"))
        #expect(second == .holdTokenBodyMemory(bytes: 6))
        let over = machine.receivedBody(ByteBuffer(string: "g"))
        #expect(over == .end(.answer(.payloadTooLarge())))
    }

    // MARK: Backpressure and the stall.

    @Test func aClientThatStopsReadingHoldsTheBackendAndArmsTheStallTimerOnce() {
        var machine = Self.machine()
        _ = Self.forwarding(&machine)
        let paused = machine.clientWritabilityChanged(isWritable: false)
        #expect(paused == .pauseUpstream(armStallTimer: true))
        let again = machine.clientWritabilityChanged(isWritable: false)
        #expect(again == .pauseUpstream(armStallTimer: false))
        let resumed = machine.clientWritabilityChanged(isWritable: true)
        #expect(resumed == .resumeUpstream(armResponseTimer: false))
        _ = machine.upstreamReceivedHead(Self.head(), requestMayBeUnsent: false)
        let afterHead = machine.clientWritabilityChanged(isWritable: true)
        #expect(afterHead == .resumeUpstream(armResponseTimer: true))
        let rearmed = machine.clientWritabilityChanged(isWritable: false)
        #expect(rearmed == .pauseUpstream(armStallTimer: true))
    }

    @Test func aStalledClientIsCutAndOneThatReadsAgainIsNot() {
        var machine = Self.machine()
        _ = Self.forwarding(&machine)
        _ = machine.receivedEnd()
        _ = machine.upstreamReceivedHead(Self.head(), requestMayBeUnsent: false)
        _ = machine.upstreamReadComplete()
        _ = machine.clientWritabilityChanged(isWritable: false)
        let writable = machine.stallTimerFired(clientIsWritable: true)
        #expect(writable == .none)
        #expect(machine.isForwarding)
        let stalled = machine.stallTimerFired(clientIsWritable: false)
        #expect(stalled == .abort(status: 200, reason: "client_stalled"))
        #expect(machine.isFinished)
        let none = machine.clientWritabilityChanged(isWritable: true)
        #expect(none == .none)
    }

    @Test func theResponseTimerMovesWithEachReadOnlyWhileTheClientTakesIt() {
        var machine = Self.machine()
        _ = Self.forwarding(&machine)
        let before = machine.upstreamReadComplete()
        #expect(before == Machine.ReadCompleteAction(heldHead: nil, heldBody: nil))
        #expect(!machine.movesResponseTimer(clientIsWritable: true))  // No response yet: the timer bounds its start.
        _ = machine.receivedEnd()
        _ = machine.upstreamReceivedHead(Self.head(), requestMayBeUnsent: false)
        _ = machine.upstreamReceivedBody(ByteBuffer(string: "a"))
        _ = machine.upstreamReceivedBody(ByteBuffer(string: "b"))
        let first = machine.upstreamReadComplete()
        #expect(first == Machine.ReadCompleteAction(heldHead: Self.head(), heldBody: ByteBuffer(string: "ab")))
        #expect(!machine.movesResponseTimer(clientIsWritable: false))  // The stall timer's turn.
        let next = machine.upstreamReceivedBody(ByteBuffer(string: "c"))
        #expect(next == .writeToClient(ByteBuffer(string: "c")))
        let second = machine.upstreamReadComplete()
        #expect(second == Machine.ReadCompleteAction(heldHead: nil, heldBody: nil))
        #expect(machine.movesResponseTimer(clientIsWritable: true))
        let end = machine.upstreamReceivedEnd(keepsConnection: true)
        #expect(end == .finish(heldHead: nil, heldBody: nil, reusable: true))
    }

    // MARK: Deadlines.

    @Test func aBackendSilentBeforeItsHeadIs504AndAfterItAnAbort() {
        var silent = Self.machine()
        _ = Self.forwarding(&silent)
        let before = silent.upstreamTimedOut()
        #expect(before == .answer(.gatewayTimeout()))
        let result3 = silent.answered(draining: false)
        #expect(result3.releaseConnection)
        var stopped = Self.machine()
        _ = Self.forwarding(&stopped)
        _ = stopped.upstreamReceivedHead(Self.head(.accepted), requestMayBeUnsent: false)
        let after = stopped.upstreamTimedOut()
        #expect(after == .abort(status: 202, reason: "upstream_timeout"))
        let late = stopped.upstreamTimedOut()
        #expect(late == .none)
    }

    // MARK: Retries.

    @Test func aFailedConnectIsRetriedOnAnotherTargetWithinRetries() {
        var machine = Self.machine()
        machine.forward(body: nil, bodyLimit: 1_000, retries: 2)
        let first = machine.upstreamConnectFailed(.target(0))
        #expect(first == .retry)
        #expect(machine.failedTarget == 0)
        let second = machine.upstreamConnectFailed(.target(1))
        #expect(second == .retry)
        #expect(machine.failedTarget == 1)
        let third = machine.upstreamConnectFailed(.target(0))
        #expect(third == .end(.answer(.badGateway("the backend could not be reached", reason: UpstreamError.connectFailed.code))))
        var full = Self.machine()
        full.forward(body: nil, bodyLimit: 1_000, retries: 2)
        let unavailable = full.upstreamConnectFailed(.noTargetAvailable)
        #expect(unavailable == .end(.answer(.serviceUnavailable("no backend is available", reason: UpstreamError.noTargetAvailable.code))))
    }

    @Test func aReusedConnectionClosedByTheBackendIsRetriedWithTheWholeBody() {
        var machine = Self.machine(hasBody: true)
        _ = machine.readBodyForToken(into: ByteBuffer(), limit: 100)
        _ = machine.receivedBody(ByteBuffer(string: "token=x&a=b"))
        _ = machine.receivedEnd()
        let first = Self.forwarding(&machine, body: ByteBuffer(string: "a=b"))
        #expect(first?.replayBody == ByteBuffer(string: "a=b"))
        let failed = machine.upstreamFailed(malformed: false, reused: true, idempotent: true, headWithdrawn: false)
        #expect(failed == .retry)
        #expect(machine.isAwaitingUpstream)
        let again = machine.upstreamConnected()
        #expect(again == .send(Self.send(replay: ByteBuffer(string: "a=b"), end: true, flush: true, arm: true)))
    }

    @Test func noRetryForAFreshConnectionAnUnsafeMethodAStreamedBodyOrAStartedResponse() {
        let closed = Machine.UpstreamFailedAction.end(
            .answer(.badGateway("the backend closed the connection", reason: UpstreamError.connectionClosed.code)), malformed: false)
        var fresh = Self.machine()
        _ = Self.forwarding(&fresh)
        _ = fresh.receivedEnd()
        let result4 = fresh.upstreamFailed(malformed: false, reused: false, idempotent: true, headWithdrawn: false)
        #expect(result4 == closed)
        var unsafe = Self.machine()
        _ = Self.forwarding(&unsafe)
        _ = unsafe.receivedEnd()
        let result5 = unsafe.upstreamFailed(malformed: false, reused: true, idempotent: false, headWithdrawn: false)
        #expect(result5 == closed)
        var streamed = Self.machine(hasBody: true)
        _ = Self.forwarding(&streamed)
        _ = streamed.receivedBody(ByteBuffer(string: "x"))
        _ = streamed.receivedEnd()
        let result6 = streamed.upstreamFailed(malformed: false, reused: true, idempotent: true, headWithdrawn: false)
        #expect(result6 == closed)
        var started = Self.machine()
        _ = Self.forwarding(&started)
        _ = started.receivedEnd()
        _ = started.upstreamReceivedHead(Self.head(), requestMayBeUnsent: false)
        // The held head is dropped: the gateway answers in its place.
        let result7 = started.upstreamFailed(malformed: false, reused: true, idempotent: true, headWithdrawn: false)
        #expect(result7 == closed)
        let result8 = started.upstreamReadComplete()
        #expect(result8.heldHead == nil)
    }

    // MARK: HTTP/2: 502 before the head reached the client.

    @Test func aHeadTheClientHasNotReceivedIsWithdrawnAndAnswered502() {
        var machine = Self.machine(http1: false)
        _ = Self.forwarding(&machine)
        _ = machine.receivedEnd()
        _ = machine.upstreamReceivedHead(Self.head(), requestMayBeUnsent: false)
        _ = machine.upstreamReadComplete()
        #expect(machine.clientHasBackendHead)
        let failed = machine.upstreamFailed(malformed: false, reused: false, idempotent: true, headWithdrawn: true)
        #expect(
            failed
                == .end(.answer(.badGateway("the backend closed the connection", reason: UpstreamError.connectionClosed.code)), malformed: false))
        #expect(!machine.clientHasBackendHead)  // Counted as the gateway's status.
    }

    @Test func aHeadTheClientHasIsCutOff() {
        var machine = Self.machine()
        _ = Self.forwarding(&machine)
        _ = machine.receivedEnd()
        _ = machine.upstreamReceivedHead(Self.head(.notFound), requestMayBeUnsent: false)
        _ = machine.upstreamReadComplete()
        let failed = machine.upstreamFailed(malformed: false, reused: true, idempotent: true, headWithdrawn: false)
        #expect(failed == .end(.abort(status: 404, reason: "upstream_aborted"), malformed: false))
        #expect(machine.isFinished)
        let late = machine.upstreamFailed(malformed: false, reused: true, idempotent: true, headWithdrawn: false)
        #expect(late == .none)
    }

    // MARK: Early answers by the gateway.

    @Test func anAnswerBeforeTheBodyEndedClosesAndDropsTheRest() {
        var machine = Self.machine(hasBody: true)
        _ = Self.forwarding(&machine)
        let ending = machine.answered(draining: false)
        #expect(ending.releaseConnection)
        #expect(ending.closeConnection)
        #expect(!ending.requestEnded)
        #expect(!machine.isReadingRequestBody)
        let body = machine.receivedBody(ByteBuffer(string: "rest"))
        #expect(body == .none)
        let end = machine.receivedEnd()
        #expect(end == .completeAnswered)
        #expect(machine.isFinished)
        #expect(!machine.answerCloses(draining: false))  // The request did end after all.
    }

    @Test func anAnswerToABodilessRequestKeepsTheConnection() {
        var machine = Self.machine()
        let ending = machine.answered(draining: false)
        #expect(!ending.releaseConnection)
        #expect(!ending.closeConnection)
        let result9 = machine.answered(draining: true)
        #expect(result9.closeConnection)
    }

    // MARK: The client going away, a broken body, the drain.

    @Test func aClientThatGoesIsLoggedWithWhatItHad() {
        var waiting = Self.machine()
        waiting.forward(body: nil, bodyLimit: 1_000, retries: 1)
        let result10 = waiting.cutShort(status: 499, reason: "client_closed")
        #expect(result10 == .cutShort(status: 499, reason: "client_closed"))
        var streaming = Self.machine()
        _ = Self.forwarding(&streaming)
        _ = streaming.upstreamReceivedHead(Self.head(.partialContent), requestMayBeUnsent: false)
        // The head was still held: the client had nothing of the backend's.
        let result11 = streaming.cutShort(status: 400, reason: "malformed_http")
        #expect(result11 == .cutShort(status: 400, reason: "malformed_http"))
        var read = Self.machine()
        _ = Self.forwarding(&read)
        _ = read.upstreamReceivedHead(Self.head(.partialContent), requestMayBeUnsent: false)
        _ = read.upstreamReadComplete()
        let result12 = read.cutShort(status: 499, reason: "client_closed")
        #expect(result12 == .cutShort(status: 206, reason: "client_closed"))
        let result13 = read.cutShort(status: 499, reason: "client_closed")
        #expect(result13 == .none)  // Logged once.
    }

    @Test func theDrainAnswers503UntilTheClientHasTheHeadThenCuts() {
        var connecting = Self.machine()
        connecting.forward(body: nil, bodyLimit: 1_000, retries: 1)
        let result14 = connecting.drainEnded()
        #expect(result14 == .answer(.drainEnded()))
        var held = Self.machine()
        _ = Self.forwarding(&held)
        _ = held.upstreamReceivedHead(Self.head(), requestMayBeUnsent: false)
        let result15 = held.drainEnded()
        #expect(result15 == .answer(.drainEnded()))
        let result16 = held.upstreamReadComplete()
        #expect(result16.heldHead == nil)  // Dropped for the 503.
        var streaming = Self.machine()
        _ = Self.forwarding(&streaming)
        _ = streaming.upstreamReceivedHead(Self.head(), requestMayBeUnsent: false)
        _ = streaming.upstreamReadComplete()
        let result17 = streaming.drainEnded()
        #expect(result17 == .cutShort(status: 200, reason: "drain_timeout"))
        var answered = Self.machine(hasBody: true)
        _ = answered.answered(draining: false)
        let result18 = answered.drainEnded()
        #expect(result18 == .none)
    }

    // MARK: The token page.

    @Test func aTokenPageReadsItsBodyAtTheBodysPace() {
        var machine = Self.machine(hasBody: true, expectsContinue: true, minimumRate: 100)
        machine.routedToTokenPage()
        #expect(machine.isTokenPage)
        #expect(!machine.isReadingRequestBody)
        let passedEarly = machine.bodyDeadlinePassed(now: Self.start + .seconds(60), heldBack: false)
        #expect(passedEarly == .none)
        let reading = machine.tokenPageReadsBody()
        #expect(reading == Machine.BodyReadingAction(startBodyDeadline: true, sendContinue: true))
        #expect(machine.isReadingRequestBody)
        _ = machine.startBodyDeadline(now: Self.start)
        let body = machine.receivedBody(ByteBuffer(string: "code=x"))
        #expect(body == .tokenPage)
        let slow = machine.bodyDeadlinePassed(now: Self.start + .seconds(60), heldBack: false)
        #expect(slow == .end(.answer(.requestBodyTooSlow())))
        let end = machine.receivedEnd()
        #expect(end == .tokenPage)
        let ending = machine.answered(draining: false)
        #expect(!ending.releaseConnection)
        #expect(!ending.closeConnection)
        #expect(ending.requestEnded)
        #expect(!machine.isTokenPage)
    }
}

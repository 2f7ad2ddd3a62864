//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing
@testable import TokengateHTTP

/// ``HTTP2StreamStateMachine`` fed the inputs the codec feeds it (nghttp2's callbacks, the round's delivery,
/// the handler's writes, the submit round, the data provider), asserting the actions it returns: no codec,
/// no session, no channel.
@Suite struct HTTP2StreamStateMachineTests {
    private typealias Machine = HTTP2StreamStateMachine
    private static let limit = 1000

    /// A GET whose head arrived with END_STREAM and went to a handler.
    private func bodylessRequest(headRequest: Bool = false) -> Machine {
        var machine = Machine()
        #expect(machine.receivedHead(endStream: true) == .record)
        machine.handlerTookRequest(headRequest: headRequest)
        return machine
    }

    /// A request whose head arrived without END_STREAM and went to a handler: its body follows.
    private func requestWithBody() -> Machine {
        var machine = Machine()
        #expect(machine.receivedHead(endStream: false) == .record)
        machine.handlerTookRequest(headRequest: false)
        return machine
    }

    // MARK: The request side

    @Test func aHeadWithEndStreamEndsTheRequest() {
        var machine = Machine()
        #expect(machine.request == .receivingHead)
        #expect(machine.reader == .undecided)
        #expect(machine.receivedHead(endStream: true) == .record)
        #expect(machine.request == .ended)
        #expect(!machine.awaitsRequest)
        // A second head, trailers or END_STREAM cannot follow (nghttp2 rejects them): ignored, not recorded.
        #expect(machine.receivedHead(endStream: true) == .ignore)
        #expect(machine.beganTrailers() == .ignore)
        #expect(machine.receivedTrailers(endStream: true) == .ignore)
        #expect(machine.receivedEndStream() == .ignore)
    }

    @Test func aBodyEndsWithEndStreamOnData() {
        var machine = self.requestWithBody()
        #expect(machine.request == .receivingBody)
        #expect(machine.awaitsRequest)
        #expect(machine.deliversToHandler)
        #expect(machine.receivedData() == .record)
        #expect(machine.receivedEndStream() == .record)
        #expect(machine.request == .ended)
        #expect(!machine.awaitsRequest)
        #expect(machine.receivedEndStream() == .ignore)
    }

    @Test func trailersEndTheRequest() {
        var machine = self.requestWithBody()
        #expect(machine.beganTrailers() == .record)
        #expect(machine.request == .receivingTrailers)
        #expect(machine.beganTrailers() == .ignore)
        // Trailers without END_STREAM are not trailers (nghttp2 rejects them).
        #expect(machine.receivedTrailers(endStream: false) == .ignore)
        #expect(machine.request == .receivingTrailers)
        #expect(machine.receivedTrailers(endStream: true) == .record)
        #expect(machine.request == .ended)
        #expect(machine.receivedTrailers(endStream: true) == .ignore)
    }

    @Test func bodyBeforeTheHeadIsDeliveredIsRecordedForTheHandlerToCome() {
        var machine = Machine()
        #expect(machine.receivedHead(endStream: false) == .record)
        // DATA parsed in the same read as the HEADERS, before the round made the handler.
        #expect(machine.receivedData() == .record)
        #expect(!machine.deliversToHandler)
        machine.handlerTookRequest(headRequest: false)
        #expect(machine.deliversToHandler)
        // The head goes to one reader only.
        machine.codecAnswersRequest(headRequest: false)
        #expect(machine.reader == .handler)
    }

    // MARK: A HEAD request

    @Test func aHeadRequestDropsBodyWrites() {
        var machine = self.bodylessRequest(headRequest: true)
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeBody(queuedBytes: 10, limit: Self.limit) == .drop)
        #expect(machine.writeEnd(trailers: false) == .queue)
        // Nothing was queued: the head goes with END_STREAM.
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: false))
        #expect(machine.response == .endQueued)
        #expect(machine.sentEndStream() == .none)
        #expect(machine.response == .ended(.none))
        #expect(machine.removed() == false)
    }

    @Test func aHeadNotSubmittedYetCanBeTakenBackForAnotherAnswer() {
        var machine = self.bodylessRequest()
        #expect(machine.withdrawHead() == false, "no head written")
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeBody(queuedBytes: 10, limit: Self.limit) == .queue(becameUnwritable: false))
        #expect(machine.withdrawHead() == true)
        #expect(machine.response == .nothingWritten)
        // The gateway's answer takes its place.
        #expect(machine.writeHead() == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: false) == .submitHead(withBody: true))
        #expect(machine.withdrawHead() == false, "a submitted head is the client's")

        var ended = self.bodylessRequest()
        #expect(ended.writeHead() == .queue)
        #expect(ended.writeEnd(trailers: false) == .queue)
        #expect(ended.withdrawHead() == false, "a complete response is not taken back")
    }

    // MARK: 100 Continue

    @Test func continueThenTheFinalHead() {
        var machine = self.requestWithBody()
        #expect(machine.writeContinue() == .queue)
        #expect(machine.response == .continueDue)
        #expect(machine.writeContinue() == .queue)  // Still one due.
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitContinue)
        #expect(machine.response == .nothingWritten)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .none)
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeContinue() == .drop)  // After the final head: pointless.
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: true))
    }

    @Test func aContinueNotYetSubmittedIsDroppedByTheFinalHead() {
        var machine = self.requestWithBody()
        #expect(machine.writeContinue() == .queue)
        #expect(machine.writeHead() == .queue)
        #expect(machine.response == .headPending(.open))
        // The round submits the final head only.
        #expect(machine.nextSubmission(bodyIsEmpty: false) == .submitHead(withBody: true))
        #expect(machine.response == .streaming(.open, deferred: false))
    }

    @Test func noContinueForARequestThatEnded() {
        var machine = self.bodylessRequest()
        #expect(machine.writeContinue() == .drop)
        #expect(machine.response == .nothingWritten)
    }

    // MARK: The codec's own answer

    @Test func theCodecsAnswerDropsTheRequestBody() {
        var machine = Machine()
        #expect(machine.receivedHead(endStream: false) == .record)
        #expect(machine.receivedData() == .record)  // Before the round decided.
        machine.codecAnswersRequest(headRequest: false)
        #expect(machine.reader == .codec)
        #expect(!machine.deliversToHandler)  // What was recorded is given back at delivery.
        #expect(machine.receivedData() == .giveBackToConnection)
        // A handler cannot take it over.
        machine.handlerTookRequest(headRequest: false)
        #expect(machine.reader == .codec)
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeBody(queuedBytes: 30, limit: Self.limit) == .queue(becameUnwritable: false))
        #expect(machine.writeEnd(trailers: false) == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: false) == .submitHead(withBody: true))
        #expect(machine.pulled(copied: 30, bodyIsEmpty: true) == .endOfData)
        // The request still sends: the client is asked to stop with RST_STREAM NO_ERROR.
        #expect(machine.sentEndStream() == .markDirty)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .resetStream(.noError))
        #expect(machine.receivedData() == .giveBackToConnection)
        // Nobody to tell when it closes.
        machine.closedByNghttp2()
        #expect(machine.removed() == false)
    }

    @Test func aCodecAnswerToAHeadRequestHasNoBody() {
        var machine = Machine()
        #expect(machine.receivedHead(endStream: true) == .record)
        machine.codecAnswersRequest(headRequest: true)
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeBody(queuedBytes: 30, limit: Self.limit) == .drop)
        #expect(machine.writeEnd(trailers: false) == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: false))
    }

    // MARK: A streamed response

    @Test func aResponseStreamsThroughADeferredProvider() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: true))
        #expect(machine.response == .streaming(.open, deferred: false))
        // Pulled with nothing queued: parked.
        #expect(machine.pulled(copied: 0, bodyIsEmpty: true) == .deferred)
        #expect(machine.response == .streaming(.open, deferred: true))
        // A round with nothing new does not resume it.
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .none)
        #expect(machine.writeBody(queuedBytes: 100, limit: Self.limit) == .queue(becameUnwritable: false))
        #expect(machine.nextSubmission(bodyIsEmpty: false) == .resumeData)
        #expect(machine.response == .streaming(.open, deferred: false))
        #expect(machine.nextSubmission(bodyIsEmpty: false) == .none)  // Resumed once.
        #expect(machine.pulled(copied: 60, bodyIsEmpty: false) == .data)
        #expect(machine.pulled(copied: 40, bodyIsEmpty: true) == .data)  // The end is not written yet.
        #expect(machine.pulled(copied: 0, bodyIsEmpty: true) == .deferred)
        // The end alone resumes a parked provider, which then gives EOF with END_STREAM.
        #expect(machine.writeEnd(trailers: false) == .queue)
        #expect(machine.response == .streaming(.ended(trailers: false), deferred: true))
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .resumeData)
        #expect(machine.pulled(copied: 0, bodyIsEmpty: true) == .endOfData)
        #expect(machine.response == .endQueued)
        #expect(machine.sentEndStream() == .none)
        #expect(machine.response == .ended(.none))
        machine.closedByNghttp2()
        #expect(machine.response == .closed(endStreamSent: true))
        #expect(machine.removed() == false)  // Both sides finished: the handler is not told of a reset.
    }

    @Test func anEndWrittenBeforeTheHeadIsSubmittedStillSendsTheQueuedBody() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeBody(queuedBytes: 5, limit: Self.limit) == .queue(becameUnwritable: false))
        #expect(machine.writeEnd(trailers: false) == .queue)
        #expect(machine.response == .headPending(.ended(trailers: false)))
        #expect(machine.nextSubmission(bodyIsEmpty: false) == .submitHead(withBody: true))
        #expect(machine.pulled(copied: 5, bodyIsEmpty: true) == .endOfData)
    }

    // MARK: Trailers

    @Test func trailersAfterADeferredProvider() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: true))
        #expect(machine.writeBody(queuedBytes: 10, limit: Self.limit) == .queue(becameUnwritable: false))
        #expect(machine.pulled(copied: 10, bodyIsEmpty: true) == .data)
        #expect(machine.pulled(copied: 0, bodyIsEmpty: true) == .deferred)
        #expect(machine.writeEnd(trailers: true) == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .resumeData)
        // EOF without END_STREAM; the trailers go in the next round, never from inside the provider.
        #expect(machine.pulled(copied: 0, bodyIsEmpty: true) == .endOfDataBeforeTrailers)
        #expect(machine.response == .trailersDue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitTrailers)
        #expect(machine.sentEndStream() == .none)
        #expect(machine.response == .ended(.none))
    }

    @Test func aBodyWhileTheTrailersAreDueResetsTheStream() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeEnd(trailers: true) == .queue)
        // Trailers need the provider: the head goes with a body even when none is queued.
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: true))
        #expect(machine.pulled(copied: 0, bodyIsEmpty: true) == .endOfDataBeforeTrailers)
        #expect(machine.writeBody(queuedBytes: 1, limit: Self.limit) == .reset)  // After the end.
        #expect(machine.response == .resetRequested(.internalError))
    }

    @Test func theTrailersRoundSubmitsThem() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeEnd(trailers: true) == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: true))
        #expect(machine.pulled(copied: 0, bodyIsEmpty: true) == .endOfDataBeforeTrailers)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitTrailers)
        #expect(machine.response == .endQueued)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .none)
        #expect(machine.pulled(copied: 0, bodyIsEmpty: true) == .fail)  // The provider is done.
        #expect(machine.sentEndStream() == .none)
        #expect(machine.response == .ended(.none))
    }

    // MARK: Illegal writes fail closed

    @Test func aWriteAfterTheEndResetsTheStream() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeEnd(trailers: false) == .queue)
        #expect(machine.writeEnd(trailers: false) == .drop)  // A second end changes nothing.
        #expect(machine.writeBody(queuedBytes: 1, limit: Self.limit) == .reset)
        #expect(machine.response == .resetRequested(.internalError))
        #expect(!machine.isWritable)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .resetStream(.internalError))
        #expect(machine.response == .reset)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .none)
        // The handler did not ask for the reset: it keeps the stream and is told when it closes.
        machine.closedByNghttp2()
        #expect(machine.removed() == true)
    }

    @Test func aWriteAfterEndStreamWentOutIsDropped() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeEnd(trailers: false) == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: false))
        #expect(machine.sentEndStream() == .none)
        // The response is complete on the wire: nothing to protect, nothing to reset.
        #expect(machine.writeBody(queuedBytes: 1, limit: Self.limit) == .drop)
        #expect(machine.writeHead() == .drop)
        #expect(machine.writeEnd(trailers: false) == .drop)
        #expect(machine.response == .ended(.none))
    }

    @Test func aBodyBeforeTheHeadResetsTheStream() {
        var machine = self.requestWithBody()
        #expect(machine.writeBody(queuedBytes: 1, limit: Self.limit) == .reset)
        #expect(machine.response == .resetRequested(.internalError))
        #expect(machine.writeHead() == .drop)
    }

    @Test func anEndBeforeTheHeadResetsTheStream() {
        var machine = self.requestWithBody()
        #expect(machine.writeContinue() == .queue)
        #expect(machine.writeEnd(trailers: false) == .reset)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .resetStream(.internalError))
    }

    @Test func aSecondHeadResetsTheStream() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeHead() == .reset)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .resetStream(.internalError))
        var streaming = self.bodylessRequest()
        #expect(streaming.writeHead() == .queue)
        #expect(streaming.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: true))
        #expect(streaming.writeHead() == .reset)
        #expect(streaming.response == .resetRequested(.internalError))
    }

    // MARK: Resets

    @Test func theHandlerResetsMidBody() {
        var machine = self.requestWithBody()
        #expect(machine.writeHead() == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: true))
        #expect(machine.writeBody(queuedBytes: 100, limit: Self.limit) == .queue(becameUnwritable: false))
        #expect(machine.handlerReset(.internalError) == .reset)
        #expect(machine.reader == .released)
        #expect(!machine.deliversToHandler)
        #expect(machine.receivedData() == .record)  // Recorded, given back at delivery.
        #expect(!machine.awaitsRequest)
        #expect(!machine.isWritable)
        #expect(machine.handlerReset(.cancel) == .drop)  // One reset.
        #expect(machine.writeBody(queuedBytes: 1, limit: Self.limit) == .drop)
        #expect(machine.writeEnd(trailers: false) == .drop)
        #expect(machine.writeContinue() == .drop)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .resetStream(.internalError))
        // Still nothing written after the RST_STREAM is submitted, and the provider stays parked.
        #expect(machine.writeHead() == .drop)
        #expect(machine.writeBody(queuedBytes: 1, limit: Self.limit) == .drop)
        #expect(machine.pulled(copied: 0, bodyIsEmpty: true) == .deferred)
        #expect(machine.handlerReset(.cancel) == .drop)
        machine.closedByNghttp2()
        #expect(machine.removed() == false)  // It asked: it is not told.
    }

    @Test func theClientResetsMidResponse() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: true))
        #expect(machine.writeBody(queuedBytes: 100, limit: Self.limit) == .queue(becameUnwritable: false))
        // RST_STREAM from the client: nghttp2 closes the stream.
        machine.closedByNghttp2()
        #expect(machine.isClosed)
        #expect(machine.response == .closed(endStreamSent: false))
        #expect(!machine.isWritable)
        #expect(machine.writeBody(queuedBytes: 1, limit: Self.limit) == .drop)
        #expect(machine.writeEnd(trailers: false) == .drop)
        #expect(machine.writeHead() == .drop)
        #expect(machine.handlerReset(.cancel) == .drop)
        #expect(machine.nextSubmission(bodyIsEmpty: false) == .none)
        #expect(machine.pulled(copied: 0, bodyIsEmpty: true) == .fail)
        machine.closedByNghttp2()  // Again: no change.
        #expect(machine.removed() == true)  // The handler is told (the response did not end).
        #expect(machine.reader == .released)
        #expect(machine.removed() == false)  // Once.
    }

    @Test func aResponseCompleteBeforeTheRequestAsksTheClientToStop() {
        var machine = self.requestWithBody()
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeEnd(trailers: false) == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: false))
        #expect(machine.sentEndStream() == .markDirty)
        #expect(machine.response == .ended(.due(.noError)))
        #expect(!machine.awaitsRequest)  // The reset is due: the body timeout leaves the stream alone.
        #expect(machine.handlerReset(.cancel) == .drop)  // One reset at a time.
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .resetStream(.noError))
        #expect(machine.response == .ended(.submitted))
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .none)
        // The handler may still reset (its code goes out) until nghttp2 closes the stream.
        #expect(machine.handlerReset(.cancel) == .reset)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .resetStream(.cancel))
        machine.closedByNghttp2()
        #expect(machine.response == .closed(endStreamSent: true))
        #expect(machine.removed() == false)  // It asked.
    }

    @Test func aClosedStreamWhoseRequestDidNotEndTellsTheHandler() {
        var machine = self.requestWithBody()
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeEnd(trailers: false) == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: false))
        #expect(machine.sentEndStream() == .markDirty)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .resetStream(.noError))
        machine.closedByNghttp2()
        #expect(machine.removed() == true)  // The request side never finished.
    }

    @Test func theRequestBodyStalls() {
        var machine = self.requestWithBody()
        #expect(machine.awaitsRequest)
        #expect(machine.requestStalled() == .reset)
        #expect(machine.response == .resetRequested(.cancel))
        #expect(machine.reader == .released)
        #expect(machine.requestStalled() == .drop)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .resetStream(.cancel))
        #expect(!machine.awaitsRequest)
        // A request that ended cannot stall.
        var ended = self.bodylessRequest()
        #expect(ended.requestStalled() == .drop)
        #expect(ended.response == .nothingWritten)
    }

    @Test func theConnectionGoesAway() {
        var finished = self.bodylessRequest()
        #expect(finished.writeHead() == .queue)
        #expect(finished.writeEnd(trailers: false) == .queue)
        #expect(finished.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: false))
        #expect(finished.sentEndStream() == .none)
        #expect(finished.removed() == false)
        #expect(finished.isClosed)
        var underWay = self.bodylessRequest()
        #expect(underWay.writeHead() == .queue)
        #expect(underWay.removed() == true)
        #expect(underWay.isClosed)
        var undelivered = Machine()
        #expect(undelivered.receivedHead(endStream: true) == .record)
        #expect(undelivered.removed() == false)  // No handler was made.
    }

    // MARK: Submit failures

    @Test func aFailedSubmitStopsTheStream() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeEnd(trailers: true) == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: true))
        machine.submissionFailed()
        #expect(machine.response == .reset)
        #expect(!machine.isWritable)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .none)
        #expect(machine.writeBody(queuedBytes: 1, limit: Self.limit) == .drop)
        machine.closedByNghttp2()
        machine.submissionFailed()
        #expect(machine.isClosed)
    }

    // MARK: Writability

    @Test func writabilityFollowsTheQueueWithHysteresis() {
        var machine = self.bodylessRequest()
        #expect(machine.isWritable)
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeBody(queuedBytes: Self.limit, limit: Self.limit) == .queue(becameUnwritable: false))
        #expect(machine.writeBody(queuedBytes: Self.limit + 1, limit: Self.limit) == .queue(becameUnwritable: true))
        #expect(!machine.isWritable)
        // Told once.
        #expect(machine.writeBody(queuedBytes: Self.limit + 2, limit: Self.limit) == .queue(becameUnwritable: false))
        #expect(machine.nextSubmission(bodyIsEmpty: false) == .submitHead(withBody: true))
        #expect(machine.pulled(copied: 100, bodyIsEmpty: false) == .data)
        // Above half the limit: still not writable.
        #expect(machine.bodyDrained(queuedBytes: Self.limit / 2 + 1, limit: Self.limit) == false)
        #expect(!machine.isWritable)
        #expect(machine.bodyDrained(queuedBytes: Self.limit / 2, limit: Self.limit) == true)
        #expect(machine.isWritable)
        #expect(machine.bodyDrained(queuedBytes: 0, limit: Self.limit) == false)  // Told once.
        #expect(machine.writeBody(queuedBytes: Self.limit + 1, limit: Self.limit) == .queue(becameUnwritable: true))
        // A reset or a close makes the stream unwritable whatever the queue.
        #expect(machine.handlerReset(.cancel) == .reset)
        #expect(!machine.isWritable)
    }

    @Test func endStreamReportedAfterTheCloseStillCompletesTheResponse() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.writeEnd(trailers: false) == .queue)
        #expect(machine.nextSubmission(bodyIsEmpty: true) == .submitHead(withBody: false))
        machine.closedByNghttp2()
        #expect(machine.sentEndStream() == .none)
        #expect(machine.response == .closed(endStreamSent: true))
        #expect(machine.removed() == false)
    }

    @Test func aClosedStreamIsNotWritable() {
        var machine = self.bodylessRequest()
        #expect(machine.writeHead() == .queue)
        #expect(machine.isWritable)
        machine.closedByNghttp2()
        #expect(!machine.isWritable)
    }
}

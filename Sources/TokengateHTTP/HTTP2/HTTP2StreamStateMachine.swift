//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The protocol state of one HTTP/2 stream as ``HTTP2ServerCodec`` serves it: where the request is, who reads
/// it, where the response is, and whether nghttp2 has closed the stream.
///
/// nghttp2 keeps the wire-level stream state (RFC 9113 §5.1) and validates frames against it; this machine keeps
/// what nghttp2 cannot know: what the handler has written and what of it was handed to nghttp2, whether the
/// data provider is parked (`NGHTTP2_ERR_DEFERRED`) and must be resumed, that trailers wait for the provider's
/// end, that a `100 Continue` is pointless once the final head is written, that a request the codec answered
/// itself has nobody to read its body. Those facts used to be a dozen flags on the stream whose legal
/// combinations lived in comments; here each input is one `mutating func`, every transition is in this file,
/// and the codec only runs the action it gets back (see "One request over HTTP/2" in docs/architecture.md).
///
/// A value with no I/O, no clock and no storage: the bytes (body queue, header blocks) stay in
/// ``HTTP2StreamState``, whose counts the codec passes in where a decision needs them. Everything it holds is
/// trivially copyable, so it lives inline in the stream's class and a transition is a few stores.
///
/// Inputs that break the rules fail closed. From the client they cannot reach here as such (nghttp2 rejects
/// them first), so a request-side input in the wrong state is ignored. From the handler (a body before the
/// head or after the end, a second head) they are the gateway's own bug: the write is dropped and the stream is
/// reset with INTERNAL_ERROR, so the client never sees a response that is not the one the handler meant.
struct HTTP2StreamStateMachine: Sendable {
    /// The client's side: the request as nghttp2 reported it.
    enum Request: Equatable, Sendable {
        /// The request's header block is being received.
        case receivingHead
        /// The head is complete; DATA may follow.
        case receivingBody
        /// A second header block (trailers) is being received.
        case receivingTrailers
        /// END_STREAM received.
        case ended
    }

    /// Who the request is for.
    enum Reader: Equatable, Sendable {
        /// The head was not handed on yet (its event waits for the round's delivery).
        case undecided
        /// A handler was made for the request and gets its parts.
        case handler
        /// The codec answered the request itself (a 400, a 431): its body is dropped and given back to the
        /// connection window as it arrives.
        case codec
        /// The handler is gone (it reset the stream, the request body stalled, or the stream was removed):
        /// parts still queued for it are dropped when delivered.
        case released
    }

    /// Whether the handler has ended the response, and with trailers.
    enum ResponseEnd: Equatable, Sendable {
        case open
        case ended(trailers: Bool)
    }

    /// A RST_STREAM asked for after END_STREAM went out.
    enum LateReset: Equatable, Sendable {
        case none
        /// To submit on the next round: NO_ERROR when the response ended before the request (RFC 9113 §8.1),
        /// or the handler's code.
        case due(HTTP2ErrorCode)
        case submitted
    }

    /// The server's side: the response from the handler's writes to nghttp2's frames.
    enum Response: Equatable, Sendable {
        /// Nothing written (or only a `100 Continue` that was submitted).
        case nothingWritten
        /// `100 Continue` to submit on the next round.
        case continueDue
        /// The head is written and waits for the next round's submit; body parts and the end may be queued.
        case headPending(ResponseEnd)
        /// The head was submitted with a data provider, which nghttp2 pulls; `deferred` while the provider
        /// returned NGHTTP2_ERR_DEFERRED and waits for `nghttp2_session_resume_data`.
        case streaming(ResponseEnd, deferred: Bool)
        /// The provider gave its last byte without END_STREAM: the trailers are to be submitted next round.
        case trailersDue
        /// END_STREAM is with nghttp2 (a head without body, the provider's end, or the trailers), not yet sent.
        case endQueued
        /// END_STREAM sent.
        case ended(LateReset)
        /// A RST_STREAM to submit on the next round; nothing more is written.
        case resetRequested(HTTP2ErrorCode)
        /// RST_STREAM submitted (or a submit failed and nghttp2 resets the stream): nothing more is written.
        case reset
        /// nghttp2 closed the stream; `endStreamSent` says whether the response was complete.
        case closed(endStreamSent: Bool)
    }

    private(set) var request: Request = .receivingHead
    private(set) var reader: Reader = .undecided
    private(set) var response: Response = .nothingWritten
    /// False while more than the per-stream limit of response bytes waits for the client; back to true at half
    /// of it, so a reader near the limit does not flap.
    private var writable = true
    /// The request was a `HEAD`: the response has no content (RFC 9110 §9.3.2), so body writes are dropped, as
    /// HTTP/1.1's serializer drops them. A gateway answer (401, 404, …) comes with its JSON body whatever the
    /// method; sent as DATA on a `HEAD` stream, clients (curl, nghttp2) reset the stream as a protocol error.
    private var responseHasNoContent = false

    init() {}

    // MARK: What the driver reads

    /// nghttp2 closed the stream: nothing more is submitted or pulled for it.
    var isClosed: Bool {
        if case .closed = self.response { return true }
        return false
    }

    /// The response may take more body now (``HTTP2ServerStream/isWritable``).
    var isWritable: Bool {
        switch self.response {
        case .closed, .resetRequested, .reset, .ended(.due): false
        case .nothingWritten, .continueDue, .headPending, .streaming, .trailersDue, .endQueued, .ended: self.writable
        }
    }

    /// The request is still expected to send (its body or trailers) on a stream that is not being reset: what
    /// the codec's request body timeout looks at.
    var awaitsRequest: Bool {
        guard self.request != .ended else { return false }
        switch self.response {
        case .closed, .resetRequested, .reset, .ended(.due): return false
        case .nothingWritten, .continueDue, .headPending, .streaming, .trailersDue, .endQueued, .ended: return true
        }
    }

    /// Request parts go to the handler (otherwise their bytes go back to the connection window).
    var deliversToHandler: Bool { self.reader == .handler }

    // MARK: Inputs from nghttp2's callbacks (the client's frames)

    /// What to do with an input the client sent.
    enum RequestAction: Equatable, Sendable {
        /// Record the part for the reader (the round delivers it).
        case record
        /// Not legal here (nghttp2 lets none through): nothing is recorded.
        case ignore
    }

    /// The request's header block ended (HEADERS received); `endStream` when it carried END_STREAM.
    mutating func receivedHead(endStream: Bool) -> RequestAction {
        guard self.request == .receivingHead else { return .ignore }
        self.request = endStream ? .ended : .receivingBody
        return .record
    }

    /// A second header block began: the trailers.
    mutating func beganTrailers() -> RequestAction {
        guard self.request == .receivingBody else { return .ignore }
        self.request = .receivingTrailers
        return .record
    }

    /// The trailers' block ended; nghttp2 insists that it carries END_STREAM.
    mutating func receivedTrailers(endStream: Bool) -> RequestAction {
        guard endStream, self.request == .receivingTrailers || self.request == .receivingBody else { return .ignore }
        self.request = .ended
        return .record
    }

    /// A DATA frame with END_STREAM was received.
    mutating func receivedEndStream() -> RequestAction {
        guard self.request == .receivingBody else { return .ignore }
        self.request = .ended
        return .record
    }

    /// Where request body bytes go as they arrive.
    enum DataAction: Equatable, Sendable {
        /// Counted unconsumed and recorded for the reader; given back if nobody reads them at delivery.
        case record
        /// Nobody will read them (the codec answered): given back to the connection window at once.
        case giveBackToConnection
    }

    func receivedData() -> DataAction {
        self.reader == .codec ? .giveBackToConnection : .record
    }

    /// nghttp2 closed the stream (on_stream_close): nothing more is written, submitted or pulled.
    mutating func closedByNghttp2() {
        guard !self.isClosed else { return }
        self.response = .closed(endStreamSent: self.endStreamSent)
    }

    /// END_STREAM went out (on a DATA or HEADERS frame, the response's or its trailers').
    enum SentEndAction: Equatable, Sendable {
        case none
        /// The request is still sending: a RST_STREAM NO_ERROR asks the client to stop (RFC 9113 §8.1); mark
        /// the stream for the next round.
        case markDirty
    }

    mutating func sentEndStream() -> SentEndAction {
        switch self.response {
        case .closed(endStreamSent: false):
            // nghttp2 reports the frame before it closes the stream; should it ever be the other way round, the
            // response still counts as complete when the handler is let go.
            self.response = .closed(endStreamSent: true)
            return .none
        case .closed, .resetRequested, .reset, .ended:
            return .none
        case .nothingWritten, .continueDue, .headPending, .streaming, .trailersDue, .endQueued:
            if self.request != .ended {
                self.response = .ended(.due(.noError))
                return .markDirty
            }
            self.response = .ended(.none)
            return .none
        }
    }

    // MARK: Inputs from the round's delivery

    /// The request's head went to a handler (made for it now). `headRequest`: its method is `HEAD`.
    mutating func handlerTookRequest(headRequest: Bool) {
        guard self.reader == .undecided else { return }
        self.reader = .handler
        self.responseHasNoContent = headRequest
    }

    /// The codec answers the request itself; the request body is dropped from now on.
    mutating func codecAnswersRequest(headRequest: Bool) {
        guard self.reader == .undecided else { return }
        self.reader = .codec
        self.responseHasNoContent = headRequest
    }

    /// The stream is removed (its close was delivered, or the connection went away): the handler is let go.
    /// True when it must be told (``HTTP2StreamHandler/streamReset(_:)``): it still had the stream and the
    /// exchange did not finish on both sides.
    mutating func removed() -> Bool {
        let tell = self.reader == .handler && !(self.request == .ended && self.endStreamSent)
        self.reader = .released
        self.closedByNghttp2()
        return tell
    }

    // MARK: Inputs from the handler's writes

    /// What to do with a head, an end or a `100 Continue`.
    enum WriteAction: Equatable, Sendable {
        /// Keep what was written (the head's block, the trailers) and mark the stream for the next round.
        case queue
        /// Dropped: the stream is closed or being reset, or the write is pointless now.
        case drop
        /// Not legal here (the handler's bug): dropped, the queued body is emptied, and a RST_STREAM
        /// INTERNAL_ERROR is due next round (mark the stream).
        case reset
    }

    /// The response head. A second head is illegal; a head after a reset or close is dropped.
    mutating func writeHead() -> WriteAction {
        switch self.response {
        case .nothingWritten, .continueDue:
            // A `100 Continue` not yet submitted is forgotten: the client reads the final head instead.
            self.response = .headPending(.open)
            return .queue
        case .headPending, .streaming, .trailersDue, .endQueued:
            return self.illegalWrite()
        case .ended, .resetRequested, .reset, .closed:
            return .drop
        }
    }

    /// Takes back a head (and what body followed it) that is queued and not submitted yet, so that the stream can
    /// still be answered otherwise: a backend that closed in the middle of its first read leaves its head queued,
    /// and a reset then would give the client neither that head nor an answer. `false` once the head is
    /// submitted, or when there is none: then all that is left is to cut the stream.
    mutating func withdrawHead() -> Bool {
        guard case .headPending(.open) = self.response else { return false }
        self.response = .nothingWritten
        return true
    }

    /// `100 Continue`, for a request that still sends and whose final head is not written.
    mutating func writeContinue() -> WriteAction {
        guard self.request != .ended else { return .drop }
        switch self.response {
        case .nothingWritten, .continueDue:
            self.response = .continueDue
            return .queue
        case .headPending, .streaming, .trailersDue, .endQueued, .ended, .resetRequested, .reset, .closed:
            return .drop
        }
    }

    /// What to do with a body part.
    enum BodyAction: Equatable, Sendable {
        /// Append it and mark the stream; `becameUnwritable`: tell the handler it is no longer writable.
        case queue(becameUnwritable: Bool)
        case drop
        /// As ``WriteAction/reset``.
        case reset
    }

    /// A non-empty body part; `queuedBytes` is what the queue would hold with it, `limit` the per-stream limit.
    mutating func writeBody(queuedBytes: Int, limit: Int) -> BodyAction {
        switch self.response {
        case .headPending(.open), .streaming(.open, _):
            if self.responseHasNoContent { return .drop }
            var becameUnwritable = false
            if self.writable, queuedBytes > limit {
                self.writable = false
                becameUnwritable = true
            }
            return .queue(becameUnwritable: becameUnwritable)
        case .nothingWritten, .continueDue, .headPending(.ended), .streaming(.ended, _), .trailersDue, .endQueued:
            // Before the head or after the end.
            return self.illegalWrite() == .reset ? .reset : .drop
        case .ended, .resetRequested, .reset, .closed:
            return .drop
        }
    }

    /// The response's end; `trailers` when a non-empty trailer block follows the body. An end before the
    /// head is illegal (the client must not see half a response); a second end is dropped.
    mutating func writeEnd(trailers: Bool) -> WriteAction {
        switch self.response {
        case .headPending(.open):
            self.response = .headPending(.ended(trailers: trailers))
            return .queue
        case .streaming(.open, let deferred):
            self.response = .streaming(.ended(trailers: trailers), deferred: deferred)
            return .queue
        case .nothingWritten, .continueDue:
            return self.illegalWrite()
        case .headPending(.ended), .streaming(.ended, _), .trailersDue, .endQueued, .ended, .resetRequested, .reset,
            .closed:
            return .drop
        }
    }

    /// The handler resets the stream (it is not told of the reset again).
    enum ResetAction: Equatable, Sendable {
        /// Let the handler go, empty the body queue, and mark the stream: the RST_STREAM is submitted next round.
        case reset
        /// The stream is closed or already being reset.
        case drop
    }

    mutating func handlerReset(_ code: HTTP2ErrorCode) -> ResetAction {
        self.requestReset(code, releasing: true)
    }

    /// The client sent nothing for its request body for the idle timeout: RST_STREAM CANCEL, and the handler
    /// (let go now) is told, as the codec decided it.
    mutating func requestStalled() -> ResetAction {
        guard self.awaitsRequest else { return .drop }
        return self.requestReset(.cancel, releasing: true)
    }

    private mutating func requestReset(_ code: HTTP2ErrorCode, releasing: Bool) -> ResetAction {
        switch self.response {
        case .closed, .resetRequested, .reset, .ended(.due):
            return .drop
        case .ended(.none), .ended(.submitted):
            self.response = .ended(.due(code))
        case .nothingWritten, .continueDue, .headPending, .streaming, .trailersDue, .endQueued:
            self.response = .resetRequested(code)
        }
        if releasing, self.reader == .handler {
            self.reader = .released
        }
        return .reset
    }

    private mutating func illegalWrite() -> WriteAction {
        self.requestReset(.internalError, releasing: false) == .reset ? .reset : .drop
    }

    // MARK: Inputs from the submit round and the data provider

    /// What the round submits for the stream, one call per round.
    enum Submission: Equatable, Sendable {
        case none
        /// `nghttp2_submit_rst_stream` with the code; the body queue is emptied.
        case resetStream(HTTP2ErrorCode)
        /// `100 Continue`.
        case submitContinue
        /// The head, with a data provider unless `withBody` is false (END_STREAM on the HEADERS frame).
        case submitHead(withBody: Bool)
        /// `nghttp2_session_resume_data`: the parked provider has something to give.
        case resumeData
        /// The trailers (HEADERS with END_STREAM).
        case submitTrailers
    }

    /// What is due for nghttp2 now; `bodyIsEmpty`: the response body queue holds nothing.
    mutating func nextSubmission(bodyIsEmpty: Bool) -> Submission {
        switch self.response {
        case .resetRequested(let code):
            self.response = .reset
            return .resetStream(code)
        case .ended(.due(let code)):
            self.response = .ended(.submitted)
            return .resetStream(code)
        case .continueDue:
            self.response = .nothingWritten
            return .submitContinue
        case .headPending(let end):
            if end == .ended(trailers: false), bodyIsEmpty {
                self.response = .endQueued
                return .submitHead(withBody: false)
            }
            self.response = .streaming(end, deferred: false)
            return .submitHead(withBody: true)
        case .streaming(let end, deferred: true) where !bodyIsEmpty || end != .open:
            self.response = .streaming(end, deferred: false)
            return .resumeData
        case .trailersDue:
            self.response = .endQueued
            return .submitTrailers
        case .nothingWritten, .streaming, .endQueued, .ended(.none), .ended(.submitted), .reset, .closed:
            return .none
        }
    }

    /// The nghttp2 call for the last submission failed: the codec resets the stream (INTERNAL_ERROR) and
    /// empties its body queue; nothing more is submitted.
    mutating func submissionFailed() {
        guard !self.isClosed else { return }
        self.response = .reset
    }

    /// What the data provider returns once it copied what it could.
    enum PullAction: Equatable, Sendable {
        /// The bytes copied (more may follow).
        case data
        /// Nothing to give yet: NGHTTP2_ERR_DEFERRED; a later write resumes the provider.
        case deferred
        /// The last bytes: EOF with END_STREAM.
        case endOfData
        /// The last bytes, EOF without END_STREAM; mark the stream: the trailers go next round.
        case endOfDataBeforeTrailers
        /// The provider should not be pulled now: NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE (nghttp2 resets).
        case fail
    }

    /// nghttp2 pulled the provider: `copied` bytes were copied and the queue is now `bodyIsEmpty`.
    mutating func pulled(copied: Int, bodyIsEmpty: Bool) -> PullAction {
        let end: ResponseEnd
        switch self.response {
        case .streaming(let streamingEnd, _):
            end = streamingEnd
        case .resetRequested, .reset:
            // The body queue was emptied and the RST_STREAM closes the stream: the provider stays parked.
            return .deferred
        case .nothingWritten, .continueDue, .headPending, .trailersDue, .endQueued, .ended, .closed:
            // No provider was submitted, or it already gave its end.
            return .fail
        }
        if bodyIsEmpty, case .ended(let trailers) = end {
            self.response = trailers ? .trailersDue : .endQueued
            return trailers ? .endOfDataBeforeTrailers : .endOfData
        }
        if copied == 0 {
            self.response = .streaming(end, deferred: true)
            return .deferred
        }
        return .data
    }

    /// The body queue shrank to `queuedBytes`: true when the handler is to be told it is writable again.
    mutating func bodyDrained(queuedBytes: Int, limit: Int) -> Bool {
        guard !self.writable, queuedBytes <= limit / 2 else { return false }
        self.writable = true
        return true
    }

    // MARK: Derived

    private var endStreamSent: Bool {
        switch self.response {
        case .ended: true
        case .closed(let sent): sent
        case .nothingWritten, .continueDue, .headPending, .streaming, .trailersDue, .endQueued, .resetRequested,
            .reset:
            false
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateNghttp2
internal import CTokengateShims
import Logging
import NIOCore
import NIOHTTP1

/// The server side of one HTTP/2 connection, on libnghttp2: placed right after the TLS handler once ALPN
/// chose `h2`, it turns frames into per-stream HTTP/1-shaped requests for ``HTTP2StreamHandler``s and their
/// responses back into frames.
///
/// ### Overview
/// One `nghttp2_session` (server, HTTP messaging validation on, automatic WINDOW_UPDATEs off) per
/// connection. Bytes from the client go into `nghttp2_session_mem_recv`, which calls back into the codec
/// (`HTTP2ServerCodec+Callbacks.swift`); bytes for the client are taken from `nghttp2_session_mem_send`
/// into one buffer per flush.
///
/// ### The reentrancy rule
/// nghttp2 must never be entered from inside one of its own callbacks, and a handler must never run while
/// nghttp2 is on the stack (a handler may write, reset, or close the channel, which would re-enter). So the
/// callbacks only *record*: they feed each stream's ``HTTP2StreamStateMachine`` (the protocol state; the codec
/// runs the action each input returns and decides nothing about a stream itself), update the storage in
/// ``HTTP2StreamState`` and append ``Event``s. Everything else happens in ``process()``, one round at a time, in
/// a fixed order:
/// 1. feed queued input to `mem_recv`;
/// 2. deliver the recorded events to the handlers (which may write: their writes are queued, not submitted);
/// 3. submit what is queued (`submit_response`, `resume_data`, `submit_trailer`, `submit_rst_stream`,
///    `session_consume`), and the connection's GOAWAY if one is due;
/// 4. drain `mem_send` into one buffer, write and flush it (its callbacks may record more events).
///
/// Rounds repeat while any step left work behind; a call that arrives while a round is running (a handler's
/// write, a re-entrant `channelRead`) only sets `needsProcessing`. Handler writes made outside a round (from
/// an upstream callback) schedule one round on the next event-loop tick, so a burst becomes one write.
///
/// ### Closing
/// The connection closes when nghttp2 wants neither to read nor to write (after a GOAWAY, once the streams
/// below its last-stream-id are done), after the last write completed, so the GOAWAY reaches the client.
/// A graceful shutdown takes two GOAWAYs, a second apart (``shutdownGracefully()``); one the codec ends
/// because of the client (a flood, a timeout, a protocol error) takes one, at once.
package final class HTTP2ServerCodec: ChannelDuplexHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = Never
    package typealias OutboundIn = Never
    package typealias OutboundOut = ByteBuffer

    private enum State {
        /// Added, no session yet (the channel is not active).
        case idle
        case active
        /// A terminating GOAWAY was queued: input is ignored, output drains, then the channel closes.
        case closing
        case closed
    }

    /// What a callback recorded for a handler, delivered in order after nghttp2 returned.
    package enum Event {
        case requestHead(Int32)
        case requestBody(Int32, ByteBuffer)
        case requestEnd(Int32, HTTPHeaders?)
        case streamClosed(Int32, HTTP2ErrorCode)
        case writabilityChanged(Int32, Bool)
    }

    let configuration: HTTP2ServerConfiguration
    let logger: Logger
    /// Lends the buffer a round's frames are written into and takes it back once written: the thread's lent
    /// output buffer in the gateway (the TLS handler encrypts from it at the flush and lets it go), so idle
    /// connections hold none. Passed in because where such buffers live is the driver's business.
    private let takeOutputBuffer: (ByteBufferAllocator, Int) -> ByteBuffer
    private let giveBackOutputBuffer: (ByteBuffer) -> Void
    private let makeHandler: HTTP2StreamHandlerFactory
    /// Counts a stream the codec answers itself, by reason code (``GatewayMetrics/recordUnrouted(reason:)``).
    private let countAnswer: (String) -> Void
    private var state: State = .idle

    /// The nghttp2 session; created when the channel is active, deleted in `handlerRemoved` or `deinit`.
    var session: NGHTTP2ServerSession?
    /// The session's allocator. Set together with `session` and never replaced or cleared: it must outlive the
    /// session, so it is released with the codec, after every `nghttp2_session_del` has run.
    private(set) var arena: HTTP2SessionArena?
    var context: ChannelHandlerContext?
    /// Every stream the codec keeps, by id. Read through ``stream(_:)``; changed only by ``streamOpened(_:)``,
    /// the close of a stream and ``failAllStreams(code:)``, which keep ``lastStream`` true.
    private(set) var streams: [Int32: HTTP2StreamState] = [:]
    /// The stream ``stream(_:)`` found last. nghttp2's callbacks and the stream handles ask for the same stream
    /// several times in a row (every field of a header block, every write of a response, the submit round), and
    /// hashing the id cost more than most of those calls do besides.
    private var lastStream: HTTP2StreamState?
    /// Body queues and header block storage of finished streams, for the next ones.
    var spares = HTTP2StreamSpares()
    /// Streams open from the codec's point of view (created by a request, not yet seen closed).
    private(set) var openStreamCount = 0
    /// Small to start with: every idle connection holds it; it grows (and stays grown) under many streams.
    var events = CircularBuffer<Event>(initialCapacity: 4)
    /// Streams with something to submit.
    private var dirtyStreams: [Int32] = []
    /// An empty list ``submitPending(_:)`` swaps with ``dirtyStreams``, keeping both lists' capacity.
    private var spareDirtyStreams: [Int32] = []
    /// Request body bytes to give back to the connection window only (data for streams nobody reads).
    var connectionConsumePending = 0
    /// What the streams hold of ``HTTP2ServerConfiguration/responseBuffers`` (at most the per-connection share).
    var grantedBytes = 0
    var heuristics: HTTP2DoSHeuristics
    /// The limit a callback found exceeded; acted upon (GOAWAY ENHANCE_YOUR_CALM) after nghttp2 returns.
    var calm: HTTP2DoSHeuristics.Event?
    /// A GOAWAY to submit on the next round.
    private var goawayDue: (code: HTTP2ErrorCode, terminate: Bool)?
    /// The GOAWAY that ends the connection (final or terminating) was submitted; a shutdown notice does not count.
    private var goawaySubmitted = false
    /// A graceful shutdown's notice is to be submitted next round (``shutdownGracefully()``).
    private var shutdownNoticeDue = false
    /// The notice is out: when its final GOAWAY is due (``HTTP2ServerConfiguration/shutdownNoticeTimeout``).
    private var finalGoawayAt: NIODeadline?
    /// A graceful shutdown came before the client's first request: its GOAWAY waits for that request
    /// (``shutdownGracefully()``).
    private var goawayAfterFirstRequest = false
    /// Why the codec itself ends the connection with an error code, for the GOAWAY's warning (``sentGoaway(_:)``).
    private(set) var goawayCause: String?

    private var pendingInput = CircularBuffer<ByteBuffer>(initialCapacity: 2)
    private var processing = false
    private var needsProcessing = false
    private var tickScheduled = false
    private var pendingRead = false
    private var lastWrite: EventLoopFuture<Void>?

    // Timeouts: one scheduled task for the earliest deadline, re-armed when it fires early.
    private var startedAt: NIODeadline = .now()
    /// No frame arrived yet (the preface is awaited).
    var awaitingPreface = true
    /// A header block began and has not ended (HEADERS without END_HEADERS and its CONTINUATIONs). Cleared when
    /// nghttp2 reports the HEADERS frame received, when the header of any other frame than CONTINUATION is
    /// read, or when the block's stream closes after its last frame began (a block nghttp2 rejected): see
    /// ``receivedFrameHeader(_:)`` and ``streamClosed(_:code:)``.
    var headerBlockStartedAt: NIODeadline?
    /// The stream of the header block begun last.
    var headerBlockStream: Int32 = 0
    /// The HEADERS or CONTINUATION frame begun last carries END_HEADERS.
    var headerBlockEndsInLastFrame = false
    /// When the current round of ``process()`` began: the time the callbacks of that round go by (flood
    /// windows, header block starts, idle periods), read once per round instead of once per frame or stream.
    /// Every callback runs inside a round; the timeouts these feed are seconds long.
    var roundStartedAt: NIODeadline = .now()
    /// No stream has been open since then.
    private var idleSince: NIODeadline?
    /// The frame buffer's pages were handed back in the current idle period (reset when a stream opens).
    private var idlePagesReleased = false
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    /// When the open streams are next looked at for a client that stopped sending the request body it
    /// announced (``resetStalledRequestBodies(now:)``); set while streams are open. One check per connection
    /// rather than a task per stream: a request costs no scheduling, only a stored time per frame.
    private var bodyCheckAt: NIODeadline?

    /// - Parameters:
    ///   - countAnswer: counts each stream the codec answers itself (a 400 or 431), by reason code.
    ///   - takeOutputBuffer: lends the buffer one round's frames go into (the allocator, the minimum capacity).
    ///   - giveBackOutputBuffer: takes that buffer back once it is handed to the channel.
    ///   - makeHandler: called once per stream whose request head is complete and valid.
    package init(
        configuration: HTTP2ServerConfiguration = HTTP2ServerConfiguration(),
        logger: Logger,
        countAnswer: @escaping (String) -> Void = { _ in },
        takeOutputBuffer: @escaping (ByteBufferAllocator, Int) -> ByteBuffer = { $0.buffer(capacity: $1) },
        giveBackOutputBuffer: @escaping (ByteBuffer) -> Void = { _ in },
        makeHandler: @escaping HTTP2StreamHandlerFactory
    ) {
        self.configuration = configuration
        self.logger = logger
        self.takeOutputBuffer = takeOutputBuffer
        self.giveBackOutputBuffer = giveBackOutputBuffer
        self.countAnswer = countAnswer
        self.makeHandler = makeHandler
        self.heuristics = HTTP2DoSHeuristics(limits: configuration.dos, now: .now())
    }

    package var allocator: ByteBufferAllocator {
        self.context?.channel.allocator ?? ByteBufferAllocator()
    }

    // MARK: Lifecycle

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive {
            self.start(context: context)
        }
    }

    package func channelActive(context: ChannelHandlerContext) {
        self.start(context: context)
        context.fireChannelActive()
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        self.cancelTimer()
        self.failAllStreams(code: .cancel)
        self.state = .closed
        self.context = nil
        // Never while a round runs: nghttp2 may still be on the stack below us.
        if !self.processing {
            self.session = nil
        }
    }

    /// Creates the session and sends the server preface (SETTINGS, then the connection WINDOW_UPDATE).
    private func start(context: ChannelHandlerContext) {
        guard case .idle = self.state else { return }
        let now = context.eventLoop.now
        self.startedAt = now
        self.idleSince = now
        self.heuristics = HTTP2DoSHeuristics(limits: self.configuration.dos, now: now)
        do {
            let session = try NGHTTP2ServerSession(userData: Unmanaged.passUnretained(self).toOpaque(), configuration: self.configuration)
            self.arena = session.arena
            self.session = session
        } catch {
            self.logger.error("HTTP/2 session could not be created", metadata: ["error": "\(error)"])
            self.state = .closed
            context.close(promise: nil)
            return
        }
        self.state = .active
        self.process()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        self.state = .closed
        self.cancelTimer()
        self.failAllStreams(code: .cancel)
        context.fireChannelInactive()
    }

    /// The connection is gone: every stream not finished on both sides is reset for its handler.
    private func failAllStreams(code: HTTP2ErrorCode) {
        let streams = self.streams
        self.streams = [:]
        self.lastStream = nil
        self.spares.release()
        self.events.removeAll()
        self.openStreamCount = 0
        for stream in streams.values {
            self.giveBackGrant(stream)
            stream.handle.detach()
            let handler = stream.handler
            stream.handler = nil
            if stream.machine.removed() {
                handler?.streamReset(code)
            }
        }
    }

    // MARK: Inbound

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .active = self.state else { return }  // Closing or closed: bytes are never acted upon.
        self.pendingInput.append(self.unwrapInboundIn(data))
        self.process()
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is GatewayShutdownEvent {
            self.shutdownGracefully()
            return
        }
        if event is GatewayDrainEndedEvent {
            for stream in self.streams.values {
                stream.handler?.drainEnded()
            }
            // Now, not at the next tick: the server closes the connection right after this event, and the
            // streams' 503s must be on the wire by then.
            self.process()
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Graceful shutdown: GOAWAY NO_ERROR with the last stream id nghttp2 processed, so the client knows
    /// which requests will be answered and may retry the rest elsewhere; in-flight streams finish, then the
    /// connection closes (nghttp2 then wants neither to read nor to write).
    ///
    /// A connection that has not had a request yet was just opened (accepted as the listeners stopped, in a
    /// binary hand-over or a restart on a socket systemd holds) and its client is sending the first one: a
    /// GOAWAY with last stream 0 would refuse it. So the GOAWAY waits until that request is answered (and
    /// any the client opened meanwhile), as HTTP/1.1 answers a new connection's first request before closing; the preface, header-read and idle
    /// timeouts still bound a client that sends none, and the drain timeout bounds them all.
    ///
    /// The GOAWAY comes in two halves, as RFC 9113 §6.8 recommends. A GOAWAY naming the last stream processed
    /// refuses a request the client sent before it read the GOAWAY, and clients do not all retry that (curl
    /// 7.88 reports the request failed). So first the shutdown notice, GOAWAY NO_ERROR with last-stream-id
    /// 2^31-1: clients (curl, Python's h2, browsers) open no new stream on the connection, and a request
    /// already on its way is still taken. Then, ``HTTP2ServerConfiguration/shutdownNoticeTimeout`` (1 s, more
    /// than a round trip) later, the final GOAWAY names the last stream processed, and streams above it are
    /// refused. A timer, not a PING whose ACK would prove the round trip: Python's h2 takes any GOAWAY as the
    /// end of the connection and fails on a PING that follows one, whereas a second GOAWAY is allowed. The
    /// drain timeout bounds it all.
    package func shutdownGracefully() {
        guard case .active = self.state, self.goawayDue == nil, !self.goawaySubmitted, !self.goawayAfterFirstRequest,
            !self.shutdownNoticeDue, self.finalGoawayAt == nil
        else { return }
        guard let session = self.session, session.lastProcessedStreamID > 0 else {
            self.goawayAfterFirstRequest = true
            return
        }
        self.shutdownNoticeDue = true
        self.process()
    }

    /// The second half: GOAWAY NO_ERROR naming the last stream processed.
    private func finalGoawayDue() {
        self.finalGoawayAt = nil
        if self.goawayDue == nil, !self.goawaySubmitted {
            self.goawayDue = (.noError, false)
        }
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.logger.debug("HTTP/2 connection error", metadata: ["error": "\(error)"])
        self.state = .closed
        context.close(promise: nil)
    }

    // MARK: Outbound: backpressure on the client's reads

    package func read(context: ChannelHandlerContext) {
        // While the client does not take what we write, stop reading what it sends: otherwise a client that
        // never reads could make us queue PING and SETTINGS acknowledgements without bound.
        if context.channel.isWritable {
            context.read()
        } else {
            self.pendingRead = true
        }
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            self.process()
            if self.pendingRead {
                self.pendingRead = false
                context.read()
            }
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: The processing round

    /// Marks `stream` for the next submit round and makes sure a round comes.
    package func markDirty(_ stream: HTTP2StreamState) {
        if !stream.dirty {
            stream.dirty = true
            self.dirtyStreams.append(stream.id)
        }
        self.scheduleProcessing()
    }

    /// Asks for a round: within the running one if there is one, else on the next tick.
    package func scheduleProcessing() {
        if self.processing {
            self.needsProcessing = true
            return
        }
        guard !self.tickScheduled, let context = self.context else { return }
        self.tickScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.tickScheduled = false
            self.process()
        }
    }

    /// Runs rounds until nothing is left to do. See the type's documentation for the order and why.
    private func process() {
        if self.processing {
            self.needsProcessing = true
            return
        }
        guard let context = self.context, let session = self.session else { return }
        self.processing = true
        self.roundStartedAt = context.eventLoop.now
        repeat {
            self.needsProcessing = false
            self.feedInput(session)
            self.actOnCalm(session)
            self.deliverEvents()
            self.submitPending(session)
            self.drain(session, context: context)
            self.actOnCalm(session)
            // The first request is answered and its stream closed: now the GOAWAY a shutdown asked for. After
            // the response rather than with it, for clients (Python's h2) that drop a response arriving after one.
            if self.goawayAfterFirstRequest, self.goawayDue == nil, session.lastProcessedStreamID > 0, self.openStreamCount == 0 {
                self.goawayAfterFirstRequest = false
                self.shutdownNoticeDue = true
                self.needsProcessing = true
            }
        } while self.needsProcessing && self.isRunning
        self.processing = false
        if self.context == nil {
            // handlerRemoved ran during the round and left the deletion to us.
            self.session = nil
            return
        }
        self.closeIfDone(session, context: context)
        self.armTimer(context: context)
    }

    private var isRunning: Bool {
        switch self.state {
        case .active, .closing: true
        case .idle, .closed: false
        }
    }

    /// Step 1: `mem_recv` must take every byte (nghttp2 never pauses here: no callback returns
    /// NGHTTP2_ERR_PAUSE). A negative result is fatal for the session.
    private func feedInput(_ session: NGHTTP2ServerSession) {
        while let buffer = self.pendingInput.popFirst() {
            guard case .active = self.state else {
                self.pendingInput.removeAll()
                return
            }
            let result = buffer.withUnsafeReadableBytes { session.receive($0) }
            if result < 0 {
                self.receiveFailed(Int32(truncatingIfNeeded: result))
            } else {
                precondition(result == buffer.readableBytes, "nghttp2 left received bytes unconsumed")
            }
        }
    }

    private func receiveFailed(_ code: Int32) {
        if self.calm != nil {
            return  // Our own callback stopped nghttp2; actOnCalm sends the GOAWAY.
        }
        let reason = NGHTTP2ServerSession.describe(code)
        self.logger.debug("HTTP/2 session ended by nghttp2", metadata: ["nghttp2_error": "\(reason)"])
        self.goawayCause = reason
        if code == NGHTTP2_ERR_FLOODED.rawValue || code == NGHTTP2_ERR_BAD_CLIENT_MAGIC.rawValue {
            // A client that does not read its acknowledgements, or that does not speak HTTP/2 at all: there
            // is nobody to say goodbye to.
            self.state = .closed
            self.context?.close(promise: nil)
            return
        }
        // Other fatal errors: a terminating GOAWAY (ENHANCE_YOUR_CALM for a CONTINUATION flood, which
        // nghttp2 stops at its limit), whatever nghttp2 queued still goes out, then the close.
        let tooManyContinuations = code == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue
        self.goawayDue = (tooManyContinuations ? .enhanceYourCalm : .protocolError, true)
        self.state = .closing
    }

    /// A rate limit tripped in a callback: GOAWAY ENHANCE_YOUR_CALM, and nothing more is read.
    private func actOnCalm(_ session: NGHTTP2ServerSession) {
        guard let event = self.calm, !self.goawaySubmitted else { return }
        self.logger.warning(
            "HTTP/2 client flooding, closing the connection",
            metadata: ["limit": "\(event)", "goaway": "ENHANCE_YOUR_CALM"]
        )
        self.goawayDue = (.enhanceYourCalm, true)
        self.state = .closing
        self.pendingInput.removeAll()
        self.submitGoaway(session)
    }

    /// Step 2: hands recorded events to the handlers. Handlers may write or reset (queued) or close the
    /// channel (then every lookup below finds nothing).
    private func deliverEvents() {
        while let event = self.events.popFirst() {
            switch event {
            case .requestHead(let id):
                guard let stream = self.stream(id), !stream.machine.isClosed else { continue }
                let headRequest = stream.request.isHeadRequest
                switch stream.request.build() {
                case .head(let head):
                    stream.machine.handlerTookRequest(headRequest: headRequest)
                    let handler = self.makeHandler(stream.handle)
                    stream.handler = handler
                    handler.received(.head(head))
                case .reject(let answer):
                    stream.machine.codecAnswersRequest(headRequest: headRequest)
                    self.answer(answer, on: stream)
                }
            case .requestBody(let id, let buffer):
                guard let stream = self.stream(id) else {
                    self.connectionConsumePending += buffer.readableBytes
                    continue
                }
                if stream.machine.deliversToHandler, let handler = stream.handler {
                    handler.received(.body(buffer))
                } else {
                    // Nobody reads it (the codec answered, or the handler reset): the connection window
                    // gets it back now.
                    stream.unconsumed -= buffer.readableBytes
                    self.connectionConsumePending += buffer.readableBytes
                    self.scheduleProcessing()
                }
            case .requestEnd(let id, let trailers):
                self.stream(id)?.handler?.received(.end(trailers))
            case .streamClosed(let id, let code):
                guard let stream = self.streams.removeValue(forKey: id) else { continue }
                if self.lastStream === stream {
                    self.lastStream = nil
                }
                stream.handle.detach()
                self.giveBackGrant(stream)
                // Emptied while this state is its only holder (no copy), then kept for a next stream.
                stream.body.removeAll(keepingCapacity: true)
                stream.queuedBytes = 0
                self.spares.giveBack(body: stream.body)
                self.openStreamCount -= 1
                if self.openStreamCount == 0 {
                    self.idleSince = self.roundStartedAt
                }
                self.connectionConsumePending += stream.unconsumed + stream.consumePending
                stream.unconsumed = 0
                let handler = stream.handler
                stream.handler = nil
                if stream.machine.removed() {
                    handler?.streamReset(code)
                }
            case .writabilityChanged(let id, let writable):
                self.stream(id)?.handler?.writabilityChanged(writable)
            }
        }
    }

    /// A stream the codec answers itself (the request never reaches a handler).
    ///
    /// Logged as HTTP/1.1's connection handler logs the requests it answers itself (a malformed head, 431):
    /// one info `request` line with the status and reason code, when the access log is on; the stream id is
    /// the only addition. Nothing from the request is logged: it was refused, so its path or fields (a
    /// query string, a token) may be anything.
    private func answer(_ answer: GatewayAnswer, on stream: HTTP2StreamState) {
        self.countAnswer(answer.reasonCode)
        if self.configuration.accessLog {
            self.logger.info(
                "request",
                metadata: ["status": "\(answer.status.code)", "reason": "\(answer.reasonCode)", "stream": "\(stream.id)"]
            )
        }
        let body = answer.jsonBody
        let head = answer.responseHead(
            version: HTTPVersion(major: 2, minor: 0), contentLength: body.utf8.count, hsts: self.configuration.hsts)
        if let block = HTTP2HeaderBlock.response(head) {
            self.streamWriteHead(stream.id, block)
        }
        self.streamWriteBody(stream.id, self.allocator.buffer(string: body))
        self.streamWriteEnd(stream.id, nil)
    }

    /// Step 3: everything handlers queued since the last round, in nghttp2 calls. None of these calls runs a
    /// callback, so the stream table is safe to walk here.
    private func submitPending(_ session: NGHTTP2ServerSession) {
        // The list is swapped with an empty one kept for this (streams marked during the loop go there, for
        // the next round): emptying a list another reference still shares would allocate a new one per round.
        var dirty = self.spareDirtyStreams
        swap(&dirty, &self.dirtyStreams)
        defer {
            dirty.removeAll(keepingCapacity: true)
            self.spareDirtyStreams = dirty
        }
        for id in dirty {
            guard let stream = self.stream(id) else { continue }
            stream.dirty = false
            if stream.consumePending > 0 {
                session.consume(stream: id, bytes: stream.consumePending)
                stream.consumePending = 0
                // The client gets window to send more: a stall of its body is measured from now.
                stream.lastInboundAt = self.roundStartedAt
            }
            let result: Int32
            switch stream.machine.nextSubmission(bodyIsEmpty: stream.body.isEmpty) {
            case .none:
                continue
            case .resetStream(let code):
                stream.body.removeAll(keepingCapacity: true)
                stream.queuedBytes = 0
                session.resetStream(id, code: code.rawValue)
                continue
            case .submitContinue:
                result = session.submitContinue(stream: id)
            case .submitHead(let withBody):
                guard let head = stream.pendingHead else {
                    result = NGHTTP2_ERR_INVALID_ARGUMENT.rawValue
                    break
                }
                stream.pendingHead = nil
                result = session.submit(head, stream: id, response: true, withBody: withBody)
                // nghttp2 copied the fields: the block's storage can serve the next response.
                self.spares.giveBack(headerBlock: head)
            case .resumeData:
                session.resumeData(stream: id)
                continue
            case .submitTrailers:
                guard let trailers = stream.pendingTrailers else {
                    result = NGHTTP2_ERR_INVALID_ARGUMENT.rawValue
                    break
                }
                stream.pendingTrailers = nil
                result = session.submit(trailers, stream: id, response: false, withBody: false)
            }
            if result != 0 {
                self.submitFailed(stream, session: session, result: result)
            }
        }
        if self.connectionConsumePending > 0 {
            session.consumeConnection(bytes: self.connectionConsumePending)
            self.connectionConsumePending = 0
        }
        if self.goawayDue != nil {
            self.submitGoaway(session)
        }
        self.submitShutdownNotice(session)
    }

    /// The first half of a graceful shutdown, when due (``shutdownGracefully()``); its timer starts now.
    private func submitShutdownNotice(_ session: NGHTTP2ServerSession) {
        guard self.shutdownNoticeDue else { return }
        self.shutdownNoticeDue = false
        guard !self.goawaySubmitted else { return }
        guard session.submitShutdownNotice() == 0 else {
            self.finalGoawayDue()
            self.submitGoaway(session)
            return
        }
        self.finalGoawayAt = self.roundStartedAt + self.configuration.shutdownNoticeTimeout
    }

    private func submitFailed(_ stream: HTTP2StreamState, session: NGHTTP2ServerSession, result: Int32) {
        self.logger.debug(
            "HTTP/2 response could not be submitted",
            metadata: ["stream": "\(stream.id)", "nghttp2_error": "\(NGHTTP2ServerSession.describe(result))"]
        )
        stream.machine.submissionFailed()
        stream.body.removeAll(keepingCapacity: true)
        stream.queuedBytes = 0
        let code = HTTP2ErrorCode.internalError.rawValue
        session.resetStream(stream.id, code: code)
    }

    private func submitGoaway(_ session: NGHTTP2ServerSession) {
        guard let (code, terminate) = self.goawayDue else { return }
        self.goawayDue = nil
        guard !self.goawaySubmitted else { return }
        self.goawaySubmitted = true
        if terminate {
            // GOAWAY with the last processed stream id; nghttp2 then wants neither to read nor to write
            // once it is sent, and the connection closes without waiting for the streams.
            session.terminate(code: code.rawValue)
        } else {
            session.submitGoaway(code: code.rawValue)
        }
    }

    /// Step 4: takes nghttp2's output into one buffer and writes and flushes it. Stops while the channel
    /// is not writable (the rest stays queued in nghttp2 until `channelWritabilityChanged`), and after
    /// ``HTTP2ServerConfiguration/maxBytesPerFlush`` to look at writability again.
    private func drain(_ session: NGHTTP2ServerSession, context: ChannelHandlerContext) {
        guard self.isRunning else { return }
        var finished = false
        while !finished, context.channel.isWritable {
            // Taken once nghttp2 has something to send (most rounds, a request read or a body consumed, end
            // with nothing or a few frame bytes), from the thread's lent output buffer: the TLS handler lets
            // it go at the flush, so the next round on any connection of the thread writes into it again.
            var buffer = ByteBuffer()
            while buffer.readableBytes < self.configuration.maxBytesPerFlush {
                var error: Int32 = 0
                guard let frames = session.nextOutput(error: &error) else {
                    let reason = NGHTTP2ServerSession.describe(error)
                    self.logger.debug("HTTP/2 send failed", metadata: ["nghttp2_error": "\(reason)"])
                    self.state = .closing
                    finished = true
                    break
                }
                guard !frames.isEmpty else {
                    finished = true
                    break
                }
                if buffer.capacity == 0 {
                    buffer = self.takeOutputBuffer(context.channel.allocator, max(frames.count, 4096))
                }
                buffer.writeBytes(frames)
            }
            if buffer.readableBytes > 0 {
                self.giveBackOutputBuffer(buffer)
                self.lastWrite = context.writeAndFlush(self.wrapOutboundOut(buffer))
                if self.openStreamCount == 0 {
                    // Frames written while idle (a keep-alive PING's ACK) touched the frame buffer again: its
                    // pages go back at the next timer turn (the idle second has passed already).
                    self.idlePagesReleased = false
                }
            }
            guard self.isRunning else { return }
        }
    }

    /// Closes once nghttp2 is done with the connection (or, when closing, has nothing left to send), after
    /// the last write completed.
    private func closeIfDone(_ session: NGHTTP2ServerSession, context: ChannelHandlerContext) {
        let wantsRead = session.wantsRead
        let wantsWrite = session.wantsWrite
        let linger: TimeAmount
        switch self.state {
        case .active where !wantsRead && !wantsWrite:
            // Both sides are done (a graceful GOAWAY, or the client's). After our own GOAWAY the client may have
            // sent a request before reading it: arriving at a closed socket it would draw a RST, which can make the
            // client's kernel drop the GOAWAY unread, and the client would see a reset instead of a refused
            // stream it retries. So linger then too, reading and dropping; after the client's, nothing is coming.
            linger = self.goawaySubmitted ? self.configuration.closeLinger : .zero
        case .closing where !wantsWrite:
            // We end a connection the client may still be writing to (a flood, a timeout, a protocol error).
            // Closing a socket with unread input makes the kernel send RST and drop what it has not sent yet:
            // the GOAWAY would be lost. So linger a moment, reading and dropping, before the close.
            linger = self.configuration.closeLinger
        case .active, .closing, .idle, .closed:
            return
        }
        self.state = .closed
        self.cancelTimer()
        let close = {
            if linger == .zero {
                context.close(promise: nil)
            } else {
                context.eventLoop.assumeIsolated().scheduleTask(in: linger) { context.close(promise: nil) }
            }
        }
        if let lastWrite = self.lastWrite {
            lastWrite.assumeIsolated().whenComplete { _ in close() }
        } else {
            close()
        }
    }

    // MARK: Timeouts

    /// Keeps one task scheduled for the earliest deadline that applies now: the preface, a header block in
    /// progress, the idle time with no stream open, or the next request body check with streams open.
    private func armTimer(context: ChannelHandlerContext) {
        guard self.isRunning else { return }
        var deadline: NIODeadline?
        if self.awaitingPreface {
            deadline = self.startedAt + self.configuration.headerReadTimeout
        }
        if let started = self.headerBlockStartedAt {
            deadline = min(deadline ?? .distantFuture, started + self.configuration.headerReadTimeout)
        }
        if self.openStreamCount == 0, let idle = self.idleSince {
            deadline = min(deadline ?? .distantFuture, idle + self.configuration.idleTimeout)
            if !self.idlePagesReleased {
                deadline = min(deadline ?? .distantFuture, idle + self.configuration.idlePageReleaseDelay)
            }
        }
        if let finalGoawayAt = self.finalGoawayAt, !self.goawaySubmitted, case .active = self.state {
            deadline = min(deadline ?? .distantFuture, finalGoawayAt)
        }
        if self.openStreamCount > 0, case .active = self.state {
            // No stream can have stalled for the idle timeout before this (each was opened or heard from in
            // this round or later); the check then sets the next one from what it finds. Only while active:
            // the timer acts on nothing else, so a due check would otherwise be re-armed in the past.
            let check = self.bodyCheckAt ?? self.roundStartedAt + self.configuration.idleTimeout
            self.bodyCheckAt = check
            deadline = min(deadline ?? .distantFuture, check)
        }
        guard let deadline else { return }
        if let current = self.timerDeadline, current <= deadline {
            return  // The earlier task re-evaluates when it fires.
        }
        self.timer?.cancel()
        self.timerDeadline = deadline
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.timerFired()
        }
    }

    private func cancelTimer() {
        self.timer?.cancel()
        self.timer = nil
        self.timerDeadline = nil
    }

    private func timerFired() {
        self.timer = nil
        self.timerDeadline = nil
        guard let context = self.context, case .active = self.state else { return }
        let now = context.eventLoop.now
        let headerTimeout = self.configuration.headerReadTimeout
        if let check = self.bodyCheckAt, now >= check {
            self.resetStalledRequestBodies(now: now)
        }
        if let finalGoawayAt = self.finalGoawayAt, now >= finalGoawayAt {
            // The notice had time to reach the client: the final GOAWAY.
            self.finalGoawayDue()
        }
        if self.awaitingPreface, now >= self.startedAt + headerTimeout {
            self.logger.debug("HTTP/2 preface timeout")
            self.goawayDue = (.noError, true)
        } else if let started = self.headerBlockStartedAt, now >= started + headerTimeout {
            self.logger.debug("HTTP/2 header read timeout")
            self.goawayDue = (.noError, true)
        } else if self.openStreamCount == 0, let idle = self.idleSince,
            now >= idle + self.configuration.idleTimeout
        {
            self.logger.debug("HTTP/2 idle timeout")
            self.goawayDue = (.noError, true)
        } else if self.openStreamCount == 0, !self.idlePagesReleased, let idle = self.idleSince,
            now >= idle + self.configuration.idlePageReleaseDelay, !self.processing, let session = self.session
        {
            // Once per idle period, tried or not: a session with output pending keeps its pages until the
            // next idle period.
            self.idlePagesReleased = true
            // Nor does an idle connection keep storage for streams: a busy one drops to no open stream between
            // every batch of requests, so the spares go only once the connection has been idle this long.
            self.spares.release()
            _ = session.releasePagesIfIdle()
        }
        if self.goawayDue?.terminate == true {
            self.state = .closing
        }
        self.process()
    }

    /// `limits.idle_timeout` for a client's own request body, as HTTP/1.1 has it: a stream whose request has
    /// not ended and that got nothing from the client for the idle timeout, although the client had window to
    /// send, is reset (RST_STREAM CANCEL) and its handler told (``HTTP2StreamHandler/streamReset(_:)``: the
    /// exchange releases its upstream connection, unreusable). Without this, HEADERS without END_STREAM and
    /// then silence would hold the stream, and perhaps an upstream connection, for as long as the connection
    /// lives (the idle timeout only runs while no stream is open).
    ///
    /// A stream whose window (its own or the connection's) the gateway keeps shut, because its backend reads
    /// slowly, is not stalled by its client: its clock restarts now, and again when window is given back
    /// (``submitPending(_:)``). Runs from the timer, never inside a round: nghttp2 is not on the stack, so
    /// asking it for windows and telling handlers are both allowed here.
    private func resetStalledRequestBodies(now: NIODeadline) {
        self.bodyCheckAt = nil
        guard let session = self.session else { return }
        let timeout = self.configuration.idleTimeout
        let connectionWindow = session.connectionWindow
        var next: NIODeadline?
        var stalled: [HTTP2StreamState] = []
        for stream in self.streams.values where stream.machine.awaitsRequest {
            if connectionWindow <= 0 || session.window(stream: stream.id) <= 0 {
                stream.lastInboundAt = now
            }
            let deadline = stream.lastInboundAt + timeout
            if now >= deadline {
                stalled.append(stream)
            } else {
                next = min(next ?? deadline, deadline)
            }
        }
        self.bodyCheckAt = next
        for stream in stalled where stream.machine.awaitsRequest {
            self.logger.info(
                "HTTP/2 request body timeout, resetting the stream",
                metadata: ["stream": "\(stream.id)", "idle_timeout": "\(timeout)"]
            )
            guard stream.machine.requestStalled() == .reset else { continue }
            let handler = stream.handler
            stream.handler = nil
            stream.body.removeAll(keepingCapacity: true)
            stream.queuedBytes = 0
            self.markDirty(stream)
            handler?.streamReset(.cancel)
        }
    }

    /// The state of stream `id`, `nil` once it is gone (ids are never reused on a connection).
    package func stream(_ id: Int32) -> HTTP2StreamState? {
        if let last = self.lastStream, last.id == id {
            return last
        }
        guard let found = self.streams[id] else { return nil }
        self.lastStream = found
        return found
    }

    /// A new stream opened (called from the begin-headers callback).
    package func streamOpened(_ stream: HTTP2StreamState) {
        self.streams[stream.id] = stream
        self.lastStream = stream
        self.openStreamCount += 1
        self.idleSince = nil
        self.idlePagesReleased = false
    }
}

@available(*, unavailable)
extension HTTP2ServerCodec: Sendable {}

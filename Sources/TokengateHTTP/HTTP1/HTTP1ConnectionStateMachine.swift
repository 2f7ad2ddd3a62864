//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// The state of one client's HTTP/1.1 connection — which request is in flight, what may be parsed next, when
/// reads are held back and when the connection must close — as a value with no I/O of its own.
///
/// A driver (the gateway's connection handler) owns the socket, the timers and the request's exchange; it
/// hands this machine every input (bytes read, a read the socket wants, writability, the exchange's
/// completion, a timer firing, shutdown) and runs the action each call returns. The machine never decides
/// anything about the request itself: routing, tokens and answers are the exchange's, shared with HTTP/2.
///
/// ### Driver contract
/// - Bytes from the socket go to ``bytesRead(_:)``; then the driver calls ``nextRequestAction()`` until it says
///   ``ReadAction/wait``, running each action as it comes. An action may call back into the machine before the
///   next call (an exchange that answers at once completes inside its start): the machine is already in the
///   state that action left it in, so that is safe — but the loop must not be entered twice (the driver keeps
///   a guard, because only it knows its call stack).
/// - A read the socket wants goes through ``readRequested()``, which holds it back while the exchange pauses the
///   request body or a later request waits in the buffer; ``takeHeldRead()`` gives it back once nothing holds it.
/// - The response's progress is reported as it is written (``responseHeadWritten(status:)``,
///   ``responseHeadSaysClose()``, ``responseEnded(closing:)``): it decides whether a broken request body can still
///   be answered and whether the connection outlives the response.
/// - The exchange's end goes to ``exchangeCompleted(closeConnection:requestEnded:)``, after
///   ``setRequestReadingPaused(_:)`` with `false`.
///
/// ### Pipelining
/// The socket keeps being read while a request is in flight; only when bytes of a *next* request arrive are
/// they left unparsed, and reads held back until the exchange completes, so a pipelining client buffers at
/// most one read's worth of requests (NIO's pipelining handler would turn read interest off and on around every
/// request: two `epoll_ctl` calls each). The same hold applies to a next request while the client is not
/// taking the answers already written: the gateway answers many requests itself at once (a pipeline of
/// refusals), and a client that never reads would otherwise have every answer queued without bound.
package struct HTTP1ConnectionStateMachine {
    private enum State {
        case idle
        case exchanging(Exchange)
        /// The exchange is over before its request was: the rest of the request is read and dropped, then the
        /// connection goes on or closes.
        case discarding(close: Bool)
        case closed
    }

    /// What the connection knows of the request and response in flight.
    private struct Exchange {
        /// The request was read to its end: whatever follows belongs to the next one.
        var requestEnded = false
        /// The final (non-1xx) head was written: a failure can only cut the response short from now on, never
        /// replace it with an answer of the gateway's own.
        var responseHeadWritten = false
        /// The response's end was written. The exchange still has bookkeeping to do before it completes, and
        /// bytes parsed in between (a TLS handler may deliver buffered plaintext at once) must wait.
        var responseEnded = false
    }

    /// What the driver does with what ``nextRequestAction()`` found in the bytes read.
    package enum ReadAction {
        /// Nothing to do until more bytes arrive or the state changes (a later request waits).
        case wait
        /// A request head: the driver starts its exchange. `closeRequested` when the client asked for the
        /// connection to close after it (`Connection: close`, HTTP/1.0 without keep-alive) or the server drains.
        case startExchange(ClientRequestHead, requestNumber: Int, closeRequested: Bool)
        /// A part of the request body, for the exchange.
        case forwardBody(ByteBuffer)
        /// The request's end (with its trailers), for the exchange.
        case forwardEnd(HTTPHeaders?)
        /// A request the exchange gave up on before its end was read to its end; the next may come.
        case awaitNextHead
        /// Bytes between requests that are not HTTP/1.1, or a head over its limits: answered, counted as an
        /// unrouted request, then closed (where the next request would start is unknown).
        case answerAndClose(GatewayAnswer)
        /// The body of the request in flight broke HTTP/1.1 (a bad chunk line, oversized trailers): the driver
        /// ends the exchange (its upstream saw part of a request and is not reused), then answers with
        /// `answer` (not counted again: the exchange counted the request) or, when the response has begun and
        /// `answer` is `nil`, just closes.
        case abortExchange(answer: GatewayAnswer?)
        /// Close the connection now.
        case close
    }

    /// What the driver does when the exchange completes.
    package enum CompletionAction: Equatable {
        /// Flush, and close once the response's last write is done.
        case closeAfterWrite
        /// Flush, re-arm the idle deadline for the next head and parse what waits.
        case awaitNextHead
        /// Flush and parse on: the rest of the request is read and dropped. With `closeSoon`, the driver closes
        /// after a short grace (``discardGraceEnded()``): closing at once with unread body bytes in the kernel
        /// becomes a reset that can eat the answer.
        case discardRequest(closeSoon: Bool)
        /// The connection closed already.
        case none
    }

    /// What the driver does when the idle deadline passes.
    package enum IdleTimeoutAction: Equatable {
        case close
        /// The client stalled a body it announced, and not because the gateway held it back: it must not keep an
        /// upstream connection waiting forever. The exchange is told of the close, then the connection closes.
        case closeWithExchange
        /// The response timeout is the one that counts during an exchange.
        case none
    }

    /// What the driver does when the socket's writability changes.
    package enum WritabilityAction: Equatable {
        case tellExchange(isWritable: Bool)
        /// A next request waited for the client to take the answers before it.
        case resumeParsing
        case none
    }

    private var state: State = .idle
    private var parser: HTTP1RequestParser
    /// Bytes read and not parsed yet: a later request's, held while one is in flight. `nil` when there are none,
    /// so an idle connection holds no buffer.
    private var unparsed: ByteBuffer?
    /// The exchange holds the request body back (its upstream is not there yet, or not writable).
    private var requestReadingPaused = false
    /// Bytes of a next request wait in ``unparsed``: read no more until they are processed.
    private var pipelinePaused = false
    /// A read the socket asked for while reads were held back.
    private var readPending = false
    /// The server drains (graceful shutdown): the exchange in flight is the connection's last, then it closes.
    package private(set) var isDraining = false
    /// The response written must be followed by the connection's close: a body delimited by it, or a head that
    /// told the client `Connection: close`.
    private var closeAfterResponse = false
    /// The client may be written to now (kept from the driver's writability events, not asked of the socket).
    package private(set) var isWritable = true
    private var requestCount = 0

    package init(limits: HTTP1RequestParser.Limits, isWritable: Bool = true) {
        self.parser = HTTP1RequestParser(limits: limits)
        self.isWritable = isWritable
    }

    package var isClosed: Bool {
        if case .closed = self.state { true } else { false }
    }

    // MARK: Inbound

    /// Bytes from the client, kept until ``nextRequestAction()`` parses them.
    package mutating func bytesRead(_ bytes: ByteBuffer) {
        if var held = self.unparsed.take() {
            held.writeImmutableBuffer(bytes)
            self.unparsed = held
        } else {
            self.unparsed = bytes
        }
    }

    /// The next thing to do about the bytes read, as far as the state allows.
    package mutating func nextRequestAction() -> ReadAction {
        while var buffer = self.unparsed.take() {
            if case .closed = self.state {
                return .wait  // Pipelined bytes after a close are never acted upon.
            }
            if self.mustDefer {
                if buffer.readableBytes > 0 {
                    self.unparsed = buffer
                    self.pipelinePaused = true
                }
                return .wait
            }
            let part: ClientRequestPart?
            do {
                part = try self.parser.next(from: &buffer)
            } catch {
                return self.parseFailed(error)
            }
            guard let part else {
                // More bytes are needed; the parser kept what it gathered.
                self.pipelinePaused = false
                return .wait
            }
            // Kept even when empty: a part may be followed by another without new bytes (a head by its end).
            self.unparsed = buffer
            if let action = self.received(part) {
                return action
            }
        }
        self.pipelinePaused = false
        return .wait
    }

    /// Whether what the client sends now must wait: it is for a later request than the one in flight, or for a
    /// next request while the client is not taking the answers already written.
    private var mustDefer: Bool {
        switch self.state {
        case .exchanging(let exchange): exchange.requestEnded || exchange.responseEnded
        case .idle: !self.isWritable
        case .discarding, .closed: false
        }
    }

    /// The action for one parsed part; `nil` for a part dropped without one (a discarded body).
    private mutating func received(_ part: ClientRequestPart) -> ReadAction? {
        switch (part, self.state) {
        case (_, .closed):
            return .wait
        case (.head(let head), .idle):
            self.requestCount += 1
            self.state = .exchanging(Exchange())
            return .startExchange(head, requestNumber: self.requestCount, closeRequested: !head.isKeepAlive || self.isDraining)
        case (.head, .exchanging), (.head, .discarding):
            // The parser yields a head only after the previous request's end, and that end moves the state on.
            preconditionFailure("a request head arrived while another request was in flight")
        case (.body(let buffer), .exchanging):
            return .forwardBody(buffer)
        case (.end(let trailers), .exchanging(var exchange)):
            exchange.requestEnded = true
            self.state = .exchanging(exchange)
            return .forwardEnd(trailers)
        case (.end, .discarding(let close)):
            if close {
                self.state = .closed
                return .close
            }
            self.state = .idle
            return .awaitNextHead
        case (.body, .discarding):
            return nil
        case (.body, .idle), (.end, .idle):
            preconditionFailure("a request part arrived with no request in flight")
        }
    }

    /// The client's bytes broke HTTP/1.1. Between requests that gets an answer; within a body the request is
    /// already on its way and can only be cut off. Either way the connection closes.
    private mutating func parseFailed(_ failure: HTTP1ParseFailure) -> ReadAction {
        self.unparsed = nil
        let state = self.state
        self.state = .closed
        switch state {
        case .idle:
            return .answerAndClose(.parseFailure(failure))
        case .exchanging(let exchange):
            return .abortExchange(answer: exchange.responseHeadWritten ? nil : .bodyParseFailure(failure))
        case .discarding:
            return .close
        case .closed:
            return .wait
        }
    }

    /// The socket wants to read: `true` passes the read on, `false` holds it until ``takeHeldRead()``.
    package mutating func readRequested() -> Bool {
        if self.requestReadingPaused || self.pipelinePaused {
            self.readPending = true
            return false
        }
        return true
    }

    /// The exchange pauses or resumes the request body (its upstream's backpressure). `true`: issue the read
    /// that was held back.
    package mutating func setRequestReadingPaused(_ paused: Bool) -> Bool {
        self.requestReadingPaused = paused
        return self.takeHeldRead()
    }

    /// `true` once nothing holds back the read the socket asked for: the driver issues it.
    package mutating func takeHeldRead() -> Bool {
        guard !self.requestReadingPaused, !self.pipelinePaused, self.readPending else { return false }
        self.readPending = false
        return true
    }

    /// What the driver does when the state may let it parse again (the exchange completed, the client became
    /// writable) outside a read.
    package enum ResumeAction: Equatable {
        /// Bytes wait: run ``nextRequestAction()`` until it says `wait`, then ``takeHeldRead()``.
        case parse
        /// Nothing waits, and the read held back for it may go.
        case read
        case none
    }

    /// Parsing may resume: bytes that waited are parsed, or, when there are none, the read held back for them
    /// goes.
    package mutating func parsingResumes() -> ResumeAction {
        guard self.unparsed == nil else { return .parse }
        self.pipelinePaused = false
        return self.takeHeldRead() ? .read : .none
    }

    /// Whether a request is in flight whose exchange wants the end of a read batch (to push what it got
    /// upstream at once).
    package var isExchanging: Bool {
        if case .exchanging = self.state { true } else { false }
    }

    // MARK: Outbound

    /// A response head was written: from a final one on, the request can no longer be answered otherwise.
    package mutating func responseHeadWritten(status: HTTPResponseStatus) {
        guard status.code >= 200, case .exchanging(var exchange) = self.state else { return }
        exchange.responseHeadWritten = true
        self.state = .exchanging(exchange)
    }

    /// The head written told the client `Connection: close`: the connection closes after this response (RFC 9112
    /// §9.6), also when the exchange's reason for it is gone by its end — a request whose body was still coming
    /// when the backend answered has ended by then, and the client waits for the close.
    package mutating func responseHeadSaysClose() {
        self.closeAfterResponse = true
    }

    /// The response's end is written. `closing`: the exchange closes after it, or the body is delimited by the
    /// close (HTTP/1.0 of unknown length). Returns whether the connection closes after this write.
    package mutating func responseEnded(closing: Bool) -> Bool {
        if case .exchanging(var exchange) = self.state {
            exchange.responseEnded = true
            self.state = .exchanging(exchange)
        }
        if closing {
            self.closeAfterResponse = true
        }
        return self.closeAfterResponse
    }

    /// The exchange is over. `requestEnded`: its request was read to its end (otherwise the rest is dropped).
    /// The driver resumes the request body (``setRequestReadingPaused(_:)``) first, as the exchange no longer holds
    /// it back.
    package mutating func exchangeCompleted(closeConnection: Bool, requestEnded: Bool) -> CompletionAction {
        if case .closed = self.state {
            return .none
        }
        let close = closeConnection || self.isDraining || self.closeAfterResponse
        if !requestEnded {
            self.state = .discarding(close: close)
            return .discardRequest(closeSoon: close)
        }
        if close {
            self.state = .closed
            return .closeAfterWrite
        }
        self.state = .idle
        return .awaitNextHead
    }

    /// The grace after an early answer with `closeSoon` ended: `true` when the connection is still dropping the
    /// rest of that request and closes now.
    package mutating func discardGraceEnded() -> Bool {
        guard case .discarding = self.state else { return false }
        self.state = .closed
        return true
    }

    // MARK: Connection events

    /// The socket's writability changed.
    package mutating func writabilityChanged(isWritable: Bool) -> WritabilityAction {
        self.isWritable = isWritable
        switch self.state {
        case .exchanging: return .tellExchange(isWritable: isWritable)
        case .idle where isWritable: return .resumeParsing
        case .idle, .discarding, .closed: return .none
        }
    }

    /// Graceful shutdown began: `true` when the connection is between requests and closes now; otherwise the
    /// exchange in flight, or the first one of a connection that has not sent a request yet, is its last.
    ///
    /// A kept-alive connection closed between requests costs its client nothing: a request that crossed the close
    /// was sent on a reused connection, which HTTP clients retry on a new one. A connection that never had a
    /// request is different: it was just opened (accepted as the listeners stopped, during a binary hand-over or
    /// a restart on a socket systemd holds), its client is sending the first request, and a close would fail it.
    /// Such a connection waits for that request (the request-head and idle timeouts still bound it).
    package mutating func shutdownRequested() -> Bool {
        self.isDraining = true
        guard case .idle = self.state, self.requestCount > 0 else { return false }
        self.state = .closed
        return true
    }

    /// No bytes from the client for the idle timeout. `exchangeReadsBody`: the exchange in flight is still
    /// reading the request body.
    package mutating func idleTimedOut(exchangeReadsBody: Bool) -> IdleTimeoutAction {
        switch self.state {
        case .idle, .discarding:
            self.state = .closed
            return .close
        case .exchanging where exchangeReadsBody && !self.requestReadingPaused:
            self.state = .closed
            return .closeWithExchange
        case .exchanging, .closed:
            return .none
        }
    }

    /// The connection stops being HTTP/1.1: a WebSocket tunnel takes it over after the backend's `101`. The
    /// bytes read and not parsed yet are the tunnel's (a client may send its first frame right behind the
    /// upgrade request), and nothing is parsed on this connection again.
    package mutating func handOver() -> ByteBuffer? {
        self.state = .closed
        return self.unparsed.take()
    }

    /// The connection is closing or closed (the socket went inactive, an error, an abort): `true` when an
    /// exchange was in flight and must be told. Bytes still unparsed are dropped.
    package mutating func connectionClosed() -> Bool {
        let wasExchanging = self.isExchanging
        self.state = .closed
        self.unparsed = nil
        return wasExchanging
    }
}

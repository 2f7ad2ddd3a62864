//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// The two read deadlines of an HTTP/1.1 connection: the idle timeout and the request-head deadline
/// (slowloris).
///
/// Kept by the connection's handler (``HTTP1ConnectionHandler``, ``PlainHTTPHandler``), which tells it about
/// each read, rather than a channel handler of its own in front of it: every read, read-complete, write,
/// flush and read request of every request crossed that handler's context (≈ 0.7 % of the gateway's CPU per
/// HTTP/1.1 request), and every connection held the handler and its context.
/// The admin listener is not on that path: it uses NIO's HTTP/1.1 codec and deadlines of its own
/// (``AdminConnectionPhase``).
///
/// **Idle.** No bytes from the client for `idleTimeout` runs the owner's `onIdle` (again after every further
/// idle period, as NIO's `IdleStateHandler` fires its event). The deadline is a ``DeadlineTimer`` moved at the
/// end of each read batch, which schedules one task per idle period instead of one per read.
///
/// **Request head.** The first bytes of a new request start the deadline of `limits.request_header_timeout`;
/// the decoded head (``headReceived()``) stops it. Between requests only the idle timeout applies, so a
/// keep-alive connection may wait quietly for its next request, but not dribble one. The clock is read and a
/// task scheduled only when the read that brought a head's first bytes did not complete it: a head that
/// arrives whole (nearly every request) costs neither. Such a head's deadline counts from the end of that
/// read's parsing, microseconds after its bytes arrived.
///
/// Event-loop bound, like its owner.
package final class HTTP1ReadDeadlines {
    private let headTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    /// True between the end of an exchange (or the connection's start) and the next decoded head.
    private var awaitingHead = true
    /// Bytes of the head being awaited have arrived.
    private var headStarted = false
    private var headTimer: Scheduled<Void>?
    private var idleTimer: DeadlineTimer?
    /// ``stop()`` was called: nothing is scheduled any more (a read parsed after the close does not start one).
    private var stopped = false

    package init(headTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.headTimeout = headTimeout
        self.idleTimeout = idleTimeout
    }

    /// Starts the idle clock, once the connection is active (the owner's `handlerAdded` when it already is,
    /// as after a TLS handshake, else its `channelActive`); again is a no-op. `onIdle` runs on the event loop
    /// after each idle period.
    ///
    /// The timer holds this object and `onIdle` (and through it the owner) strongly until ``stop()``, which the
    /// owner calls when the channel goes inactive or the owner is removed: that ends the cycles. Not `weak`: a
    /// weak reference gives its object a side table, after which every retain and release of it — the owner's
    /// on every event NIO delivers to it — takes the runtime's slow path (measured: the slow-path releases
    /// 0.22 % → 0.70 % of the gateway's CPU when the owner's closure captured it weakly).
    package func start(context: ChannelHandlerContext, onIdle: @escaping () -> Void) {
        guard self.idleTimer == nil, !self.stopped else { return }
        let eventLoop = context.eventLoop
        let timer = DeadlineTimer(eventLoop: eventLoop) {
            guard let timer = self.idleTimer else { return }
            timer.arm(at: eventLoop.now + self.idleTimeout)
            onIdle()
        }
        self.idleTimer = timer
        timer.arm(at: eventLoop.now + self.idleTimeout)
    }

    /// A read brought `count` bytes; the owner parses them next. Only bytes start a head: an empty read (a TLS
    /// record with no application data) must not start the deadline on an idle keep-alive connection.
    package func bytesArrived(_ count: Int) {
        if self.awaitingHead, count > 0 {
            self.headStarted = true
        }
    }

    /// The owner parsed what it could of a read: a head begun and still not whole now gets its deadline.
    package func bytesParsed(context: ChannelHandlerContext) {
        guard self.awaitingHead, self.headStarted, self.headTimer == nil, !self.stopped else { return }
        self.headTimer = context.eventLoop.assumeIsolated().scheduleTask(in: self.headTimeout) {
            self.headTimer = nil
            if self.awaitingHead {
                context.close(promise: nil)
            }
        }
    }

    /// A read batch is over: the idle period starts again (where `IdleStateHandler` took its time too).
    package func readBatchEnded(context: ChannelHandlerContext) {
        self.idleTimer?.arm(at: context.eventLoop.now + self.idleTimeout)
    }

    /// A whole head arrived: the deadline is met.
    package func headReceived() {
        self.awaitingHead = false
        self.headStarted = false
        self.headTimer?.cancel()
        self.headTimer = nil
    }

    /// The exchange is over: the next bytes start a new head, and a new deadline.
    package func awaitNextHead() {
        self.awaitingHead = true
    }

    /// The connection is going: no timer fires any more, and none holds the owner.
    package func stop() {
        self.stopped = true
        self.headTimer?.cancel()
        self.headTimer = nil
        self.idleTimer?.cancel()
        self.idleTimer = nil
    }
}

@available(*, unavailable)
extension HTTP1ReadDeadlines: Sendable {}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateHTTP

/// A keep-alive HTTP/1.1 connection to one backend, owned by an ``UpstreamPool`` on one event loop.
///
/// At most one exchange uses it at a time; between exchanges it sits idle in the pool with a timer
/// that closes it after the upstream's idle timeout.
final class UpstreamConnection {
    let channel: any Channel
    let targetIndex: Int
    let handler: UpstreamResponseHandler
    /// Closes the connection when it has been idle in the pool for too long (set by the pool).
    var idleTimer: DeadlineTimer?
    /// The backend's time to start its response: tells the exchange using the connection when it passes.
    ///
    /// No `weak` reference to this connection anywhere (here or in the pool's closures): a weak reference gives
    /// the object a side table, after which every retain and release of it — several per request — takes the
    /// runtime's slow path. The timers' actions hold what they need strongly instead, and the cycles that makes
    /// are broken when the channel closes (``tearDown()``).
    private(set) lazy var responseTimer = DeadlineTimer(eventLoop: self.channel.eventLoop) { [handler = self.handler] in
        handler.receiver?.upstreamTimedOut()
    }
    /// Set once the connection served an exchange; a reused connection may have been closed by the
    /// backend in the meantime, which makes a failure before any response byte safe to retry.
    var reused = false

    init(channel: any Channel, targetIndex: Int, handler: UpstreamResponseHandler) {
        self.channel = channel
        self.targetIndex = targetIndex
        self.handler = handler
    }

    /// The channel closed: both timers are cancelled and the idle timer, whose action holds this connection, is
    /// dropped. Called from the handler's close callback whether or not the pool is still there.
    func tearDown() {
        self.idleTimer?.cancel()
        self.idleTimer = nil
        self.responseTimer.cancel()
    }
}

// `@unchecked Sendable` only so that it can travel inside an `EventLoopFuture` from the pool to the exchange:
// the connection is created, used and released on one event loop (the pool checks `preconditionInEventLoop`),
// and no other thread ever touches it.
extension UpstreamConnection: @unchecked Sendable {}

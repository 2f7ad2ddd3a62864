//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

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
    private(set) lazy var responseTimer = DeadlineTimer(eventLoop: self.channel.eventLoop) { [weak self] in
        self?.handler.receiver?.upstreamTimedOut()
    }
    /// Set once the connection served an exchange; a reused connection may have been closed by the
    /// backend in the meantime, which makes a failure before any response byte safe to retry.
    var reused = false

    init(channel: any Channel, targetIndex: Int, handler: UpstreamResponseHandler) {
        self.channel = channel
        self.targetIndex = targetIndex
        self.handler = handler
    }
}

// `@unchecked Sendable` only so that it can travel inside an `EventLoopFuture` from the pool to the exchange:
// the connection is created, used and released on one event loop (the pool checks `preconditionInEventLoop`),
// and no other thread ever touches it.
extension UpstreamConnection: @unchecked Sendable {}

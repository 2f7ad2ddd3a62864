//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CEpoll

#if canImport(Glibc)
import Glibc
#endif

/// What epoll reported for one socket, in the loop's own terms.
struct SocketEvents: OptionSet {
    let rawValue: UInt32

    /// New bytes (or the peer's end of stream) since the last edge: read until a short read.
    static let readable = SocketEvents(rawValue: EPOLLIN.rawValue)
    /// Room to write again, or an outgoing connection finished (check ``Socket/pendingError()``).
    static let writable = SocketEvents(rawValue: EPOLLOUT.rawValue)
    /// The peer shut down its side (`EPOLLRDHUP`): the next read returns the rest, then end of stream.
    static let peerClosed = SocketEvents(rawValue: EPOLLRDHUP.rawValue)
    /// The connection is gone (`EPOLLHUP`) or failed (`EPOLLERR`): nothing more will work on it.
    static let failed = SocketEvents(rawValue: EPOLLHUP.rawValue | EPOLLERR.rawValue)

    /// What every socket is registered for, once: both directions, edge-triggered.
    static let registration = EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue
}

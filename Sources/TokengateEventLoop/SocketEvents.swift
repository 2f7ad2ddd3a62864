//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateEpoll

#if canImport(Glibc)
import Glibc
#endif

/// What epoll reported for one socket, in the loop's own terms.
public struct SocketEvents: OptionSet, Sendable {
    public let rawValue: UInt32

    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// New bytes (or the peer's end of stream) since the last edge: read until a short read.
    public static let readable = SocketEvents(rawValue: EPOLLIN.rawValue)
    /// Room to write again, or an outgoing connection finished (check ``Socket/pendingError()``).
    public static let writable = SocketEvents(rawValue: EPOLLOUT.rawValue)
    /// The peer shut down its side (`EPOLLRDHUP`): the next read returns the rest, then end of stream.
    public static let peerClosed = SocketEvents(rawValue: EPOLLRDHUP.rawValue)
    /// The connection is gone (`EPOLLHUP`) or failed (`EPOLLERR`): nothing more will work on it.
    public static let failed = SocketEvents(rawValue: EPOLLHUP.rawValue | EPOLLERR.rawValue)

    /// What every socket is registered for, once: both directions, edge-triggered.
    static let registration = EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue
}

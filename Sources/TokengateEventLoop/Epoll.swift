//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateEpoll

#if canImport(Glibc)
import Glibc
#endif

/// One epoll instance: the kernel's interest list and ready list for the sockets of one event loop.
///
/// A non-copyable owner of the file descriptor, so that exactly one value closes it. Sockets are added once,
/// edge-triggered for reading and writing at the same time (see ``EpollEventLoop`` for why), so the loop never
/// calls `epoll_ctl` again for a socket: closing the socket removes it from the interest list by itself.
struct Epoll: ~Copyable {
    private let descriptor: Int32

    init() throws(SystemCallError) {
        let descriptor = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard descriptor >= 0 else { throw SystemCallError("epoll_create1") }
        self.descriptor = descriptor
    }

    deinit {
        _ = Glibc.close(self.descriptor)
    }

    /// Adds `socket` with `events` (EPOLLIN, EPOLLOUT, EPOLLET, ...); `token` comes back with every event.
    func add(_ socket: Int32, events: UInt32, token: UInt64) throws(SystemCallError) {
        var event = epoll_event(events: events, data: epoll_data_t(u64: token))
        guard epoll_ctl(self.descriptor, EPOLL_CTL_ADD, socket, &event) == 0 else {
            throw SystemCallError("epoll_ctl(ADD)")
        }
    }

    /// Waits up to `timeoutMilliseconds` (-1: without limit) for events and writes them to `events`. Returns how
    /// many; 0 on a timeout or a signal.
    func wait(into events: UnsafeMutableBufferPointer<epoll_event>, timeoutMilliseconds: Int32) throws(SystemCallError)
        -> Int
    {
        let count = epoll_wait(self.descriptor, events.baseAddress, Int32(events.count), timeoutMilliseconds)
        if count < 0 {
            guard errno == EINTR else { throw SystemCallError("epoll_wait") }
            return 0
        }
        return Int(count)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateEpoll
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Work for one ``EpollEventLoop`` handed in from other threads: a reload's new configuration, a graceful
/// drain on `SIGTERM`, a stop.
///
/// The loop itself is single-threaded and never locks; this is its one door. ``submit(_:)`` appends under a
/// mutex and bumps an eventfd registered with the loop, whose readable edge runs everything queued on the
/// loop's thread, in submission order. The request path never comes here: it costs nothing per request.
///
/// Owns the eventfd (closed when the inbox goes, which also takes it out of the loop's epoll set).
public final class LoopInbox: EpollEventHandler, Sendable {
    public typealias Work = @Sendable (EpollEventLoop) -> Void

    private let descriptor: Int32
    private let queue = Mutex<[Work]>([])

    /// Makes the eventfd and registers it with `loop`. Call on the loop's thread (registration is not
    /// thread-safe); ``submit(_:)`` may then be called from any thread.
    public init(loop: EpollEventLoop) throws(SystemCallError) {
        let descriptor = CTokengateEpoll_eventfd()
        guard descriptor >= 0 else { throw SystemCallError("eventfd") }
        self.descriptor = descriptor
        _ = try loop.register(self, socket: descriptor)
    }

    deinit {
        _ = Glibc.close(self.descriptor)
    }

    /// Runs `work` on the loop's thread during one of its next ticks. From any thread.
    public func submit(_ work: @escaping Work) {
        self.queue.withLock { $0.append(work) }
        var one: UInt64 = 1
        // The counter only saturates at 2^64 - 2 increments: a write that could block never happens here.
        _ = Glibc.write(self.descriptor, &one, MemoryLayout<UInt64>.size)
    }

    public func socketReady(_ events: SocketEvents, loop: EpollEventLoop) {
        // Reset the counter first, then take the queue: work submitted in between is taken now and its own
        // write raises one more (empty) edge; work submitted after the take raises the edge that runs it.
        var counter: UInt64 = 0
        _ = Glibc.read(self.descriptor, &counter, MemoryLayout<UInt64>.size)
        let work = self.queue.withLock { queue -> [Work] in
            let taken = queue
            queue.removeAll()
            return taken
        }
        for item in work { item(loop) }
    }

    public func tickEnded(loop: EpollEventLoop) {}

    public func timerFired(tag: UInt32, loop: EpollEventLoop) {}
}

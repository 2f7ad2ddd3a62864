//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateEpoll
import HeapModule
public import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// A single-threaded event loop over epoll: sockets, deadlines and end-of-tick work, and nothing else.
///
/// ### One tick
/// `epoll_wait` (sleeping until the earliest deadline at most), then each reported socket's handler, then the
/// handlers that asked for the end of this tick (``callAtTickEnd(_:)``: writes batched across the tick, such as
/// the request heads of every client read in it going upstream in one write each), then the due timers.
///
/// ### Edge-triggered, registered once
/// Every socket is added once for reading *and* writing with `EPOLLET` and never modified: no `epoll_ctl` per
/// request, which a level-triggered loop pays whenever it starts or stops waiting for writability. The price is
/// the edge-triggered rule: a handler must take everything the edge announced. It does so without a final
/// `read` that returns `EAGAIN`: a read that fills less than the space it was given has emptied the socket, and
/// any later byte raises a new edge (the same reasoning nginx uses).
///
/// ### Handlers and their slots
/// The loop holds each handler strongly in a slot of an array from ``register(_:socket:)`` until
/// ``deregister(_:)``; epoll carries the slot's ``LoopRegistration`` (index and generation) as its 64-bit token,
/// so a dispatch is an array look-up, and an event, timer or tick-end request of a handler that has gone in the
/// meantime finds a newer generation and is dropped.
///
/// Not thread-safe by design: everything runs on the thread that calls ``run()``.
public final class EpollEventLoop {
    private struct Slot {
        var generation: UInt32 = 0
        var handler: (any EpollEventHandler)?
    }

    /// How many events one `epoll_wait` may return; more wait for the next tick.
    static let maximumEventsPerTick = 256

    private let epoll: Epoll
    private var slots: [Slot] = []
    private var freeSlots: [UInt32] = []
    private var tickEnd: [LoopRegistration] = []
    private var timers = Heap<LoopTimer>()
    private let events: UnsafeMutableBufferPointer<epoll_event>

    public let allocator = ByteBufferAllocator()
    private var stopRequested = false

    public init() throws(SystemCallError) {
        self.epoll = try Epoll()
        self.events = .allocate(capacity: Self.maximumEventsPerTick)
        self.events.initialize(repeating: epoll_event())
        self.slots.reserveCapacity(1024)
        self.tickEnd.reserveCapacity(Self.maximumEventsPerTick)
    }

    deinit {
        self.events.deallocate()
    }

    // MARK: Registration.

    /// Gives `handler` a slot and adds `socket` to epoll (both directions, edge-triggered) with it.
    public func register(_ handler: any EpollEventHandler, socket: Int32) throws(SystemCallError) -> LoopRegistration {
        let index: UInt32
        if let free = self.freeSlots.popLast() {
            index = free
        } else {
            index = UInt32(self.slots.count)
            self.slots.append(Slot())
        }
        self.slots[Int(index)].handler = handler
        let registration = LoopRegistration(index: index, generation: self.slots[Int(index)].generation)
        do throws(SystemCallError) {
            try self.epoll.add(socket, events: SocketEvents.registration, token: registration.token)
        } catch {
            self.deregister(registration)
            throw error
        }
        return registration
    }

    /// Frees the handler's slot: no event, timer or tick-end call reaches it any more. Close its socket too
    /// (closing is what takes the socket out of epoll).
    public func deregister(_ registration: LoopRegistration) {
        let index = Int(registration.index)
        guard index < self.slots.count, self.slots[index].generation == registration.generation else { return }
        self.slots[index].handler = nil
        self.slots[index].generation &+= 1
        self.freeSlots.append(registration.index)
    }

    private func handler(for registration: LoopRegistration) -> (any EpollEventHandler)? {
        let index = Int(registration.index)
        guard index < self.slots.count, self.slots[index].generation == registration.generation else { return nil }
        return self.slots[index].handler
    }

    // MARK: Work for later in the tick, and deadlines.

    /// Calls the handler's ``EpollEventHandler/tickEnded(loop:)`` once this tick's events are handled. The
    /// handler asks once per tick (it keeps a flag); asking twice calls it twice.
    public func callAtTickEnd(_ registration: LoopRegistration) {
        self.tickEnd.append(registration)
    }

    /// Calls the handler's ``EpollEventHandler/timerFired(tag:loop:)`` in `nanoseconds` or a little later.
    public func schedule(in nanoseconds: UInt64, for registration: LoopRegistration, tag: UInt32) {
        self.timers.insert(LoopTimer(deadline: Self.now() &+ nanoseconds, registration: registration, tag: tag))
    }

    /// The monotonic clock, in nanoseconds.
    public static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    // MARK: The driver.

    /// Runs ticks until ``stop()`` is called (from a handler, on this thread) or a system call of the loop
    /// itself fails (handlers' failures are theirs to handle).
    public func run() throws(SystemCallError) {
        self.stopRequested = false
        while !self.stopRequested {
            let count = try self.epoll.wait(into: self.events, timeoutMilliseconds: self.timeoutMilliseconds())
            for position in 0..<count {
                let event = self.events[position]
                guard let handler = self.handler(for: LoopRegistration(token: event.data.u64)) else { continue }
                handler.socketReady(SocketEvents(rawValue: event.events), loop: self)
            }
            self.runTickEnd()
            self.fireDueTimers()
        }
    }

    /// Ends ``run()`` once the current tick is over (its events, tick-end calls and due timers). Handlers and
    /// sockets stay registered: a later ``run()`` goes on with them.
    public func stop() {
        self.stopRequested = true
    }

    private func runTickEnd() {
        // Indexed, not iterated: a tick-end call that asks again (a write that produced more) runs in this pass.
        var position = 0
        while position < self.tickEnd.count {
            if let handler = self.handler(for: self.tickEnd[position]) {
                handler.tickEnded(loop: self)
            }
            position += 1
        }
        self.tickEnd.removeAll(keepingCapacity: true)
    }

    private func fireDueTimers() {
        guard !self.timers.isEmpty else { return }
        let now = Self.now()
        while let timer = self.timers.min, timer.deadline <= now {
            self.timers.removeMin()
            self.handler(for: timer.registration)?.timerFired(tag: timer.tag, loop: self)
        }
    }

    private func timeoutMilliseconds() -> Int32 {
        guard let deadline = self.timers.min?.deadline else { return -1 }
        let now = Self.now()
        guard deadline > now else { return 0 }
        return Int32(clamping: (deadline - now + 999_999) / 1_000_000)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The decisions of one connection slot, without I/O: when the next request goes, when the slot is done,
/// whether a lost connection is worth reopening. ConnectionSlot performs what it returns.
///
/// Times are monotonic nanoseconds (`NIODeadline.uptimeNanoseconds`).
struct SlotStateMachine {
    enum Pacing {
        case closedLoop
        /// Request `k` of this slot is intended for `start + offset + k * interval`.
        case fixedRate(offset: UInt64, interval: UInt64)
    }

    struct InFlight {
        let kind: Int
        /// Closed loop: when it was sent. Fixed rate: when it should have been sent.
        let intendedAt: UInt64
    }

    enum Next: Equatable {
        case send(intendedAt: UInt64)
        case waitUntil(UInt64)
        case finish
        /// Nothing to do until an event (an answer, a connection, the start).
        case idle
    }

    let pacing: Pacing
    let budget: Int
    private(set) var start: UInt64?
    private(set) var end: UInt64?
    private(set) var issued = 0
    private(set) var inFlight: InFlight?
    private(set) var connected = false
    private(set) var finished = false

    init(pacing: Pacing, budget: Int) {
        self.pacing = pacing
        self.budget = budget
    }

    mutating func started(at start: UInt64, duration: UInt64?) {
        self.start = start
        self.end = duration.map { start + $0 }
    }

    mutating func didConnect() {
        self.connected = true
    }

    func next(now: UInt64) -> Next {
        guard !self.finished, let start = self.start, self.connected, self.inFlight == nil else { return .idle }
        guard self.issued < self.budget else { return .finish }
        let intended: UInt64
        switch self.pacing {
        case .closedLoop:
            if now < start { return .waitUntil(start) }
            if let end = self.end, now >= end { return .finish }
            intended = now
        case .fixedRate(let offset, let interval):
            intended = start + offset + UInt64(self.issued) * interval
            if let end = self.end, intended >= end { return .finish }
        }
        return intended > now ? .waitUntil(intended) : .send(intendedAt: intended)
    }

    mutating func sent(kind: Int, intendedAt: UInt64) {
        precondition(self.inFlight == nil, "HTTP/1.1 without pipelining: one request at a time")
        self.issued += 1
        self.inFlight = InFlight(kind: kind, intendedAt: intendedAt)
    }

    /// The request an answer belongs to, or nil for an answer nobody asked for.
    mutating func answered() -> InFlight? {
        defer { self.inFlight = nil }
        return self.inFlight
    }

    /// The connection is gone; returns the request that was lost with it.
    mutating func disconnected() -> InFlight? {
        self.connected = false
        defer { self.inFlight = nil }
        return self.inFlight
    }

    /// Whether a new connection could still carry requests.
    func wantsConnection(now: UInt64) -> Bool {
        guard !self.finished, self.issued < self.budget else { return false }
        guard let end = self.end else { return true }
        return now < end
    }

    /// Marks the slot done; false when it already was.
    mutating func finish() -> Bool {
        defer { self.finished = true }
        return !self.finished
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The decisions of one connection slot, without I/O: when the next request goes, when the slot is done,
/// whether a lost connection is worth reopening. ConnectionSlot performs what it returns.
///
/// A slot keeps up to `maxInFlight` requests outstanding: one on HTTP/1.1 (no pipelining), `--streams` on
/// HTTP/2. Each request in flight is known by a tag the connection gives it (0 on HTTP/1.1, the stream id on
/// HTTP/2), so answers may arrive in any order.
///
/// Times are monotonic nanoseconds (`NIODeadline.uptimeNanoseconds`).
struct SlotStateMachine {
    enum Pacing {
        case closedLoop
        /// Request `k` of this slot is intended for `start + offset + k * interval`. A request whose time has
        /// come while every stream is busy waits for one, and is still charged from its intended time.
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
    let maxInFlight: Int
    private(set) var start: UInt64?
    private(set) var end: UInt64?
    private(set) var issued = 0
    private(set) var inFlight: [Int32: InFlight] = [:]
    /// A connection is up and takes new requests (false while connecting, and once an HTTP/2 server sent
    /// GOAWAY: the requests already in flight may still be answered).
    private(set) var connected = false
    private(set) var finished = false

    init(pacing: Pacing, budget: Int, maxInFlight: Int = 1) {
        precondition(maxInFlight >= 1)
        self.pacing = pacing
        self.budget = budget
        self.maxInFlight = maxInFlight
    }

    mutating func started(at start: UInt64, duration: UInt64?) {
        self.start = start
        self.end = duration.map { start + $0 }
    }

    mutating func didConnect() {
        self.connected = true
    }

    /// The connection takes no new requests but keeps answering those in flight (HTTP/2 GOAWAY).
    mutating func draining() {
        self.connected = false
    }

    func next(now: UInt64) -> Next {
        guard !self.finished, let start = self.start else { return .idle }
        // Done sending: finish once every answer is in (what never comes is the hard stop's business).
        let doneSending: Bool
        let intended: UInt64
        switch self.pacing {
        case .closedLoop:
            doneSending = self.issued >= self.budget || self.end.map { now >= $0 } ?? false
            intended = max(now, start)
        case .fixedRate(let offset, let interval):
            intended = start + offset + UInt64(self.issued) * interval
            doneSending = self.issued >= self.budget || self.end.map { intended >= $0 } ?? false
        }
        if doneSending { return self.inFlight.isEmpty ? .finish : .idle }
        guard self.connected, self.inFlight.count < self.maxInFlight else { return .idle }
        return intended > now ? .waitUntil(intended) : .send(intendedAt: intended)
    }

    mutating func sent(tag: Int32, kind: Int, intendedAt: UInt64) {
        precondition(self.inFlight.count < self.maxInFlight, "more requests in flight than the connection allows")
        precondition(self.inFlight[tag] == nil, "a tag is in flight twice")
        self.issued += 1
        self.inFlight[tag] = InFlight(kind: kind, intendedAt: intendedAt)
    }

    /// The request an answer belongs to, or nil for an answer nobody asked for.
    mutating func answered(tag: Int32) -> InFlight? {
        self.inFlight.removeValue(forKey: tag)
    }

    /// The connection is gone; returns how many requests were lost with it.
    mutating func disconnected() -> Int {
        self.connected = false
        defer { self.inFlight.removeAll() }
        return self.inFlight.count
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

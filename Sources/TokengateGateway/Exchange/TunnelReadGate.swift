//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// One side of a WebSocket tunnel's backpressure: while the other side cannot take more bytes, reads from this
/// side are held (not dropped), and the one read asked for meanwhile is made when the other side drains.
///
/// Both tunnel handlers (client and backend) keep one; it is the only state their `read` needs.
struct TunnelReadGate {
    private var paused = false
    private var readHeld = false

    /// Whether a read the pipeline asks for may go ahead now; if not, it is held for ``resume()``.
    mutating func admitsRead() -> Bool {
        guard self.paused else { return true }
        self.readHeld = true
        return false
    }

    mutating func pause() {
        self.paused = true
    }

    /// Opens the gate; returns whether a held read is to be made now.
    mutating func resume() -> Bool {
        self.paused = false
        defer { self.readHeld = false }
        return self.readHeld
    }
}

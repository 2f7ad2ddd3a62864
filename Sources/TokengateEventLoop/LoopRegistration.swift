//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A handler's place in its loop: a slot index and that slot's generation, packed into the 64 bits that epoll
/// hands back with every event.
///
/// The generation makes stale events harmless: a socket closed while handling one event of a batch may still
/// have an event later in the same batch, and its slot may already serve a newly accepted socket. Such an
/// event carries the old generation and is dropped; so is a timer or tick-end request of a closed handler.
public struct LoopRegistration: Hashable, Sendable {
    public let index: UInt32
    public let generation: UInt32

    init(index: UInt32, generation: UInt32) {
        self.index = index
        self.generation = generation
    }

    init(token: UInt64) {
        self.index = UInt32(truncatingIfNeeded: token)
        self.generation = UInt32(truncatingIfNeeded: token >> 32)
    }

    var token: UInt64 {
        UInt64(self.generation) << 32 | UInt64(self.index)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOPosix

/// One buffer that the connections of a thread lend each other for a use that ends when the buffer is handed
/// on: a read batch's plaintext, a flush's ciphertext, a response's bytes. Allocating it for each use costs
/// an object and a block of bytes per request; keeping one per connection costs its capacity on every idle
/// connection. A connection's handlers run only on its event loop's thread, one at a time, so one buffer per
/// thread serves every connection there.
///
/// The buffer comes back (``giveBack(_:)``) as soon as it is handed on, and the next ``take(allocator:minimumCapacity:)``
/// reuses its memory when whoever it went to has let it go. Reuse can never overwrite bytes still in use:
/// `take` calls `ByteBuffer.clear()`, which gives fresh storage instead when another reference to the old one
/// is alive (a partial request kept for the next read, a write the socket has not taken yet).
public struct ScratchBuffer {
    /// Buffers above this capacity (a large upload's read batch) are not kept: a slot holds at most this much.
    public static let maxKeptCapacity = 64 * 1024

    private var kept: ByteBuffer?

    public init() {}

    /// An empty buffer of at least `minimumCapacity`: the kept one when nobody else holds it, else a new one.
    /// Write into it only while the slot is empty (until ``giveBack(_:)``): writes to a buffer the slot also
    /// holds would copy it.
    public mutating func take(allocator: ByteBufferAllocator, minimumCapacity: Int) -> ByteBuffer {
        guard var buffer = self.kept.take() else {
            return allocator.buffer(capacity: minimumCapacity)
        }
        buffer.clear()  // Fresh storage if the old one is still referenced: see the type's comment.
        buffer.reserveCapacity(minimumCapacity)
        return buffer
    }

    /// `buffer` is written and being handed on (or no longer needed): its memory may serve the next take.
    public mutating func giveBack(_ buffer: ByteBuffer) {
        if buffer.capacity <= Self.maxKeptCapacity {
            self.kept = buffer
        }
    }
}

/// A ``ScratchBuffer`` per thread: the slot the connections of each event loop share. Each thread reaches
/// only its own slot, made on its first use and freed when the thread ends.
///
/// `@unchecked Sendable`: the object is shared by every thread, but a slot is only ever touched by the thread
/// it belongs to (`ThreadSpecificVariable` gives each thread its own box), so no two threads meet on one.
public final class PerThreadScratchBuffer: @unchecked Sendable {
    private final class Box {
        var slot = ScratchBuffer()
    }

    private let boxes = ThreadSpecificVariable<Box>()

    public init() {}

    private var box: Box {
        if let box = self.boxes.currentValue {
            return box
        }
        let box = Box()
        self.boxes.currentValue = box
        return box
    }

    /// The calling thread's ``ScratchBuffer/take(allocator:minimumCapacity:)``.
    public func take(allocator: ByteBufferAllocator, minimumCapacity: Int) -> ByteBuffer {
        self.box.slot.take(allocator: allocator, minimumCapacity: minimumCapacity)
    }

    /// The calling thread's ``ScratchBuffer/giveBack(_:)``.
    public func giveBack(_ buffer: ByteBuffer) {
        self.box.slot.giveBack(buffer)
    }
}

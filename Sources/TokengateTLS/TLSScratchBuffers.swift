//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOPosix

/// The plaintext and ciphertext buffers that the TLS connections of one thread lend each other.
///
/// A connection needs a plaintext buffer for the records of one read batch and a ciphertext buffer for the
/// records of one flush, and neither afterwards. Allocating both anew cost two objects and two blocks of
/// bytes on every proxied request; keeping a pair per connection would cost their capacity on every idle
/// connection. A handler runs only on its event loop's thread, one at a time, so one pair per thread serves
/// them all: a buffer comes back here as soon as it is handed on (to the handler above, or to the channel),
/// and the next take reuses its memory when whoever it went to has let it go.
///
/// Reuse can never overwrite bytes still in use: ``take(_:allocator:minimumCapacity:)`` calls
/// `ByteBuffer.clear()`, which allocates fresh storage instead when another reference to the old one is alive
/// (a partial request the HTTP/1.1 handler keeps, a write the socket has not taken yet).
final class TLSScratchBuffers {
    /// Buffers above this capacity (a large upload's read batch) are not kept, so a thread holds at most
    /// twice this much.
    static let maxKeptCapacity = 64 * 1024

    private var plaintext: ByteBuffer?
    private var ciphertext: ByteBuffer?

    /// One per thread, made on the thread's first use and freed when the thread ends.
    nonisolated(unsafe) private static let perThread = ThreadSpecificVariable<TLSScratchBuffers>()

    /// The calling thread's buffers.
    static var current: TLSScratchBuffers {
        if let buffers = Self.perThread.currentValue {
            return buffers
        }
        let buffers = TLSScratchBuffers()
        Self.perThread.currentValue = buffers
        return buffers
    }

    /// An empty buffer for decrypted records, of at least `minimumCapacity`.
    func takePlaintext(allocator: ByteBufferAllocator, minimumCapacity: Int) -> ByteBuffer {
        Self.take(&self.plaintext, allocator: allocator, minimumCapacity: minimumCapacity)
    }

    /// An empty buffer for encrypted records, of at least `minimumCapacity`.
    func takeCiphertext(allocator: ByteBufferAllocator, minimumCapacity: Int) -> ByteBuffer {
        Self.take(&self.ciphertext, allocator: allocator, minimumCapacity: minimumCapacity)
    }

    /// `buffer` was handed on (or is no longer needed): its memory may serve the next take.
    func returnPlaintext(_ buffer: ByteBuffer) {
        if buffer.capacity <= Self.maxKeptCapacity {
            self.plaintext = buffer
        }
    }

    func returnCiphertext(_ buffer: ByteBuffer) {
        if buffer.capacity <= Self.maxKeptCapacity {
            self.ciphertext = buffer
        }
    }

    private static func take(_ slot: inout ByteBuffer?, allocator: ByteBufferAllocator, minimumCapacity: Int) -> ByteBuffer {
        guard var buffer = slot.take() else {
            return allocator.buffer(capacity: minimumCapacity)
        }
        buffer.clear()  // New storage if the old one is still referenced: see the type's comment.
        buffer.reserveCapacity(minimumCapacity)
        return buffer
    }
}

@available(*, unavailable)
extension TLSScratchBuffers: Sendable {}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOCore
import Testing

@testable import TokengateTLS

/// The buffers the connections on one thread lend each other: reused when nobody holds them any more, and
/// never overwritten while someone does.
@Suite struct ScratchBufferTests {
    private static func address(_ buffer: ByteBuffer) -> UnsafeRawPointer? {
        buffer.withVeryUnsafeBytes { $0.baseAddress }
    }

    /// A buffer taken this large is recognised by its capacity when it comes back: a fresh one for a small
    /// take would be small (addresses prove nothing: malloc hands freed memory out again).
    private static let distinctCapacity = 5_000

    @Test func aBufferNobodyHoldsIsReusedEmpty() {
        var scratch = ScratchBuffer()
        var first = scratch.take(allocator: ByteBufferAllocator(), minimumCapacity: Self.distinctCapacity)
        first.writeString("GET / HTTP/1.1\r\n\r\n")
        let memory = Self.address(first)
        scratch.giveBack(first)
        first = ByteBuffer()  // The handler above let it go.
        let second = scratch.take(allocator: ByteBufferAllocator(), minimumCapacity: 16)
        #expect(second.capacity >= Self.distinctCapacity && Self.address(second) == memory, "the same memory serves the next read")
        #expect(second.readableBytes == 0, "and it comes back empty")
    }

    @Test func aBufferSomeoneStillHoldsIsNeverOverwritten() {
        var scratch = ScratchBuffer()
        var sent = scratch.take(allocator: ByteBufferAllocator(), minimumCapacity: 1024)
        sent.writeString("records the socket has not taken yet")
        scratch.giveBack(sent)
        var next = scratch.take(allocator: ByteBufferAllocator(), minimumCapacity: 1024)
        next.writeString("the next flush")
        #expect(Self.address(next) != Self.address(sent))
        #expect(String(buffer: sent) == "records the socket has not taken yet")
        #expect(String(buffer: next) == "the next flush")
    }

    @Test func largeBuffersAreNotKept() {
        var scratch = ScratchBuffer()
        var large = scratch.take(allocator: ByteBufferAllocator(), minimumCapacity: ScratchBuffer.maxKeptCapacity + 1)
        scratch.giveBack(large)
        large = ByteBuffer()
        let after = scratch.take(allocator: ByteBufferAllocator(), minimumCapacity: 1024)
        // Its memory may be handed out again by malloc, so the capacity tells, not the address.
        #expect(after.capacity <= ScratchBuffer.maxKeptCapacity, "a large upload's buffer is not kept for the thread")
    }

    @Test func eachSlotAndEachThreadHasItsOwnBuffer() async {
        let slot = PerThreadScratchBuffer()
        let other = PerThreadScratchBuffer()
        // All on this thread (no suspension before the await below).
        var mine = slot.take(allocator: ByteBufferAllocator(), minimumCapacity: Self.distinctCapacity)
        slot.giveBack(mine)
        mine = ByteBuffer()
        #expect(other.take(allocator: ByteBufferAllocator(), minimumCapacity: 16).capacity < Self.distinctCapacity, "another slot")
        #expect(slot.take(allocator: ByteBufferAllocator(), minimumCapacity: 16).capacity >= Self.distinctCapacity, "this one")
        slot.giveBack(slot.take(allocator: ByteBufferAllocator(), minimumCapacity: Self.distinctCapacity))
        let elsewhere: Int = await withCheckedContinuation { continuation in
            Thread {
                continuation.resume(returning: slot.take(allocator: ByteBufferAllocator(), minimumCapacity: 16).capacity)
            }.start()
        }
        #expect(elsewhere < Self.distinctCapacity, "another thread (another event loop) has its own")
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateNghttp2
import Testing

@testable import TokengateGateway

/// The allocator nghttp2 sessions get, called the way nghttp2 calls it (through the `nghttp2_mem` table).
@Suite struct HTTP2SessionArenaTests {
    private func fill(_ pointer: UnsafeMutableRawPointer, count: Int) {
        for i in 0..<count { pointer.storeBytes(of: UInt8(truncatingIfNeeded: i &* 7), toByteOffset: i, as: UInt8.self) }
    }

    private func holds(_ pointer: UnsafeMutableRawPointer, count: Int) -> Bool {
        (0..<count).allSatisfy { pointer.load(fromByteOffset: $0, as: UInt8.self) == UInt8(truncatingIfNeeded: $0 &* 7) }
    }

    @Test func blocksMoveBetweenMallocAndMappingsKeepingTheirBytes() throws {
        let arena = try HTTP2SessionArena()
        let mem = arena.mem.pointee
        let user = mem.mem_user_data
        let small = try #require(mem.malloc(100, user))
        self.fill(small, count: 100)
        #expect(arena.mappedBlockCount == 0)
        // Growing past 16 KiB moves it to pages of its own, the bytes with it.
        let grown = try #require(mem.realloc(small, 20_000, user))
        #expect(arena.mappedBlockCount == 1)
        #expect(self.holds(grown, count: 100))
        self.fill(grown, count: 20_000)
        let larger = try #require(mem.realloc(grown, 40_000, user))
        #expect(arena.mappedBlockCount == 1)
        #expect(self.holds(larger, count: 20_000))
        // Shrinking below the threshold goes back to malloc.
        let shrunk = try #require(mem.realloc(larger, 50, user))
        #expect(arena.mappedBlockCount == 0)
        #expect(self.holds(shrunk, count: 50))
        mem.free(shrunk, user)
        // calloc'd mappings read as zero without being touched.
        let zeroed = try #require(mem.calloc(2, 10_000, user))
        #expect(arena.mappedBlockCount == 1)
        #expect(arena.residentMappedBytes == 0)
        #expect((0..<20_000).allSatisfy { zeroed.load(fromByteOffset: $0, as: UInt8.self) == 0 })
        // Written pages are resident; released ones are not, and read as zero again.
        self.fill(zeroed, count: 5_000)
        #expect(arena.residentMappedBytes >= 4_096)
        #expect(arena.releasePages() == 20_480)
        #expect(arena.residentMappedBytes == 0)
        #expect(zeroed.load(fromByteOffset: 1, as: UInt8.self) == 0)
        mem.free(zeroed, user)
        #expect(arena.mappedBlockCount == 0)
        // realloc(NULL, n) is malloc; free(NULL) is nothing.
        let fresh = try #require(mem.realloc(nil, 17_000, user))
        #expect(arena.mappedBlockCount == 1)
        mem.free(fresh, user)
        mem.free(nil, user)
        #expect(arena.mappedBlockCount == 0)
    }

    @Test func anArenaFullOfMappingsFallsBackToMalloc() throws {
        let arena = try HTTP2SessionArena()
        let mem = arena.mem.pointee
        let user = mem.mem_user_data
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<12 {
            let block = try #require(mem.malloc(16_384, user))
            self.fill(block, count: 16_384)
            blocks.append(block)
        }
        #expect(arena.mappedBlockCount == 8)
        #expect(blocks.allSatisfy { self.holds($0, count: 16_384) })
        for block in blocks { mem.free(block, user) }
        #expect(arena.mappedBlockCount == 0)
    }

    @Test func aSealedArenaMapsNothingMore() throws {
        let arena = try HTTP2SessionArena()
        let mem = arena.mem.pointee
        let user = mem.mem_user_data
        let early = try #require(mem.malloc(20_000, user))
        #expect(arena.mappedBlockCount == 1)
        arena.seal()
        let late = try #require(mem.malloc(20_000, user))
        let zeroed = try #require(mem.calloc(1, 20_000, user))
        #expect(arena.mappedBlockCount == 1)
        #expect((0..<20_000).allSatisfy { zeroed.load(fromByteOffset: $0, as: UInt8.self) == 0 })
        // A mapped block reallocated after sealing moves to malloc, bytes and all.
        self.fill(early, count: 20_000)
        let moved = try #require(mem.realloc(early, 30_000, user))
        #expect(arena.mappedBlockCount == 0)
        #expect(self.holds(moved, count: 20_000))
        for block in [late, zeroed, moved] { mem.free(block, user) }
    }

    @Test func aSessionMapsItsFrameBufferOnly() throws {
        let arena = try HTTP2SessionArena()
        var callbacks: OpaquePointer?
        #expect(nghttp2_session_callbacks_new(&callbacks) == 0)
        defer { nghttp2_session_callbacks_del(callbacks) }
        var session: OpaquePointer?
        #expect(nghttp2_session_server_new3(&session, callbacks, nil, nil, arena.mem) == 0)
        let created = try #require(session)
        arena.seal()
        #expect(arena.mappedBlockCount == 1)
        // Nothing written yet: the frame buffer is not resident at all.
        #expect(arena.residentMappedBytes == 0)
        nghttp2_session_del(created)
        #expect(arena.mappedBlockCount == 0)
    }
}

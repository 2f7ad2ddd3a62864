//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateNghttp2
import Glibc
import Testing
@testable import TokengateHTTP


/// The allocator nghttp2 sessions get, called the way nghttp2 calls it (through the `nghttp2_mem` table).
@Suite struct HTTP2SessionArenaTests {
    private let page = Int(sysconf(Int32(_SC_PAGESIZE)))

    private func roundedToPages(_ bytes: Int) -> Int {
        (bytes + self.page - 1) / self.page * self.page
    }

    private func fill(_ pointer: UnsafeMutableRawPointer, count: Int) {
        for i in 0..<count { pointer.storeBytes(of: UInt8(truncatingIfNeeded: i &* 7), toByteOffset: i, as: UInt8.self) }
    }

    private func holds(_ pointer: UnsafeMutableRawPointer, count: Int) -> Bool {
        (0..<count).allSatisfy { pointer.load(fromByteOffset: $0, as: UInt8.self) == UInt8(truncatingIfNeeded: $0 &* 7) }
    }

    @Test(.enabled(if: Int(sysconf(Int32(_SC_PAGESIZE))) == 4096, "the arena maps nothing on larger pages"))
    func blocksMoveBetweenMallocAndMappingsKeepingTheirBytes() throws {
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
        #expect(arena.residentMappedBytes >= self.roundedToPages(5_000))
        #expect(arena.releasePages() == self.roundedToPages(20_000))
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

    @Test(.enabled(if: Int(sysconf(Int32(_SC_PAGESIZE))) == 4096, "the arena maps nothing on larger pages"))
    func anArenaFullOfMappingsFallsBackToMalloc() throws {
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

    @Test(.enabled(if: Int(sysconf(Int32(_SC_PAGESIZE))) == 4096, "the arena maps nothing on larger pages"))
    func aSealedArenaMapsNothingMore() throws {
        let arena = try HTTP2SessionArena()
        let mem = arena.mem.pointee
        let user = mem.mem_user_data
        let early = try #require(mem.malloc(20_000, user))
        #expect(arena.mappedBlockCount == 1)
        arena.seal()
        // 20,000 bytes is not nghttp2's frame buffer: nothing of this arena may ever be released.
        #expect(!arena.isReleasable)
        #expect(arena.releasePages() == 0)
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

    /// A real server session, made with the codec's own code, its arena sealed.
    /// The rule ``NGHTTP2ServerSession/releasePagesIfIdle()`` applies, on a session made here without a codec.
    private static func releasePagesIfIdle(_ arena: HTTP2SessionArena, session: OpaquePointer) -> Int {
        guard nghttp2_session_want_read(session) != 0, nghttp2_session_want_write(session) == 0 else { return 0 }
        return arena.releasePages()
    }

    private func makeSession() throws -> (session: OpaquePointer, arena: HTTP2SessionArena) {
        let arena = try HTTP2SessionArena()
        var callbacks: OpaquePointer?
        #expect(nghttp2_session_callbacks_new(&callbacks) == 0)
        defer { nghttp2_session_callbacks_del(callbacks) }
        var session: OpaquePointer?
        #expect(nghttp2_session_server_new3(&session, callbacks, nil, nil, arena.mem) == 0)
        arena.seal()
        return (try #require(session), arena)
    }

    /// Takes everything nghttp2 wants to send; returns the byte count.
    private func drain(_ session: OpaquePointer) -> Int {
        var total = 0
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            guard count > 0 else { return total }
            total += count
        }
    }

    @Test(.enabled(if: Int(sysconf(Int32(_SC_PAGESIZE))) == 4096, "the arena maps nothing on larger pages"))
    func aSessionMapsItsFrameBufferOnlyAndWritesFramesThere() throws {
        let (session, arena) = try self.makeSession()
        defer { nghttp2_session_del(session) }
        #expect(arena.mappedBlockCount == 1)
        #expect(arena.isReleasable)
        // Nothing written yet: the frame buffer is not resident at all.
        #expect(arena.residentMappedBytes == 0)
        var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: 10)]
        #expect(nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, 1) == 0)
        #expect(self.drain(session) > 0)
        // The frame was serialized into the mapped block.
        #expect(arena.residentMappedBytes > 0)
    }

    /// The guard in front of the release: nothing while nghttp2 has a frame to send or the session is ending.
    @Test(.enabled(if: Int(sysconf(Int32(_SC_PAGESIZE))) == 4096, "the arena maps nothing on larger pages"))
    func pagesAreReleasedOnlyWhenTheSessionHasNothingToSend() throws {
        let (session, arena) = try self.makeSession()
        defer { nghttp2_session_del(session) }
        var opaque = [UInt8](repeating: 1, count: 8)
        #expect(nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &opaque) == 0)
        #expect(Self.releasePagesIfIdle(arena, session: session) == 0)  // a frame is queued
        #expect(self.drain(session) > 0)
        #expect(arena.residentMappedBytes > 0)
        #expect(Self.releasePagesIfIdle(arena, session: session) > 0)
        #expect(arena.residentMappedBytes == 0)
        #expect(arena.mappedBlockCount == 1)  // released, not unmapped
        #expect(nghttp2_session_terminate_session(session, 0) == 0)
        #expect(Self.releasePagesIfIdle(arena, session: session) == 0)  // the GOAWAY is queued
        #expect(self.drain(session) > 0)
        #expect(nghttp2_session_want_read(session) == 0)
        #expect(Self.releasePagesIfIdle(arena, session: session) == 0)  // ending: nghttp2 wants nothing more
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateNghttp2
import CTokengateShims

/// The allocator of one nghttp2 session: malloc for small blocks, pages of their own for the 16 KiB frame
/// buffer, which an idle session hands back to the kernel (`CTokengateShims_nghttp2.h` says why).
///
/// Ordering: the arena must outlive the session it serves. ``HTTP2ServerCodec`` creates it before the session
/// and holds it in a stored property, so it is released only after the codec's own `nghttp2_session_del` (in
/// `handlerRemoved`, after a round, or in `deinit`, whose body runs before stored properties are released).
package final class HTTP2SessionArena {
    private let arena: OpaquePointer

    package init() throws(HTTP2SessionError) {
        guard let arena = CTokengateShims_nghttp2_arena_new() else {
            throw HTTP2SessionError(call: "CTokengateShims_nghttp2_arena_new", code: NGHTTP2_ERR_NOMEM.rawValue)
        }
        self.arena = arena
    }

    deinit {
        CTokengateShims_nghttp2_arena_free(self.arena)
    }

    /// What to pass to `nghttp2_session_server_new3`; valid as long as the arena.
    package var mem: UnsafeMutablePointer<nghttp2_mem> {
        CTokengateShims_nghttp2_arena_mem(self.arena)
    }

    /// No new mappings from now on (call once the session exists: only blocks the session allocates while it
    /// is being created — the frame buffer — may be released while idle; later large blocks can hold state
    /// across calls).
    package func seal() {
        CTokengateShims_nghttp2_arena_seal(self.arena)
    }

    /// Whether the sealed arena's pages may be released: what the session mapped is exactly its frame buffer.
    package var isReleasable: Bool {
        CTokengateShims_nghttp2_arena_is_releasable(self.arena) != 0
    }

    /// Blocks with pages of their own (the frame buffer: one, once the session exists).
    package var mappedBlockCount: Int {
        CTokengateShims_nghttp2_arena_mapped_count(self.arena)
    }

    /// Bytes of the mapped blocks resident now (`mincore`).
    package var residentMappedBytes: Int {
        CTokengateShims_nghttp2_arena_resident_bytes(self.arena)
    }

    /// Hands the frame buffer's pages back to the kernel; returns the bytes released. Only when `session`
    /// (served by this arena) serializes no frame — it wants to read and has nothing to write — and never while
    /// nghttp2 is on the stack; otherwise nothing is released.
    package func releasePagesIfIdle(session: OpaquePointer) -> Int {
        guard nghttp2_session_want_read(session) != 0, nghttp2_session_want_write(session) == 0 else { return 0 }
        return self.releasePages()
    }

    /// Hands every mapped block's pages back unconditionally: they read as zero afterwards. Only when nothing in
    /// them is needed any more (``releasePagesIfIdle(session:)`` checks that for a session).
    package func releasePages() -> Int {
        CTokengateShims_nghttp2_arena_release_pages(self.arena)
    }
}

@available(*, unavailable)
extension HTTP2SessionArena: Sendable {}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
#ifndef C_TOKENGATE_SHIMS_NGHTTP2_H
#define C_TOKENGATE_SHIMS_NGHTTP2_H

// MARK: nghttp2 shims for the HTTP/2 server codec (TokengateGateway/HTTP2).
//
// Building an `nghttp2_nv` array in Swift means one unsafe pointer per name and value, all of which must
// stay valid for the duration of the submit call. Swift hands over one flat block of bytes and the
// lengths instead; C builds the array (on its stack up to 32 fields), submits (nghttp2 copies every name and
// value, NGHTTP2_NV_FLAG_NONE), and frees it before returning. Nothing here keeps a pointer past the call.

#include <stddef.h>
#include <stdint.h>
#include <nghttp2/nghttp2.h>

/// The most header fields one HEADERS frame built by the shims may carry; more is refused with
/// NGHTTP2_ERR_INVALID_ARGUMENT (a bound on the allocation, far above any real response).
#define CTokengateShims_NGHTTP2_MAX_FIELDS 1024

/// Submits a response HEADERS frame on `stream_id`.
///
/// - `block`: name0 value0 name1 value1 … back to back (no terminators); `lengths`: `2 * count` lengths in
///   the same order; `never_index`: `count` bytes, non-zero marks a field never-indexed in HPACK (secrets
///   such as `set-cookie` then never enter the compression context).
/// - `read_callback`: when non-NULL the response has a body pulled through it (source.ptr is NULL: the
///   callback finds its stream by id); when NULL the HEADERS frame carries END_STREAM.
/// - Returns nghttp2_submit_response's result (0 or a negative nghttp2 error code).
int CTokengateShims_nghttp2_submit_response(nghttp2_session *session, int32_t stream_id, const void *block,
                                            const size_t *lengths, const uint8_t *never_index, size_t count,
                                            nghttp2_data_source_read_callback read_callback);

/// Submits trailers (a HEADERS frame with END_STREAM) on `stream_id`; arguments as above.
int CTokengateShims_nghttp2_submit_trailer(nghttp2_session *session, int32_t stream_id, const void *block,
                                           const size_t *lengths, const uint8_t *never_index, size_t count);

/// Submits the interim response `100 Continue` (a HEADERS frame with `:status: 100` and no END_STREAM) on
/// `stream_id`: the answer to a request's `expect: 100-continue` once the gateway wants its body. Returns
/// nghttp2_submit_headers's result (0 or a negative nghttp2 error code).
int CTokengateShims_nghttp2_submit_continue(nghttp2_session *session, int32_t stream_id);

/// Submits a request HEADERS frame on a new stream (the client side: the tokengate-bench load generator).
///
/// - `block`, `lengths`, `never_index`, `count`: as for CTokengateShims_nghttp2_submit_response (pseudo-header
///   fields first: `:method`, `:scheme`, `:authority`, `:path`).
/// - `read_callback`: when non-NULL the request has a body pulled through it (source.ptr is NULL: the callback
///   finds the body by stream id); when NULL the HEADERS frame carries END_STREAM.
/// - Returns the new stream's id (> 0) or a negative nghttp2 error code, as nghttp2_submit_request does.
int32_t CTokengateShims_nghttp2_submit_request(nghttp2_session *session, const void *block, const size_t *lengths,
                                               const uint8_t *never_index, size_t count,
                                               nghttp2_data_source_read_callback read_callback);

// MARK: The sessions' allocator
//
// Every nghttp2 session allocates its outbound frame buffer (a whole frame: 16 KiB and some) when it is
// created and keeps it for its life, although an idle connection, or one whose frames are small, writes only
// its first page, and nothing in it is needed between frames. From malloc the block comes from the heap, whose
// pages earlier blocks have already touched, so all of it stays resident for every open connection. The arena
// gives blocks of CTokengateShims_NGHTTP2_MAPPED_BLOCK_MIN bytes or more that the session allocates *while it
// is being created* pages of their own — in nghttp2 1.52 that is exactly the frame buffer — so only the pages
// nghttp2 wrote are resident, and an idle session can hand even those back
// (CTokengateShims_nghttp2_arena_release_pages). Everything else goes to malloc untouched: small blocks, and
// large ones allocated later (extra frame-buffer chunks for header blocks over 16 KiB, HPACK buffers for a
// huge header field), which may hold state across calls (a header field half received) and must never be
// released. The cost is one mmap and one munmap per session, none per request.
//
// Ordering: the arena must outlive its session — create it first, pass its mem to nghttp2_session_server_new3
// (which copies the struct; mem_user_data points at the arena), seal it as soon as that returns, and free it
// only after nghttp2_session_del. An arena serves one session and, like the session, one thread.

/// Blocks of at least this many bytes get pages of their own.
#define CTokengateShims_NGHTTP2_MAPPED_BLOCK_MIN 16384

typedef struct CTokengateShims_nghttp2_arena CTokengateShims_nghttp2_arena;

/// A new arena, or NULL when out of memory.
CTokengateShims_nghttp2_arena *CTokengateShims_nghttp2_arena_new(void);

/// The allocator to pass to nghttp2_session_server_new3.
nghttp2_mem *CTokengateShims_nghttp2_arena_mem(CTokengateShims_nghttp2_arena *arena);

/// No new mappings from now on: every later allocation comes from malloc (a mapped block that nghttp2
/// reallocates moves to malloc too). Call right after nghttp2_session_server_new3 returns. The arena's pages
/// are releasable from then on only if what the session mapped is exactly one block of the frame buffer's size
/// (9 + 1 + 16384 bytes in libnghttp2 1.52); otherwise CTokengateShims_nghttp2_arena_release_pages does nothing.
void CTokengateShims_nghttp2_arena_seal(CTokengateShims_nghttp2_arena *arena);

/// Whether a sealed arena's pages may be released (see CTokengateShims_nghttp2_arena_seal).
int CTokengateShims_nghttp2_arena_is_releasable(const CTokengateShims_nghttp2_arena *arena);

/// Gives the pages of every mapped block (the frame buffer) back to the kernel (MADV_DONTNEED: they read as
/// zero afterwards and are committed again when written). Returns the length of what was advised (resident or
/// not); 0 for a sealed arena that is not releasable.
///
/// Only while nghttp2 holds nothing in them: call it when nghttp2_session_want_read is non-zero and
/// nghttp2_session_want_write is zero (no outbound frame is being serialized, so the frame buffer holds no
/// bytes still to be taken by nghttp2_session_mem_send), and never from inside an nghttp2 call or callback.
/// That reasoning covers the frame buffer only, which is why a sealed arena maps nothing else.
size_t CTokengateShims_nghttp2_arena_release_pages(CTokengateShims_nghttp2_arena *arena);

/// The bytes of the arena's mapped blocks that are resident now (mincore; for tests and diagnostics).
size_t CTokengateShims_nghttp2_arena_resident_bytes(const CTokengateShims_nghttp2_arena *arena);

/// How many blocks the arena has mapped now (for tests).
size_t CTokengateShims_nghttp2_arena_mapped_count(const CTokengateShims_nghttp2_arena *arena);

/// Unmaps what is left and frees the arena. Only after nghttp2_session_del of the session using it.
void CTokengateShims_nghttp2_arena_free(CTokengateShims_nghttp2_arena *arena);

#endif

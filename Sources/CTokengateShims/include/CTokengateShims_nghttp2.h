//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
#ifndef C_TOKENGATE_SHIMS_NGHTTP2_H
#define C_TOKENGATE_SHIMS_NGHTTP2_H

// MARK: nghttp2 shims for the HTTP/2 server codec (TokengateGateway/HTTP2).
//
// Building an `nghttp2_nv` array in Swift means one unsafe pointer per name and value, all of which must
// stay valid for the duration of the submit call. Swift hands over one flat block of bytes and the
// lengths instead; C builds the array, submits (nghttp2 copies every name and value, NGHTTP2_NV_FLAG_NONE),
// and frees it before returning. Nothing here keeps a pointer past the call.

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

#endif

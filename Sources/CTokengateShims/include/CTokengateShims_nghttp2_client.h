//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
#ifndef C_TOKENGATE_SHIMS_NGHTTP2_CLIENT_H
#define C_TOKENGATE_SHIMS_NGHTTP2_CLIENT_H

// MARK: nghttp2 shims for the HTTP/2 client side (the tokengate-bench load generator).
//
// The same flat header-block convention as CTokengateShims_nghttp2.h: Swift hands over one block of bytes
// and the lengths, C builds the nghttp2_nv array, submits (nghttp2 copies every name and value) and frees
// the array before returning. Nothing here keeps a pointer past the call.

#include <stddef.h>
#include <stdint.h>
#include <nghttp2/nghttp2.h>

/// The most header fields one request built by the client shim may carry; more is refused with
/// NGHTTP2_ERR_INVALID_ARGUMENT.
#define CTokengateShims_NGHTTP2_CLIENT_MAX_FIELDS 256

/// Submits a request HEADERS frame on a new stream.
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

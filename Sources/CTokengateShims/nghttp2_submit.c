//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
// tokengate: nghttp2 submit helpers (see CTokengateShims_nghttp2.h).

#include "CTokengateShims_nghttp2.h"

#include <stdlib.h>

/// How many fields an nv array on the stack holds (40 bytes each): a response head or a request with more
/// takes one from the heap. Every response went through `calloc` and `free` here before.
#define TOKENGATE_STACK_NV 32

/// The nv array for `count` fields: `stack` when they fit, else a fresh allocation (free it when it is not
/// `stack`). NULL on a bad count or no memory.
static nghttp2_nv *tokengate_nva_storage(nghttp2_nv *stack, size_t count) {
    if (count == 0 || count > CTokengateShims_NGHTTP2_MAX_FIELDS) {
        return NULL;
    }
    return count <= TOKENGATE_STACK_NV ? stack : calloc(count, sizeof(nghttp2_nv));
}

/// Fills `nva` from the flat block.
static void tokengate_fill_nva(nghttp2_nv *nva, const void *block, const size_t *lengths, const uint8_t *never_index,
                               size_t count) {
    const uint8_t *cursor = block;
    for (size_t i = 0; i < count; i++) {
        nva[i].name = (uint8_t *)cursor;
        nva[i].namelen = lengths[2 * i];
        cursor += lengths[2 * i];
        nva[i].value = (uint8_t *)cursor;
        nva[i].valuelen = lengths[2 * i + 1];
        cursor += lengths[2 * i + 1];
        nva[i].flags = (never_index != NULL && never_index[i] != 0) ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE;
    }
}

/// Frees what tokengate_nva_storage took from the heap.
static void tokengate_release_nva(nghttp2_nv *nva, nghttp2_nv *stack) {
    if (nva != stack) {
        free(nva);
    }
}

/// Why tokengate_nva_storage returned NULL: a count out of range, or no memory.
static int tokengate_nva_error(size_t count) {
    return count == 0 || count > CTokengateShims_NGHTTP2_MAX_FIELDS ? NGHTTP2_ERR_INVALID_ARGUMENT : NGHTTP2_ERR_NOMEM;
}

int CTokengateShims_nghttp2_submit_response(nghttp2_session *session, int32_t stream_id, const void *block,
                                            const size_t *lengths, const uint8_t *never_index, size_t count,
                                            nghttp2_data_source_read_callback read_callback) {
    nghttp2_nv stack[TOKENGATE_STACK_NV];
    nghttp2_nv *nva = tokengate_nva_storage(stack, count);
    if (nva == NULL) {
        return tokengate_nva_error(count);
    }
    tokengate_fill_nva(nva, block, lengths, never_index, count);
    int rv;
    if (read_callback != NULL) {
        nghttp2_data_provider provider;
        provider.source.ptr = NULL;
        provider.read_callback = read_callback;
        rv = nghttp2_submit_response(session, stream_id, nva, count, &provider);
    } else {
        rv = nghttp2_submit_response(session, stream_id, nva, count, NULL);
    }
    tokengate_release_nva(nva, stack);
    return rv;
}

int CTokengateShims_nghttp2_submit_continue(nghttp2_session *session, int32_t stream_id) {
    static const char name[] = ":status";
    static const char value[] = "100";
    nghttp2_nv status = {(uint8_t *)name, (uint8_t *)value, sizeof(name) - 1, sizeof(value) - 1, NGHTTP2_NV_FLAG_NONE};
    // Returns the stream id on success for a new stream; for an existing one 0 (or a negative error).
    int32_t rv = nghttp2_submit_headers(session, NGHTTP2_FLAG_NONE, stream_id, NULL, &status, 1, NULL);
    return rv < 0 ? rv : 0;
}

int CTokengateShims_nghttp2_submit_trailer(nghttp2_session *session, int32_t stream_id, const void *block,
                                           const size_t *lengths, const uint8_t *never_index, size_t count) {
    nghttp2_nv stack[TOKENGATE_STACK_NV];
    nghttp2_nv *nva = tokengate_nva_storage(stack, count);
    if (nva == NULL) {
        return tokengate_nva_error(count);
    }
    tokengate_fill_nva(nva, block, lengths, never_index, count);
    int rv = nghttp2_submit_trailer(session, stream_id, nva, count);
    tokengate_release_nva(nva, stack);
    return rv;
}

int32_t CTokengateShims_nghttp2_submit_request(nghttp2_session *session, const void *block, const size_t *lengths,
                                               const uint8_t *never_index, size_t count,
                                               nghttp2_data_source_read_callback read_callback) {
    nghttp2_nv stack[TOKENGATE_STACK_NV];
    nghttp2_nv *nva = tokengate_nva_storage(stack, count);
    if (nva == NULL) {
        return tokengate_nva_error(count);
    }
    tokengate_fill_nva(nva, block, lengths, never_index, count);
    int32_t stream_id;
    if (read_callback != NULL) {
        nghttp2_data_provider provider;
        provider.source.ptr = NULL;
        provider.read_callback = read_callback;
        stream_id = nghttp2_submit_request(session, NULL, nva, count, &provider, NULL);
    } else {
        stream_id = nghttp2_submit_request(session, NULL, nva, count, NULL, NULL);
    }
    tokengate_release_nva(nva, stack);
    return stream_id;
}

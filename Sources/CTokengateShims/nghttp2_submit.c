//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
// tokengate: nghttp2 submit helpers (see CTokengateShims_nghttp2.h).

#include "CTokengateShims_nghttp2.h"

#include <stdlib.h>

/// Fills a freshly allocated nv array from the flat block. Returns NULL on a bad count or no memory.
static nghttp2_nv *tokengate_make_nva(const void *block, const size_t *lengths, const uint8_t *never_index,
                                      size_t count) {
    if (count == 0 || count > CTokengateShims_NGHTTP2_MAX_FIELDS) {
        return NULL;
    }
    nghttp2_nv *nva = calloc(count, sizeof(nghttp2_nv));
    if (nva == NULL) {
        return NULL;
    }
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
    return nva;
}

/// Why tokengate_make_nva returned NULL: a count out of range, or no memory.
static int tokengate_nva_error(size_t count) {
    return count == 0 || count > CTokengateShims_NGHTTP2_MAX_FIELDS ? NGHTTP2_ERR_INVALID_ARGUMENT : NGHTTP2_ERR_NOMEM;
}

int CTokengateShims_nghttp2_submit_response(nghttp2_session *session, int32_t stream_id, const void *block,
                                            const size_t *lengths, const uint8_t *never_index, size_t count,
                                            nghttp2_data_source_read_callback read_callback) {
    nghttp2_nv *nva = tokengate_make_nva(block, lengths, never_index, count);
    if (nva == NULL) {
        return tokengate_nva_error(count);
    }
    int rv;
    if (read_callback != NULL) {
        nghttp2_data_provider provider;
        provider.source.ptr = NULL;
        provider.read_callback = read_callback;
        rv = nghttp2_submit_response(session, stream_id, nva, count, &provider);
    } else {
        rv = nghttp2_submit_response(session, stream_id, nva, count, NULL);
    }
    free(nva);
    return rv;
}

int CTokengateShims_nghttp2_submit_trailer(nghttp2_session *session, int32_t stream_id, const void *block,
                                           const size_t *lengths, const uint8_t *never_index, size_t count) {
    nghttp2_nv *nva = tokengate_make_nva(block, lengths, never_index, count);
    if (nva == NULL) {
        return tokengate_nva_error(count);
    }
    int rv = nghttp2_submit_trailer(session, stream_id, nva, count);
    free(nva);
    return rv;
}

int32_t CTokengateShims_nghttp2_submit_request(nghttp2_session *session, const void *block, const size_t *lengths,
                                               const uint8_t *never_index, size_t count,
                                               nghttp2_data_source_read_callback read_callback) {
    nghttp2_nv *nva = tokengate_make_nva(block, lengths, never_index, count);
    if (nva == NULL) {
        return tokengate_nva_error(count);
    }
    int32_t stream_id;
    if (read_callback != NULL) {
        nghttp2_data_provider provider;
        provider.source.ptr = NULL;
        provider.read_callback = read_callback;
        stream_id = nghttp2_submit_request(session, NULL, nva, count, &provider, NULL);
    } else {
        stream_id = nghttp2_submit_request(session, NULL, nva, count, NULL, NULL);
    }
    free(nva);
    return stream_id;
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
#include "CTokengateShims_socket.h"

#include <linux/tcp.h>
#include <stddef.h>
#include <string.h>

_Static_assert(sizeof(struct tcp_info) <= sizeof(CTokengateShims_tcp_info_buffer),
               "CTokengateShims_tcp_info_buffer must hold the kernel's struct tcp_info");

void CTokengateShims_tcp_send_progress(const CTokengateShims_tcp_info_buffer *buffer, uint64_t *bytes_acked,
                                       uint32_t *not_sent) {
    const unsigned char *bytes = (const unsigned char *)buffer;
    // memcpy, not a cast: the buffer's alignment is uint64_t's, but say nothing about aliasing.
    memcpy(bytes_acked, bytes + offsetof(struct tcp_info, tcpi_bytes_acked), sizeof(*bytes_acked));
    memcpy(not_sent, bytes + offsetof(struct tcp_info, tcpi_notsent_bytes), sizeof(*not_sent));
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
#ifndef C_TOKENGATE_SHIMS_SOCKET_H
#define C_TOKENGATE_SHIMS_SOCKET_H

// MARK: What a TCP peer has taken (Linux `TCP_INFO`).
//
// glibc's `struct tcp_info` (netinet/tcp.h) stops before the counters needed here, and the kernel's
// (linux/tcp.h) cannot be seen from Swift next to glibc's without a clash of names. So Swift reads the
// option into an opaque buffer of this size (`getsockopt` fills at most what the running kernel knows and
// leaves the rest as it was), and this reads the two fields out of it with the kernel header's layout.

#include <stdint.h>

/// Room for the kernel's `struct tcp_info` (checked at build time against linux/tcp.h). Zero it before the
/// `getsockopt`: a kernel older than a field leaves it 0.
typedef struct {
    uint64_t words[40];
} CTokengateShims_tcp_info_buffer;

/// From a `TCP_INFO` read into `buffer`: the bytes the peer acknowledged on this connection
/// (`tcpi_bytes_acked`, Linux 4.1+; what its TCP received, whether or not its application read it yet) and
/// the bytes written to the socket that the kernel has not sent yet (`tcpi_notsent_bytes`, Linux 4.6+).
void CTokengateShims_tcp_send_progress(const CTokengateShims_tcp_info_buffer *buffer, uint64_t *bytes_acked,
                                       uint32_t *not_sent);

#endif

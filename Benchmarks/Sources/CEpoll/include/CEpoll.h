//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// Linux's epoll and accept4, which Swift's Glibc module does not export (accept4 needs _GNU_SOURCE).
#ifndef CEPOLL_H
#define CEPOLL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/socket.h>

/// accept4 without the peer's address: the floor never looks at it.
static inline int CEpoll_accept4(int socket, int flags) { return accept4(socket, NULL, NULL, flags); }

#endif

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// Linux's epoll and accept4, which Swift's Glibc module does not export. accept4 needs _GNU_SOURCE, which a
// header shared with Swift must not define (it would change the system's structures under the Glibc module),
// so it is wrapped in epoll.c.
#ifndef CTOKENGATE_EPOLL_H
#define CTOKENGATE_EPOLL_H

#include <sys/epoll.h>

/// accept4 without the peer's address, non-blocking and close-on-exec as `flags` say.
int CTokengateEpoll_accept4(int socket, int flags);

#endif

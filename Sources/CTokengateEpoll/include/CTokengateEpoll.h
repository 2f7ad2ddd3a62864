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

/// A non-blocking, close-on-exec eventfd with a counter of 0 (`sys/eventfd.h` is not in Swift's Glibc), or -1.
int CTokengateEpoll_eventfd(void);

/// Binds the calling thread to one CPU (`CPU_SET` is a macro Swift cannot call). Returns 0 or an errno value.
int CTokengateEpoll_pin_current_thread(int cpu);

/// How many CPUs the calling thread may run on, or -1.
int CTokengateEpoll_current_thread_cpu_count(void);

/// 1 when the calling thread may run on `cpu`, else 0.
int CTokengateEpoll_current_thread_may_run_on(int cpu);

#endif

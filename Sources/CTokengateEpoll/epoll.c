//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "CTokengateEpoll.h"

int CTokengateEpoll_accept4(int socket, int flags) { return accept4(socket, NULL, NULL, flags); }

int CTokengateEpoll_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int CTokengateEpoll_pin_current_thread(int cpu) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return EINVAL;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    // sched_setaffinity with pid 0 is the calling thread (a task, on Linux), not the whole process.
    return sched_setaffinity(0, sizeof(set), &set) == 0 ? 0 : errno;
}

int CTokengateEpoll_current_thread_cpu_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
    return CPU_COUNT(&set);
}

int CTokengateEpoll_current_thread_may_run_on(int cpu) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
    return CPU_ISSET(cpu, &set) ? 1 : 0;
}

/*
 * Preloaded into the gateway while it runs under valgrind (scripts/callgrind-requests.sh), never shipped.
 *
 * libdispatch's signal thread calls sigsuspend(2) with a mask in read-only memory. Valgrind's wrapper of the
 * system call edits the mask in place (it takes out the signal it keeps for itself), faults on the read-only
 * page and stops with "VALGRIND INTERNAL ERROR: signal 11". Passing a writable copy changes nothing else.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, (size_t)(_NSIG / 8));
}

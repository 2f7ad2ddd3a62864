// Fork and exec with inherited listening sockets, for the binary hand-over. In C because the child between
// fork and exec may only make async-signal-safe calls: no allocation, no locks, no Swift runtime.
#define _GNU_SOURCE
#include "CTokengateShims_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void close_from(int first) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, ~0U, 0) == 0) return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 1 << 20) max = 1 << 20;
    for (int fd = first; fd < max; fd++) close(fd);
}

pid_t CTokengateShims_spawn_with_descriptors(const char *path, char *const argv[], char *const envp[],
                                             const int *descriptors, int count, int *exec_errno) {
    *exec_errno = 0;
    if (count < 0 || count > 1000) {
        *exec_errno = EINVAL;
        return -1;
    }
    // Everything the child needs is allocated here, before fork.
    int envc = 0;
    while (envp[envc] != NULL) envc++;
    char **child_env = calloc((size_t)envc + 2, sizeof(char *));
    int *moved = calloc((size_t)count + 1, sizeof(int));
    char listen_pid[32] = "LISTEN_PID=";
    if (child_env == NULL || moved == NULL) {
        free(child_env);
        free(moved);
        *exec_errno = ENOMEM;
        return -1;
    }
    for (int i = 0; i < envc; i++) child_env[i] = envp[i];
    child_env[envc] = listen_pid;
    child_env[envc + 1] = NULL;
    // The child writes errno here when exec fails; a successful exec closes it (O_CLOEXEC): EOF.
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        *exec_errno = errno;
        free(child_env);
        free(moved);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++) sigaction(sig, &action, NULL);
        // LISTEN_PID=<own pid>, digits written by hand (snprintf is not async-signal-safe).
        char digits[16];
        int length = 0;
        for (unsigned long value = (unsigned long)getpid(); value > 0 || length == 0; value /= 10) {
            digits[length++] = (char)('0' + value % 10);
        }
        char *cursor = listen_pid + strlen("LISTEN_PID=");
        while (length > 0) *cursor++ = digits[--length];
        *cursor = 0;
        // First every source above the targets (a source may sit where another one must go), then into place.
        int high = 3 + count + 1;
        int report_fd = fcntl(report[1], F_DUPFD_CLOEXEC, high);
        for (int i = 0; i < count && report_fd >= 0; i++) {
            moved[i] = fcntl(descriptors[i], F_DUPFD, high);
            if (moved[i] < 0) goto failed;
        }
        if (report_fd < 0) _exit(127);
        for (int i = 0; i < count; i++) {
            if (dup2(moved[i], 3 + i) < 0) goto failed;  // dup2's copy has FD_CLOEXEC cleared
        }
        if (dup2(report_fd, 3 + count) < 0 || fcntl(3 + count, F_SETFD, FD_CLOEXEC) != 0) _exit(127);
        report_fd = 3 + count;
        close_from(3 + count + 1);
        execve(path, argv, child_env);
    failed:;
        int error = errno;
        if (report_fd >= 0) {
            ssize_t ignored = write(report_fd, &error, sizeof error);
            (void)ignored;
        }
        _exit(127);
    }
    int fork_errno = errno;
    close(report[1]);
    free(child_env);
    free(moved);
    if (pid < 0) {
        close(report[0]);
        *exec_errno = fork_errno;
        return -1;
    }
    int error = 0;
    ssize_t got;
    do {
        got = read(report[0], &error, sizeof error);
    } while (got < 0 && errno == EINTR);
    close(report[0]);
    if (got == (ssize_t)sizeof error) {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        *exec_errno = error != 0 ? error : EIO;
        return -1;
    }
    return pid;
}

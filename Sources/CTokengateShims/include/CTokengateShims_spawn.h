#ifndef C_TOKENGATE_SHIMS_SPAWN_H
#define C_TOKENGATE_SHIMS_SPAWN_H

#include <sys/types.h>

/// Starts `path` with `argv` and `envp` as a child that inherits `descriptors[0..<count]` as its
/// descriptors 3, 4, ... (the order given, FD_CLOEXEC cleared): the way systemd passes listening sockets
/// (sd_listen_fds(3)). `envp` gets `LISTEN_PID=` and the child's own process id added, which only the child
/// knows, so that the new process reads the sockets as it reads systemd's.
///
/// In the child, before exec: the signal mask is emptied and every signal's action reset to the default (an
/// ignored signal stays ignored across exec, and the parent ignores those it watches), and every other
/// descriptor above 2 is closed, so the child holds none of the parent's client connections open.
///
/// Returns the child's process id, or -1 with `*exec_errno` set when fork or exec failed (the child, if any,
/// has then been reaped).
pid_t CTokengateShims_spawn_with_descriptors(const char *path, char *const argv[], char *const envp[],
                                             const int *descriptors, int count, int *exec_errno);

#endif

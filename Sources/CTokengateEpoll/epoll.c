//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#define _GNU_SOURCE
#include <stddef.h>
#include <sys/socket.h>

#include "CTokengateEpoll.h"

int CTokengateEpoll_accept4(int socket, int flags) { return accept4(socket, NULL, NULL, flags); }

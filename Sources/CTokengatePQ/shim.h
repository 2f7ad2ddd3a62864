//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
// tokengate: libpq, PostgreSQL's own C client, declared as a system library. Debian's libpq-dev puts the
// header in /usr/include/postgresql, which `pkg-config --cflags libpq` reports. libpq does its TLS with the
// system OpenSSL 3, so the PostgreSQL store adds no second TLS stack to the product.
#ifndef C_TOKENGATE_PQ_SHIM_H
#define C_TOKENGATE_PQ_SHIM_H

#include <libpq-fe.h>

#endif

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
// Benchmarks only: the system libcrypto (pkg-config `libcrypto`), for the bare-verify floor in CBenchLibcrypto.
// Swift code never imports this module; it exists so that SwiftPM finds libcrypto through pkg-config.
#ifndef C_BENCH_OPENSSL_SHIM_H
#define C_BENCH_OPENSSL_SHIM_H
#include <openssl/opensslv.h>
#endif

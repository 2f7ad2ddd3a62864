#ifndef C_TOKENGATE_SHIMS_VERSION_H
#define C_TOKENGATE_SHIMS_VERSION_H

// MARK: Build-time version checks. Building against older headers fails here with a message
// that says what to install, instead of failing later on a missing symbol.
#include <openssl/opensslv.h>
#if !defined(OPENSSL_VERSION_MAJOR) || OPENSSL_VERSION_MAJOR < 3
#error "tokengate needs OpenSSL 3.0 or newer (Debian 12: apt-get install libssl-dev)."
#endif
#include <nghttp2/nghttp2ver.h>
#if !defined(NGHTTP2_VERSION_NUM) || NGHTTP2_VERSION_NUM < 0x013400
#error "tokengate needs libnghttp2 1.52 or newer (Debian 12: apt-get install libnghttp2-dev)."
#endif

/// Run-time check of the libraries actually loaded (a binary built on one machine may run on
/// another). Returns 0 when both are new enough; otherwise writes a message into `message`.
int CTokengateShims_check_library_versions(char *message, unsigned long capacity);

#endif

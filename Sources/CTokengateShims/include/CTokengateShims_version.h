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
/// another). Returns 0 when both are new enough; otherwise writes a message into `message` that names
/// the library, the version loaded and the version needed, and returns 1.
int CTokengateShims_check_library_versions(char *message, unsigned long capacity);

/// The rule behind `CTokengateShims_check_library_versions`, on versions passed in (so tests can show
/// the message for libraries this machine does not have). Same return value and message.
int CTokengateShims_library_version_problem(unsigned long openssl_number, const char *openssl_text,
                                            int nghttp2_number, const char *nghttp2_text,
                                            char *message, unsigned long capacity);

#endif

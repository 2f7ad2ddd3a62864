// tokengate: system OpenSSL 3 (libssl + libcrypto), declared as a system library.
#ifndef C_TOKENGATE_OPENSSL_SHIM_H
#define C_TOKENGATE_OPENSSL_SHIM_H

#include <openssl/opensslv.h>
#if !defined(OPENSSL_VERSION_MAJOR) || OPENSSL_VERSION_MAJOR < 3
#error "tokengate needs OpenSSL 3.0 or newer (apt-get install libssl-dev on Debian 12); the headers found are older."
#endif

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#endif

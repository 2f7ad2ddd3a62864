//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
#ifndef C_BENCH_LIBCRYPTO_H
#define C_BENCH_LIBCRYPTO_H

// The libcrypto floor for the token benchmarks: the bare verification of one fixed signature over one fixed
// signing input, with every key object built in advance. No OpenSSL type crosses this header.
//
// Two ways are measured:
// - "prepared": the least per-call work the public libcrypto API allows (key, digest and algorithm fetched
//   once; a pre-initialised EVP_PKEY_CTX, EVP_MAC_CTX or digest-verify template reused). Single-threaded:
//   a floor object must not be used from two threads at once.
// - "oneshot": the textbook per-call sequence (EVP_MD_CTX_new, EVP_DigestVerifyInit_ex, EVP_DigestVerify,
//   EVP_MD_CTX_free; for HMAC the one-shot HMAC()), i.e. what a straightforward caller pays.

#include <stddef.h>

enum {
    CBenchLibcrypto_HS256 = 0,
    CBenchLibcrypto_EDDSA = 1,
    CBenchLibcrypto_ES256 = 2,
    CBenchLibcrypto_RS256 = 3,
    CBenchLibcrypto_PS256 = 4,
};

typedef struct CBenchLibcrypto_floor CBenchLibcrypto_floor;

/// Key material per scheme (raw bytes, big-endian numbers):
/// HS256: `a` = the secret, `b` unused; EdDSA: `a` = the 32-byte public key; ES256: `a` = x, `b` = y (32 bytes
/// each); RS256/PS256: `a` = n, `b` = e. `data` is the JWS signing input, `sig` the decoded JWS signature (for
/// ES256 the 64-byte r‖s; it is converted to DER here, once, because libcrypto wants DER).
/// Returns NULL when the key cannot be built or the signature does not verify (a floor that measures a failing
/// verification would be meaningless).
CBenchLibcrypto_floor *CBenchLibcrypto_floor_new(int scheme, const void *a, size_t a_len, const void *b, size_t b_len,
                                                 const void *data, size_t data_len, const void *sig, size_t sig_len);
void CBenchLibcrypto_floor_free(CBenchLibcrypto_floor *floor);
/// 1 when the signature verifies.
int CBenchLibcrypto_floor_verify_prepared(CBenchLibcrypto_floor *floor);
/// 1 when the signature verifies.
int CBenchLibcrypto_floor_verify_oneshot(CBenchLibcrypto_floor *floor);

#endif

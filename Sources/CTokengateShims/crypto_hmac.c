//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// HMAC-SHA-1/256/384/512 with precomputed inner and outer digest states. SHA-1 is here only because the web
// frameworks' session cookies still sign with it (itsdangerous, keygrip, Rails' signed cookies); HMAC-SHA-1
// has no known weakness as a MAC (RFC 6151 §2 reasons the same way about HMAC-MD5), and JWTs never use it.
//
// Why the low-level SHA APIs: OpenSSL 3 marks SHA256_Init & co. deprecated in favour of EVP_MAC, but an
// EVP_MAC call costs a context allocation and a provider dispatch per token, several times the cost of
// hashing a 300-byte token. The low-level functions are still part of libcrypto 3.x (Debian builds it
// with the deprecated API enabled) and their CTX structs are plain values, so a per-key template can be
// copied onto the stack and finished without allocating. The deprecation warning is suppressed for this
// file only. Correctness against the EVP implementation is covered by the Wycheproof HMAC vectors.
#define OPENSSL_SUPPRESS_DEPRECATED 1

#include "CTokengateShims_crypto.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

struct CTokengateShims_hmac_key {
    int bits;
    union {
        struct {
            SHA_CTX inner;
            SHA_CTX outer;
        } s1;
        struct {
            SHA256_CTX inner;
            SHA256_CTX outer;
        } s256;
        struct {
            SHA512_CTX inner;
            SHA512_CTX outer;
        } s512;
    } u;
};

CTokengateShims_hmac_key *CTokengateShims_hmac_key_new(int digest_bits, const void *key, size_t key_len) {
    size_t block;
    switch (digest_bits) {
    case 160: block = SHA_CBLOCK; break;
    case 256: block = SHA256_CBLOCK; break;
    case 384:
    case 512: block = SHA512_CBLOCK; break;
    default: return NULL;
    }
    CTokengateShims_hmac_key *k = calloc(1, sizeof(*k));
    if (k == NULL) {
        return NULL;
    }
    k->bits = digest_bits;

    // RFC 2104 §2: a key longer than the block is replaced by its hash; shorter keys are zero-padded.
    unsigned char padded[SHA512_CBLOCK];
    memset(padded, 0, sizeof(padded));
    if (key_len > block) {
        switch (digest_bits) {
        case 160: SHA1(key, key_len, padded); break;
        case 256: SHA256(key, key_len, padded); break;
        case 384: SHA384(key, key_len, padded); break;
        default: SHA512(key, key_len, padded); break;
        }
    } else if (key_len > 0) {
        memcpy(padded, key, key_len);
    }
    unsigned char ipad[SHA512_CBLOCK];
    unsigned char opad[SHA512_CBLOCK];
    for (size_t i = 0; i < block; i++) {
        ipad[i] = padded[i] ^ 0x36;
        opad[i] = padded[i] ^ 0x5c;
    }
    switch (digest_bits) {
    case 160:
        SHA1_Init(&k->u.s1.inner);
        SHA1_Update(&k->u.s1.inner, ipad, block);
        SHA1_Init(&k->u.s1.outer);
        SHA1_Update(&k->u.s1.outer, opad, block);
        break;
    case 256:
        SHA256_Init(&k->u.s256.inner);
        SHA256_Update(&k->u.s256.inner, ipad, block);
        SHA256_Init(&k->u.s256.outer);
        SHA256_Update(&k->u.s256.outer, opad, block);
        break;
    case 384:
        SHA384_Init(&k->u.s512.inner);
        SHA384_Update(&k->u.s512.inner, ipad, block);
        SHA384_Init(&k->u.s512.outer);
        SHA384_Update(&k->u.s512.outer, opad, block);
        break;
    default:
        SHA512_Init(&k->u.s512.inner);
        SHA512_Update(&k->u.s512.inner, ipad, block);
        SHA512_Init(&k->u.s512.outer);
        SHA512_Update(&k->u.s512.outer, opad, block);
        break;
    }
    OPENSSL_cleanse(padded, sizeof(padded));
    OPENSSL_cleanse(ipad, sizeof(ipad));
    OPENSSL_cleanse(opad, sizeof(opad));
    return k;
}

void CTokengateShims_hmac_key_free(CTokengateShims_hmac_key *key) {
    if (key != NULL) {
        // The digest states are as good as the key: wipe them.
        OPENSSL_cleanse(key, sizeof(*key));
        free(key);
    }
}

size_t CTokengateShims_hmac_tag_length(const CTokengateShims_hmac_key *key) {
    return (size_t)key->bits / 8;
}

void CTokengateShims_hmac_compute(const CTokengateShims_hmac_key *key, const void *data, size_t data_len, void *out) {
    // Order matters: copy the *template* states by value first, so the shared key object is only read
    // (this is what makes concurrent use from many threads safe), then absorb the message into the inner
    // copy, then the inner digest into the outer copy. The copies are wiped before returning.
    unsigned char inner_digest[SHA512_DIGEST_LENGTH];
    switch (key->bits) {
    case 160: {
        SHA_CTX ctx = key->u.s1.inner;
        SHA1_Update(&ctx, data, data_len);
        SHA1_Final(inner_digest, &ctx);
        ctx = key->u.s1.outer;
        SHA1_Update(&ctx, inner_digest, SHA_DIGEST_LENGTH);
        SHA1_Final(out, &ctx);
        OPENSSL_cleanse(&ctx, sizeof(ctx));
        break;
    }
    case 256: {
        SHA256_CTX ctx = key->u.s256.inner;
        SHA256_Update(&ctx, data, data_len);
        SHA256_Final(inner_digest, &ctx);
        ctx = key->u.s256.outer;
        SHA256_Update(&ctx, inner_digest, SHA256_DIGEST_LENGTH);
        SHA256_Final(out, &ctx);
        OPENSSL_cleanse(&ctx, sizeof(ctx));
        break;
    }
    case 384: {
        SHA512_CTX ctx = key->u.s512.inner;
        SHA384_Update(&ctx, data, data_len);
        SHA384_Final(inner_digest, &ctx);
        ctx = key->u.s512.outer;
        SHA384_Update(&ctx, inner_digest, SHA384_DIGEST_LENGTH);
        SHA384_Final(out, &ctx);
        OPENSSL_cleanse(&ctx, sizeof(ctx));
        break;
    }
    default: {
        SHA512_CTX ctx = key->u.s512.inner;
        SHA512_Update(&ctx, data, data_len);
        SHA512_Final(inner_digest, &ctx);
        ctx = key->u.s512.outer;
        SHA512_Update(&ctx, inner_digest, SHA512_DIGEST_LENGTH);
        SHA512_Final(out, &ctx);
        OPENSSL_cleanse(&ctx, sizeof(ctx));
        break;
    }
    }
}

int CTokengateShims_hmac_verify(const CTokengateShims_hmac_key *key, const void *data, size_t data_len,
                                const void *tag, size_t tag_len) {
    size_t expected_len = (size_t)key->bits / 8;
    if (tag_len != expected_len) {
        return 0;
    }
    unsigned char computed[SHA512_DIGEST_LENGTH];
    CTokengateShims_hmac_compute(key, data, data_len, computed);
    int equal = CRYPTO_memcmp(computed, tag, expected_len) == 0;
    return equal ? 1 : 0;
}


void CTokengateShims_sha256(const void *data, size_t data_len, void *out) {
    // The one-shot function: no context to allocate, and not among OpenSSL 3's deprecations.
    SHA256(data, data_len, out);
}

int CTokengateShims_equal_constant_time(const void *a, const void *b, size_t len) {
    return CRYPTO_memcmp(a, b, len) == 0 ? 1 : 0;
}

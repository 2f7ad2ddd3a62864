//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// The bare libcrypto verifications the token benchmarks compare against. See CBenchLibcrypto.h.

#include "CBenchLibcrypto.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>
#include <stdlib.h>
#include <string.h>

struct CBenchLibcrypto_floor {
    int scheme;
    unsigned char *data;
    size_t data_len;
    /// The signature as libcrypto takes it (ES256: DER).
    unsigned char *sig;
    size_t sig_len;

    // HS256
    unsigned char *secret;
    size_t secret_len;
    EVP_MAC *mac;
    /// Keyed once; EVP_MAC_init with a NULL key re-arms it with the same key.
    EVP_MAC_CTX *mac_ctx;

    // Public-key schemes
    EVP_PKEY *pkey;
    EVP_MD *sha256;
    /// ES256/RS256/PS256: a digest context and a verify context, both initialised once and reused.
    EVP_MD_CTX *digest_ctx;
    EVP_PKEY_CTX *verify_ctx;
    /// EdDSA: Ed25519 in OpenSSL 3.0 only verifies through EVP_DigestVerify, which finalises its context, so the
    /// cheapest repeatable form is copying an initialised template into a reused work context.
    EVP_MD_CTX *template_ctx;
    EVP_MD_CTX *work_ctx;
};

// MARK: Key construction (setup only)

static EVP_PKEY *from_params(const char *type, OSSL_PARAM_BLD *bld) {
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    EVP_PKEY *pkey = NULL;
    if (params == NULL || ctx == NULL || EVP_PKEY_fromdata_init(ctx) != 1
        || EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) {
        pkey = NULL;
    }
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return pkey;
}

static EVP_PKEY *ec_p256(const unsigned char *x, const unsigned char *y) {
    unsigned char point[65];
    point[0] = 0x04;
    memcpy(point + 1, x, 32);
    memcpy(point + 33, y, 32);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pkey = NULL;
    if (bld != NULL && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) == 1
        && OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point)) == 1) {
        pkey = from_params("EC", bld);
    }
    OSSL_PARAM_BLD_free(bld);
    return pkey;
}

static EVP_PKEY *rsa(const unsigned char *n, size_t n_len, const unsigned char *e, size_t e_len) {
    BIGNUM *bn_n = BN_bin2bn(n, (int)n_len, NULL);
    BIGNUM *bn_e = BN_bin2bn(e, (int)e_len, NULL);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pkey = NULL;
    if (bn_n != NULL && bn_e != NULL && bld != NULL && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n) == 1
        && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e) == 1) {
        pkey = from_params("RSA", bld);
    }
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn_n);
    BN_free(bn_e);
    return pkey;
}

/// r‖s (32 bytes each) → DER ECDSA-Sig-Value. Returns the length written to `out` (at most 72).
static size_t der_signature(const unsigned char *raw, unsigned char *out) {
    size_t offset = 2;
    for (int half = 0; half < 2; half++) {
        const unsigned char *value = raw + 32 * half;
        size_t skip = 0;
        while (skip < 31 && value[skip] == 0) skip++;
        size_t len = 32 - skip;
        int pad = (value[skip] & 0x80) != 0;
        out[offset++] = 0x02;
        out[offset++] = (unsigned char)(len + (size_t)pad);
        if (pad) out[offset++] = 0x00;
        memcpy(out + offset, value + skip, len);
        offset += len;
    }
    out[0] = 0x30;
    out[1] = (unsigned char)(offset - 2);
    return offset;
}

static int configure_pss(EVP_PKEY_CTX *pctx) {
    return EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1
        && EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, 32) == 1
        && EVP_PKEY_CTX_set_rsa_mgf1_md_name(pctx, "SHA256", NULL) == 1;
}

static unsigned char *copy(const void *bytes, size_t len) {
    unsigned char *out = malloc(len > 0 ? len : 1);
    if (out != NULL && len > 0) memcpy(out, bytes, len);
    return out;
}

static int prepare(CBenchLibcrypto_floor *f, const unsigned char *a, size_t a_len, const unsigned char *b,
                   size_t b_len) {
    switch (f->scheme) {
    case CBenchLibcrypto_HS256: {
        f->secret = copy(a, a_len);
        f->secret_len = a_len;
        f->mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
        f->mac_ctx = f->mac == NULL ? NULL : EVP_MAC_CTX_new(f->mac);
        OSSL_PARAM params[2] = {
            OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
            OSSL_PARAM_construct_end(),
        };
        return f->secret != NULL && f->mac_ctx != NULL && EVP_MAC_init(f->mac_ctx, a, a_len, params) == 1;
    }
    case CBenchLibcrypto_EDDSA:
        if (a_len != 32) return 0;
        f->pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, a, 32);
        f->template_ctx = EVP_MD_CTX_new();
        f->work_ctx = EVP_MD_CTX_new();
        return f->pkey != NULL && f->template_ctx != NULL && f->work_ctx != NULL
            && EVP_DigestVerifyInit_ex(f->template_ctx, NULL, NULL, NULL, NULL, f->pkey, NULL) == 1;
    case CBenchLibcrypto_ES256:
    case CBenchLibcrypto_RS256:
    case CBenchLibcrypto_PS256: {
        if (f->scheme == CBenchLibcrypto_ES256) {
            if (a_len != 32 || b_len != 32) return 0;
            f->pkey = ec_p256(a, b);
        } else {
            f->pkey = rsa(a, a_len, b, b_len);
        }
        f->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
        f->digest_ctx = EVP_MD_CTX_new();
        f->verify_ctx = f->pkey == NULL ? NULL : EVP_PKEY_CTX_new_from_pkey(NULL, f->pkey, NULL);
        int ok = f->sha256 != NULL && f->digest_ctx != NULL && f->verify_ctx != NULL
            && EVP_DigestInit_ex2(f->digest_ctx, f->sha256, NULL) == 1
            && EVP_PKEY_verify_init(f->verify_ctx) == 1
            && EVP_PKEY_CTX_set_signature_md(f->verify_ctx, f->sha256) == 1;
        if (ok && f->scheme == CBenchLibcrypto_PS256) ok = configure_pss(f->verify_ctx);
        return ok;
    }
    default: return 0;
    }
}

// MARK: Public API

CBenchLibcrypto_floor *CBenchLibcrypto_floor_new(int scheme, const void *a, size_t a_len, const void *b, size_t b_len,
                                                 const void *data, size_t data_len, const void *sig, size_t sig_len) {
    CBenchLibcrypto_floor *f = calloc(1, sizeof(*f));
    if (f == NULL) return NULL;
    f->scheme = scheme;
    f->data = copy(data, data_len);
    f->data_len = data_len;
    if (scheme == CBenchLibcrypto_ES256) {
        if (sig_len != 64) {
            CBenchLibcrypto_floor_free(f);
            return NULL;
        }
        unsigned char der[72];
        f->sig_len = der_signature(sig, der);
        f->sig = copy(der, f->sig_len);
    } else {
        f->sig = copy(sig, sig_len);
        f->sig_len = sig_len;
    }
    int ok = f->data != NULL && f->sig != NULL && prepare(f, a, a_len, b, b_len)
        && CBenchLibcrypto_floor_verify_prepared(f) == 1 && CBenchLibcrypto_floor_verify_oneshot(f) == 1;
    ERR_clear_error();
    if (!ok) {
        CBenchLibcrypto_floor_free(f);
        return NULL;
    }
    return f;
}

void CBenchLibcrypto_floor_free(CBenchLibcrypto_floor *f) {
    if (f == NULL) return;
    EVP_MAC_CTX_free(f->mac_ctx);
    EVP_MAC_free(f->mac);
    EVP_MD_CTX_free(f->digest_ctx);
    EVP_PKEY_CTX_free(f->verify_ctx);
    EVP_MD_CTX_free(f->template_ctx);
    EVP_MD_CTX_free(f->work_ctx);
    EVP_MD_free(f->sha256);
    EVP_PKEY_free(f->pkey);
    if (f->secret != NULL) OPENSSL_cleanse(f->secret, f->secret_len);
    free(f->secret);
    free(f->data);
    free(f->sig);
    free(f);
}

int CBenchLibcrypto_floor_verify_prepared(CBenchLibcrypto_floor *f) {
    switch (f->scheme) {
    case CBenchLibcrypto_HS256: {
        unsigned char tag[EVP_MAX_MD_SIZE];
        size_t tag_len = 0;
        // Order: re-arm with the stored key (NULL key = keep it), absorb, finish, compare in constant time.
        int ok = EVP_MAC_init(f->mac_ctx, NULL, 0, NULL) == 1
            && EVP_MAC_update(f->mac_ctx, f->data, f->data_len) == 1
            && EVP_MAC_final(f->mac_ctx, tag, &tag_len, sizeof(tag)) == 1;
        return ok && tag_len == f->sig_len && CRYPTO_memcmp(tag, f->sig, tag_len) == 0;
    }
    case CBenchLibcrypto_EDDSA:
        return EVP_MD_CTX_copy_ex(f->work_ctx, f->template_ctx) == 1
            && EVP_DigestVerify(f->work_ctx, f->sig, f->sig_len, f->data, f->data_len) == 1;
    default: {
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned int digest_len = 0;
        // Order: re-initialise the reused digest context (same EVP_MD, so no fetch), hash the signing input, then
        // verify the digest with the verify context initialised at setup (EVP_PKEY_verify leaves it reusable).
        return EVP_DigestInit_ex2(f->digest_ctx, NULL, NULL) == 1
            && EVP_DigestUpdate(f->digest_ctx, f->data, f->data_len) == 1
            && EVP_DigestFinal_ex(f->digest_ctx, digest, &digest_len) == 1
            && EVP_PKEY_verify(f->verify_ctx, f->sig, f->sig_len, digest, digest_len) == 1;
    }
    }
}

int CBenchLibcrypto_floor_verify_oneshot(CBenchLibcrypto_floor *f) {
    if (f->scheme == CBenchLibcrypto_HS256) {
        unsigned char tag[EVP_MAX_MD_SIZE];
        unsigned int tag_len = 0;
        if (HMAC(EVP_sha256(), f->secret, (int)f->secret_len, f->data, f->data_len, tag, &tag_len) == NULL) return 0;
        return tag_len == f->sig_len && CRYPTO_memcmp(tag, f->sig, tag_len) == 0;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) return 0;
    EVP_PKEY_CTX *pctx = NULL;
    const char *digest = f->scheme == CBenchLibcrypto_EDDSA ? NULL : "SHA256";
    int ok = EVP_DigestVerifyInit_ex(ctx, &pctx, digest, NULL, NULL, f->pkey, NULL) == 1
        && (f->scheme != CBenchLibcrypto_PS256 || configure_pss(pctx))
        && EVP_DigestVerify(ctx, f->sig, f->sig_len, f->data, f->data_len) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
}

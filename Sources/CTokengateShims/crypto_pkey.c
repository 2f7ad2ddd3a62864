//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// Public-key verification, key construction, signing and key generation through the EVP API.

#include "CTokengateShims_crypto.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <stdlib.h>
#include <string.h>

struct CTokengateShims_verifier {
    EVP_PKEY *pkey;
    /// Initialised once by EVP_DigestVerifyInit_ex; never used to verify, only copied.
    EVP_MD_CTX *template_ctx;
    int scheme;
    /// The exact signature length the scheme allows (RSA: the modulus size; JWS forbids shorter forms).
    size_t signature_len;
};

// MARK: Helpers

static const char *scheme_digest(int scheme) {
    switch (scheme) {
    case CTokengateShims_SCHEME_EDDSA: return NULL;  // Ed25519 hashes internally (PureEdDSA).
    case CTokengateShims_SCHEME_ES256:
    case CTokengateShims_SCHEME_RS256:
    case CTokengateShims_SCHEME_PS256: return "SHA256";
    default: return NULL;
    }
}

/// Configures RSASSA-PSS as RFC 7518 §3.5 fixes it for PS256: MGF1 with SHA-256, salt as long as the hash.
/// Must run after EVP_Digest{Sign,Verify}Init_ex (it sets parameters on the context that call created).
static int configure_pss(EVP_PKEY_CTX *pctx) {
    return EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1
        && EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, 32) == 1
        && EVP_PKEY_CTX_set_rsa_mgf1_md_name(pctx, "SHA256", NULL) == 1;
}

static int pkey_kind(const EVP_PKEY *pkey) {
    switch (EVP_PKEY_get_base_id(pkey)) {
    case EVP_PKEY_RSA: return CTokengateShims_PKEY_RSA;
    case EVP_PKEY_ED25519: return CTokengateShims_PKEY_ED25519;
    case EVP_PKEY_EC: {
        char name[64];
        size_t len = 0;
        if (EVP_PKEY_get_group_name(pkey, name, sizeof(name), &len) != 1) {
            return CTokengateShims_PKEY_EC_OTHER_CURVE;
        }
        if (strcmp(name, "prime256v1") == 0 || strcmp(name, "P-256") == 0) {
            return CTokengateShims_PKEY_EC_P256;
        }
        return CTokengateShims_PKEY_EC_OTHER_CURVE;
    }
    default: return CTokengateShims_PKEY_OTHER;
    }
}

/// DER INTEGER for a 32-byte unsigned big-endian value: minimal length, a 0x00 prefix when the top bit is set.
static size_t der_integer(unsigned char *out, const unsigned char *value) {
    size_t skip = 0;
    while (skip < 31 && value[skip] == 0) {
        skip++;
    }
    size_t len = 32 - skip;
    size_t pad = (value[skip] & 0x80) ? 1 : 0;
    out[0] = 0x02;
    out[1] = (unsigned char)(len + pad);
    if (pad) {
        out[2] = 0x00;
    }
    memcpy(out + 2 + pad, value + skip, len);
    return 2 + pad + len;
}

// MARK: Verification

CTokengateShims_verifier *CTokengateShims_verifier_new(struct evp_pkey_st *pkey, int scheme) {
    int kind = pkey_kind(pkey);
    size_t signature_len;
    switch (scheme) {
    case CTokengateShims_SCHEME_EDDSA:
        if (kind != CTokengateShims_PKEY_ED25519) return NULL;
        signature_len = 64;
        break;
    case CTokengateShims_SCHEME_ES256:
        if (kind != CTokengateShims_PKEY_EC_P256) return NULL;
        signature_len = 64;
        break;
    case CTokengateShims_SCHEME_RS256:
    case CTokengateShims_SCHEME_PS256:
        if (kind != CTokengateShims_PKEY_RSA) return NULL;
        signature_len = (size_t)EVP_PKEY_get_size(pkey);
        break;
    default: return NULL;
    }
    CTokengateShims_verifier *v = calloc(1, sizeof(*v));
    if (v == NULL) return NULL;
    v->scheme = scheme;
    v->signature_len = signature_len;
    v->template_ctx = EVP_MD_CTX_new();
    if (v->template_ctx == NULL || EVP_PKEY_up_ref(pkey) != 1) {
        EVP_MD_CTX_free(v->template_ctx);
        free(v);
        return NULL;
    }
    v->pkey = pkey;
    EVP_PKEY_CTX *pctx = NULL;
    int ok = EVP_DigestVerifyInit_ex(v->template_ctx, &pctx, scheme_digest(scheme), NULL, NULL, pkey, NULL) == 1;
    if (ok && scheme == CTokengateShims_SCHEME_PS256) {
        ok = configure_pss(pctx);
    }
    if (!ok) {
        ERR_clear_error();
        CTokengateShims_verifier_free(v);
        return NULL;
    }
    return v;
}

void CTokengateShims_verifier_free(CTokengateShims_verifier *verifier) {
    if (verifier != NULL) {
        EVP_MD_CTX_free(verifier->template_ctx);
        EVP_PKEY_free(verifier->pkey);
        free(verifier);
    }
}

int CTokengateShims_verifier_verify(const CTokengateShims_verifier *verifier, const void *data, size_t data_len,
                                    const void *sig, size_t sig_len) {
    if (sig_len != verifier->signature_len) {
        return 0;
    }
    unsigned char der[80];
    const unsigned char *signature = sig;
    size_t signature_len = sig_len;
    if (verifier->scheme == CTokengateShims_SCHEME_ES256) {
        // JWS ES256 is r‖s (RFC 7518 §3.4); libcrypto wants an ECDSA-Sig-Value in DER. Encoding on the stack
        // is cheaper than ECDSA_SIG + i2d (two BIGNUMs and a heap buffer) and always canonical. Range checks
        // of r and s (0 < r, s < n) are left to libcrypto.
        const unsigned char *raw = sig;
        size_t r_len = der_integer(der + 2, raw);
        size_t s_len = der_integer(der + 2 + r_len, raw + 32);
        der[0] = 0x30;
        der[1] = (unsigned char)(r_len + s_len);  // at most 70: the short length form always fits
        signature = der;
        signature_len = 2 + r_len + s_len;
    }
    // Order: copy the prepared template (the shared template is only read, so concurrent callers are
    // safe), mark the copy FINALISE so EVP_DigestVerify does not duplicate the context once more to keep it
    // reusable, verify, free. Any error-queue entries a failed verification leaves are cleared so they
    // never surface in an unrelated caller's error report.
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) {
        return 0;
    }
    int result = 0;
    if (EVP_MD_CTX_copy_ex(ctx, verifier->template_ctx) == 1) {
        EVP_MD_CTX_set_flags(ctx, EVP_MD_CTX_FLAG_FINALISE);
        result = EVP_DigestVerify(ctx, signature, signature_len, data, data_len) == 1 ? 1 : 0;
    }
    EVP_MD_CTX_free(ctx);
    if (result != 1) {
        ERR_clear_error();
    }
    return result;
}

// MARK: Key construction

static BIGNUM *bn(const void *bytes, size_t len) {
    return bytes == NULL ? NULL : BN_bin2bn(bytes, (int)len, NULL);
}

static EVP_PKEY *pkey_from_params(const char *type, int selection, OSSL_PARAM_BLD *bld) {
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY *pkey = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params != NULL && ctx != NULL && EVP_PKEY_fromdata_init(ctx) == 1) {
        if (EVP_PKEY_fromdata(ctx, &pkey, selection, params) != 1) {
            pkey = NULL;
        }
    }
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return pkey;
}

/// Runs the library's consistency checks: the public check always, the pairwise (public/private match)
/// check when the key has a private part. Frees the key and returns NULL when a check fails.
static EVP_PKEY *checked(EVP_PKEY *pkey, int has_private) {
    if (pkey == NULL) return NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    int ok = ctx != NULL && EVP_PKEY_public_check(ctx) == 1;
    if (ok && has_private) {
        ok = EVP_PKEY_pairwise_check(ctx) == 1;
    }
    EVP_PKEY_CTX_free(ctx);
    if (!ok) {
        EVP_PKEY_free(pkey);
        return NULL;
    }
    return pkey;
}

struct evp_pkey_st *CTokengateShims_pkey_rsa(const void *n, size_t n_len, const void *e, size_t e_len,
                                             const void *d, size_t d_len, const void *p, size_t p_len,
                                             const void *q, size_t q_len, const void *dp, size_t dp_len,
                                             const void *dq, size_t dq_len, const void *qi, size_t qi_len) {
    int has_private = d != NULL;
    BIGNUM *nums[8] = {
        bn(n, n_len), bn(e, e_len), bn(d, d_len), bn(p, p_len), bn(q, q_len), bn(dp, dp_len), bn(dq, dq_len),
        bn(qi, qi_len),
    };
    static const char *names[8] = {
        OSSL_PKEY_PARAM_RSA_N, OSSL_PKEY_PARAM_RSA_E, OSSL_PKEY_PARAM_RSA_D, OSSL_PKEY_PARAM_RSA_FACTOR1,
        OSSL_PKEY_PARAM_RSA_FACTOR2, OSSL_PKEY_PARAM_RSA_EXPONENT1, OSSL_PKEY_PARAM_RSA_EXPONENT2,
        OSSL_PKEY_PARAM_RSA_COEFFICIENT1,
    };
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    int ok = bld != NULL && nums[0] != NULL && nums[1] != NULL;
    int count = has_private ? 8 : 2;
    for (int i = 0; ok && i < count; i++) {
        ok = nums[i] != NULL && OSSL_PARAM_BLD_push_BN(bld, names[i], nums[i]) == 1;
    }
    if (ok) {
        pkey = pkey_from_params("RSA", has_private ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, bld);
    }
    OSSL_PARAM_BLD_free(bld);
    for (int i = 0; i < 8; i++) {
        BN_clear_free(nums[i]);
    }
    pkey = checked(pkey, has_private);
    ERR_clear_error();
    return pkey;
}

struct evp_pkey_st *CTokengateShims_pkey_ec_p256(const void *x, const void *y, const void *d) {
    unsigned char point[65];
    point[0] = 0x04;  // uncompressed SEC1 point
    memcpy(point + 1, x, 32);
    memcpy(point + 33, y, 32);
    BIGNUM *priv = d == NULL ? NULL : BN_bin2bn(d, 32, NULL);
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    int ok = bld != NULL && (d == NULL || priv != NULL)
        && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) == 1
        && OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point)) == 1
        && (priv == NULL || OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, priv) == 1);
    if (ok) {
        pkey = pkey_from_params("EC", priv != NULL ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, bld);
    }
    OSSL_PARAM_BLD_free(bld);
    BN_clear_free(priv);
    pkey = checked(pkey, d != NULL);
    ERR_clear_error();
    return pkey;
}

struct evp_pkey_st *CTokengateShims_pkey_ed25519(const void *pub, const void *priv) {
    EVP_PKEY *pkey;
    if (priv == NULL) {
        pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, 32);
    } else {
        pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, 32);
        unsigned char derived[32];
        size_t len = sizeof(derived);
        if (pkey != NULL
            && (EVP_PKEY_get_raw_public_key(pkey, derived, &len) != 1 || len != 32
                || CRYPTO_memcmp(derived, pub, 32) != 0)) {
            EVP_PKEY_free(pkey);
            pkey = NULL;
        }
    }
    ERR_clear_error();
    return pkey;
}

struct evp_pkey_st *CTokengateShims_pkey_from_pem(const void *pem, size_t pem_len) {
    BIO *bio = BIO_new_mem_buf(pem, (int)pem_len);
    if (bio == NULL) return NULL;
    EVP_PKEY *pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    BIO_free(bio);
    ERR_clear_error();
    return pkey;
}

int CTokengateShims_pkey_describe(struct evp_pkey_st *pkey, int *kind, int *bits) {
    *kind = pkey_kind(pkey);
    *bits = EVP_PKEY_get_bits(pkey);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    int ok = ctx != NULL && EVP_PKEY_public_check(ctx) == 1;
    EVP_PKEY_CTX_free(ctx);
    ERR_clear_error();
    return ok ? 1 : 0;
}

void CTokengateShims_pkey_free(struct evp_pkey_st *pkey) {
    EVP_PKEY_free(pkey);
}

// MARK: Signing and key generation

int CTokengateShims_sign(struct evp_pkey_st *pkey, int scheme, const void *data, size_t data_len, void *out,
                         size_t *out_len) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_PKEY_CTX *pctx = NULL;
    unsigned char buffer[1024];
    size_t len = sizeof(buffer);
    int ok = ctx != NULL
        && EVP_DigestSignInit_ex(ctx, &pctx, scheme_digest(scheme), NULL, NULL, pkey, NULL) == 1
        && (scheme != CTokengateShims_SCHEME_PS256 || configure_pss(pctx))
        && EVP_DigestSign(ctx, NULL, &len, data, data_len) == 1 && len <= sizeof(buffer)
        && EVP_DigestSign(ctx, buffer, &len, data, data_len) == 1;
    EVP_MD_CTX_free(ctx);
    if (ok && scheme == CTokengateShims_SCHEME_ES256) {
        // DER ECDSA-Sig-Value → JWS r‖s, each left-padded to 32 bytes.
        const unsigned char *p = buffer;
        ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)len);
        ok = sig != NULL && *out_len >= 64;
        if (ok) {
            const BIGNUM *r = NULL;
            const BIGNUM *s = NULL;
            ECDSA_SIG_get0(sig, &r, &s);
            ok = BN_bn2binpad(r, out, 32) == 32 && BN_bn2binpad(s, (unsigned char *)out + 32, 32) == 32;
            *out_len = 64;
        }
        ECDSA_SIG_free(sig);
    } else if (ok) {
        ok = *out_len >= len;
        if (ok) {
            memcpy(out, buffer, len);
            *out_len = len;
        }
    }
    ERR_clear_error();
    return ok ? 1 : 0;
}

struct evp_pkey_st *CTokengateShims_keygen(int scheme) {
    EVP_PKEY_CTX *ctx = NULL;
    int ok = 0;
    switch (scheme) {
    case CTokengateShims_SCHEME_EDDSA:
        ctx = EVP_PKEY_CTX_new_from_name(NULL, "ED25519", NULL);
        ok = ctx != NULL && EVP_PKEY_keygen_init(ctx) == 1;
        break;
    case CTokengateShims_SCHEME_ES256:
        ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
        ok = ctx != NULL && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_CTX_set_group_name(ctx, "P-256") == 1;
        break;
    case CTokengateShims_SCHEME_RS256:
    case CTokengateShims_SCHEME_PS256:
        ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
        ok = ctx != NULL && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048) == 1;
        break;
    default: break;
    }
    EVP_PKEY *pkey = NULL;
    if (ok && EVP_PKEY_generate(ctx, &pkey) != 1) {
        pkey = NULL;
    }
    EVP_PKEY_CTX_free(ctx);
    ERR_clear_error();
    return pkey;
}

int CTokengateShims_pkey_get_bn(struct evp_pkey_st *pkey, const char *name, void *out, size_t capacity,
                                size_t *out_len, size_t pad_to) {
    BIGNUM *value = NULL;
    int ok = EVP_PKEY_get_bn_param(pkey, name, &value) == 1;
    if (ok) {
        size_t len = (size_t)BN_num_bytes(value);
        if (pad_to > len) len = pad_to;
        ok = len <= capacity && BN_bn2binpad(value, out, (int)len) == (int)len;
        *out_len = len;
    }
    BN_clear_free(value);
    ERR_clear_error();
    return ok ? 1 : 0;
}

int CTokengateShims_pkey_get_raw(struct evp_pkey_st *pkey, int private_part, void *out, size_t capacity,
                                 size_t *out_len) {
    size_t len = capacity;
    int ok = private_part ? EVP_PKEY_get_raw_private_key(pkey, out, &len) : EVP_PKEY_get_raw_public_key(pkey, out, &len);
    *out_len = len;
    ERR_clear_error();
    return ok == 1 ? 1 : 0;
}

int CTokengateShims_random(void *out, size_t len) {
    return RAND_bytes(out, (int)len) == 1 ? 1 : 0;
}

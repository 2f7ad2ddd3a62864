//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
#ifndef C_TOKENGATE_SHIMS_CRYPTO_H
#define C_TOKENGATE_SHIMS_CRYPTO_H

// MARK: Token crypto helpers (libcrypto).
//
// This header deliberately includes no OpenSSL header: key objects cross it as `struct evp_pkey_st *`
// (Swift sees an `OpaquePointer`, the same type `CTokengateOpenSSL` gives `EVP_PKEY *`), and byte
// buffers as `const void *` so Swift can pass raw buffer base addresses without rebinding.
//
// Thread safety: every `*_new` / `*_free` pair is single-owner; `CTokengateShims_hmac_verify`,
// `CTokengateShims_hmac_compute` and `CTokengateShims_verifier_verify` only *read* their key object and
// may run on any number of threads at once.

#include <stddef.h>

struct evp_pkey_st;

/// Signature schemes the verifier objects know. The values are part of the Swift/C contract only.
enum {
    CTokengateShims_SCHEME_EDDSA = 1,
    CTokengateShims_SCHEME_ES256 = 2,
    CTokengateShims_SCHEME_RS256 = 3,
    CTokengateShims_SCHEME_PS256 = 4,
};

/// Key kinds reported by `CTokengateShims_pkey_describe`.
enum {
    CTokengateShims_PKEY_OTHER = 0,
    CTokengateShims_PKEY_RSA = 1,
    CTokengateShims_PKEY_EC_P256 = 2,
    CTokengateShims_PKEY_ED25519 = 3,
    CTokengateShims_PKEY_EC_OTHER_CURVE = 4,
};

// MARK: HMAC with precomputed pads

/// An HMAC key with the inner and outer digest states already absorbed (RFC 2104: H(K^opad, H(K^ipad, m))).
/// Per call only the message and two final blocks are hashed; nothing is allocated.
typedef struct CTokengateShims_hmac_key CTokengateShims_hmac_key;

/// `digest_bits` is 160 (SHA-1: web frameworks' session cookies only), 256, 384 or 512. Keys longer than the block size are hashed first, as RFC 2104 says.
/// Returns NULL for an unknown digest or when out of memory. The caller keeps ownership of `key`; the
/// object keeps no copy of the raw key (only the two digest states), and is wiped on free.
CTokengateShims_hmac_key *CTokengateShims_hmac_key_new(int digest_bits, const void *key, size_t key_len);
void CTokengateShims_hmac_key_free(CTokengateShims_hmac_key *key);
/// The full tag length in bytes (20, 32, 48 or 64).
size_t CTokengateShims_hmac_tag_length(const CTokengateShims_hmac_key *key);
/// Writes the full tag (`CTokengateShims_hmac_tag_length` bytes) to `out`.
void CTokengateShims_hmac_compute(const CTokengateShims_hmac_key *key, const void *data, size_t data_len, void *out);
/// 1 when `tag` is exactly the full tag of `data`, else 0. The comparison is constant time
/// (`CRYPTO_memcmp`); a length mismatch returns 0 before any hashing (the length is public).
int CTokengateShims_hmac_verify(const CTokengateShims_hmac_key *key, const void *data, size_t data_len,
                                const void *tag, size_t tag_len);

/// SHA-256 of `data` into `out` (32 bytes). For PKCE (RFC 7636 S256): the token page compares a verifier's
/// digest with the challenge it sealed into an authorization code.
void CTokengateShims_sha256(const void *data, size_t data_len, void *out);
/// 1 when the `len` bytes at `a` and `b` are equal, else 0, in time that depends on `len` only
/// (`CRYPTO_memcmp`, the comparison `CTokengateShims_hmac_verify` uses).
int CTokengateShims_equal_constant_time(const void *a, const void *b, size_t len);

// MARK: AES-256-GCM (the token page's PKCE codes)

/// Key, nonce and tag lengths in bytes: a 256-bit key, the 96-bit nonce GCM is built for (NIST SP 800-38D
/// §5.2.1.1), and the full 128-bit tag (never truncated).
enum {
    CTokengateShims_AES256GCM_KEY_LENGTH = 32,
    CTokengateShims_AES256GCM_NONCE_LENGTH = 12,
    CTokengateShims_AES256GCM_TAG_LENGTH = 16,
};

/// Encrypts `plaintext` and authenticates it with `aad`: writes `plaintext_len` bytes to `ciphertext` and
/// the 16-byte tag to `tag`. Returns 1 on success, 0 on any failure (the error queue is cleared, and
/// `ciphertext` is wiped). The caller owns every buffer and keeps it alive for the call; nothing is
/// retained. A nonce must never be used twice with one key: the caller draws a fresh random one per call.
/// Safe on any number of threads at once (each call has its own context).
int CTokengateShims_aes256gcm_seal(const void *key, const void *nonce, const void *aad, size_t aad_len,
                                   const void *plaintext, size_t plaintext_len, void *ciphertext, void *tag);
/// Checks `tag` over `aad` and `ciphertext` and decrypts: 1 when the tag matches, with `ciphertext_len`
/// bytes of plaintext in `plaintext`; 0 otherwise, with `plaintext` wiped (GCM decrypts before it knows
/// whether the tag matches; those bytes never reach the caller). The same ownership and threading rules as
/// `CTokengateShims_aes256gcm_seal`.
int CTokengateShims_aes256gcm_open(const void *key, const void *nonce, const void *aad, size_t aad_len,
                                   const void *ciphertext, size_t ciphertext_len, const void *tag, void *plaintext);
/// Overwrites `len` bytes with zeros in a way the compiler may not drop (`OPENSSL_cleanse`): for key bytes a
/// Swift object held.
void CTokengateShims_cleanse(void *data, size_t len);

// MARK: Asymmetric verification with a prepared context

/// A public key plus a digest-verify context initialised once (algorithm fetch, padding, salt length).
/// Per call the context is copied (`EVP_MD_CTX_copy_ex`), which skips the provider fetches that make
/// `EVP_DigestVerifyInit_ex` cost more than the verification itself for Ed25519 and P-256.
typedef struct CTokengateShims_verifier CTokengateShims_verifier;

/// Takes its own reference on `pkey` (the caller may free its reference afterwards). Returns NULL if
/// the key does not fit the scheme.
CTokengateShims_verifier *CTokengateShims_verifier_new(struct evp_pkey_st *pkey, int scheme);
void CTokengateShims_verifier_free(CTokengateShims_verifier *verifier);
/// 1 when the signature is valid, 0 otherwise (including malformed signatures and library errors,
/// whose error queue entries are cleared so they never leak into another caller's error report).
/// For ES256 `sig` must be the JWS form: exactly 64 bytes, r‖s big-endian; it is re-encoded to DER
/// on the stack. DER input is therefore never accepted.
int CTokengateShims_verifier_verify(const CTokengateShims_verifier *verifier, const void *data, size_t data_len,
                                    const void *sig, size_t sig_len);

// MARK: Key construction (load time only)

/// RSA public key from big-endian modulus and exponent.
struct evp_pkey_st *CTokengateShims_pkey_rsa(const void *n, size_t n_len, const void *e, size_t e_len,
                                             const void *d, size_t d_len, const void *p, size_t p_len,
                                             const void *q, size_t q_len, const void *dp, size_t dp_len,
                                             const void *dq, size_t dq_len, const void *qi, size_t qi_len);
/// P-256 key from 32-byte coordinates, plus the 32-byte private scalar or NULL. The point is checked
/// to be on the curve; a private key is checked against the point.
struct evp_pkey_st *CTokengateShims_pkey_ec_p256(const void *x, const void *y, const void *d);
/// Ed25519 key from the 32-byte public key, plus the 32-byte private seed or NULL. With a private seed
/// the derived public key must equal `pub`.
struct evp_pkey_st *CTokengateShims_pkey_ed25519(const void *pub, const void *priv);
/// A SubjectPublicKeyInfo ("BEGIN PUBLIC KEY") PEM. Returns NULL for anything else.
struct evp_pkey_st *CTokengateShims_pkey_from_pem(const void *pem, size_t pem_len);
/// Kind (`CTokengateShims_PKEY_*`) and size in bits. Runs the library's public-key check too:
/// returns 1 when the key passes it, 0 when not.
int CTokengateShims_pkey_describe(struct evp_pkey_st *pkey, int *kind, int *bits);
void CTokengateShims_pkey_free(struct evp_pkey_st *pkey);

// MARK: Signing and key generation (CLI and tests only; never on the request path)

/// Signs `data`; writes the JWS signature form (ES256: raw r‖s, 64 bytes) to `out`. `*out_len` is the
/// capacity on input and the length on output. Returns 1 on success.
int CTokengateShims_sign(struct evp_pkey_st *pkey, int scheme, const void *data, size_t data_len, void *out,
                         size_t *out_len);
/// A fresh key for the scheme (RSA: 2048 bits, e = 65537). NULL on failure.
struct evp_pkey_st *CTokengateShims_keygen(int scheme);
/// A big-number parameter (e.g. "n", "e", "d", "rsa-factor1", "qx", "priv") as big-endian bytes,
/// left-padded with zeros to `pad_to` when `pad_to` > 0. Returns 1 on success.
int CTokengateShims_pkey_get_bn(struct evp_pkey_st *pkey, const char *name, void *out, size_t capacity,
                                size_t *out_len, size_t pad_to);
/// Raw Ed25519 public (`private_part` = 0) or private key (32 bytes). Returns 1 on success.
int CTokengateShims_pkey_get_raw(struct evp_pkey_st *pkey, int private_part, void *out, size_t capacity,
                                 size_t *out_len);
/// Cryptographically secure random bytes. Returns 1 on success.
int CTokengateShims_random(void *out, size_t len);

#endif

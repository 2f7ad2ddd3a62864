//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// AES-256-GCM through the EVP API: one call to seal, one to open, so that Swift never holds an
// EVP_CIPHER_CTX nor has to get the order of the EVP calls right (see the comments in each function).
//
// Not on the hot path: the token page seals one code per PKCE login and opens one per redemption. A fresh
// context per call is simpler than sharing one (an EVP_CIPHER_CTX is not safe for concurrent use) and costs
// one allocation, which is nothing next to a login.

#include "CTokengateShims_crypto.h"

#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

int CTokengateShims_aes256gcm_seal(const void *key, const void *nonce, const void *aad, size_t aad_len,
                                   const void *plaintext, size_t plaintext_len, void *ciphertext, void *tag) {
    if (aad_len > INT_MAX || plaintext_len > INT_MAX) {
        return 0;
    }
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL) {
        ERR_clear_error();
        return 0;
    }
    int ok = 0;
    int aad_out = 0;
    int len = 0;  // Stays 0 when the update is skipped.
    int final_len = 0;
    // Order matters, as EVP's GCM mode requires: key and nonce at init (the default nonce length is the
    // 12 bytes we use, so no EVP_CTRL_GCM_SET_IVLEN), then the associated data (an update with a NULL
    // output), then the plaintext, then final (which writes nothing for GCM but completes the tag), and only
    // then the tag can be read.
    if (EVP_EncryptInit_ex2(ctx, EVP_aes_256_gcm(), key, nonce, NULL) != 1) goto done;
    if (aad_len > 0 && EVP_EncryptUpdate(ctx, NULL, &aad_out, aad, (int)aad_len) != 1) goto done;
    // Skipped when empty: an update with a NULL output is read as associated data, not as plaintext.
    if (plaintext_len > 0 && EVP_EncryptUpdate(ctx, ciphertext, &len, plaintext, (int)plaintext_len) != 1) goto done;
    if ((size_t)len != plaintext_len) goto done;  // GCM is a stream mode: all of it comes out at once.
    if (EVP_EncryptFinal_ex(ctx, (unsigned char *)ciphertext + len, &final_len) != 1 || final_len != 0) goto done;
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, CTokengateShims_AES256GCM_TAG_LENGTH, tag) != 1) goto done;
    ok = 1;
done:
    // EVP_CIPHER_CTX_free wipes the key schedule it held.
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) {
        ERR_clear_error();
        // Nothing half-made leaves: a caller that ignored the result would find zeros, not plaintext.
        if (plaintext_len > 0) OPENSSL_cleanse(ciphertext, plaintext_len);
    }
    return ok;
}

int CTokengateShims_aes256gcm_open(const void *key, const void *nonce, const void *aad, size_t aad_len,
                                   const void *ciphertext, size_t ciphertext_len, const void *tag, void *plaintext) {
    if (aad_len > INT_MAX || ciphertext_len > INT_MAX) {
        return 0;
    }
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL) {
        ERR_clear_error();
        return 0;
    }
    int ok = 0;
    int aad_out = 0;
    int len = 0;
    int final_len = 0;
    // Order matters: key and nonce, the associated data, the ciphertext, then the expected tag, which must
    // be set before EVP_DecryptFinal_ex: final is where the tag is compared (in constant time), and its
    // result is the only verdict. The update has already written plaintext by then, unauthenticated: it is
    // wiped below unless final said the tag matched.
    if (EVP_DecryptInit_ex2(ctx, EVP_aes_256_gcm(), key, nonce, NULL) != 1) goto done;
    if (aad_len > 0 && EVP_DecryptUpdate(ctx, NULL, &aad_out, aad, (int)aad_len) != 1) goto done;
    if (ciphertext_len > 0 && EVP_DecryptUpdate(ctx, plaintext, &len, ciphertext, (int)ciphertext_len) != 1) goto done;
    if ((size_t)len != ciphertext_len) goto done;
    // EVP_CIPHER_CTX_ctrl takes a non-const pointer for both directions; SET_TAG only reads it.
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, CTokengateShims_AES256GCM_TAG_LENGTH, (void *)tag) != 1) goto done;
    if (EVP_DecryptFinal_ex(ctx, (unsigned char *)plaintext + len, &final_len) != 1 || final_len != 0) goto done;
    ok = 1;
done:
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) {
        ERR_clear_error();
        if (ciphertext_len > 0) OPENSSL_cleanse(plaintext, ciphertext_len);
    }
    return ok;
}

void CTokengateShims_cleanse(void *data, size_t len) {
    OPENSSL_cleanse(data, len);
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
#include "CTokengateShims_tls.h"

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

// MARK: Macro wrappers

int CTokengateShims_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

int CTokengateShims_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}

long CTokengateShims_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }

long CTokengateShims_SSL_CTX_set_read_ahead(SSL_CTX *ctx, int yes) { return SSL_CTX_set_read_ahead(ctx, yes); }

int CTokengateShims_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) {
    return (int)SSL_CTX_set1_groups_list(ctx, list);
}

int CTokengateShims_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *cert) {
    return (int)SSL_CTX_add1_chain_cert(ctx, cert);
}

void CTokengateShims_SSL_CTX_set_tlsext_servername_callback(SSL_CTX *ctx, CTokengateShims_servername_callback cb,
                                                            void *arg) {
    SSL_CTX_set_tlsext_servername_callback(ctx, cb);
    SSL_CTX_set_tlsext_servername_arg(ctx, arg);
}

int CTokengateShims_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

void CTokengateShims_BIO_set_retry_read(BIO *bio) { BIO_set_retry_read(bio); }

void CTokengateShims_BIO_clear_retry_flags(BIO *bio) { BIO_clear_retry_flags(bio); }

// MARK: ALPN, server side

struct CTokengateShims_alpn_server_config {
    unsigned char *wire;
    size_t length;
    int no_overlap_continues;
};

CTokengateShims_alpn_server_config *CTokengateShims_alpn_server_config_new(const unsigned char *wire, size_t length,
                                                                           int no_overlap_continues) {
    CTokengateShims_alpn_server_config *config = calloc(1, sizeof(*config));
    if (config == NULL) {
        return NULL;
    }
    config->wire = malloc(length > 0 ? length : 1);
    if (config->wire == NULL) {
        free(config);
        return NULL;
    }
    memcpy(config->wire, wire, length);
    config->length = length;
    config->no_overlap_continues = no_overlap_continues;
    return config;
}

void CTokengateShims_alpn_server_config_free(CTokengateShims_alpn_server_config *config) {
    if (config == NULL) {
        return;
    }
    free(config->wire);
    free(config);
}

/// Server preference: walk the server's list in order and take the first name the client also sent.
/// `*out` points into the client's list (`in`), which OpenSSL keeps alive for the handshake.
/// A malformed client list (a length running past the end) is treated as "no overlap".
static int tokengate_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                                 unsigned int inlen, void *arg) {
    (void)ssl;
    const CTokengateShims_alpn_server_config *config = arg;
    size_t s = 0;
    while (s < config->length) {
        size_t slen = config->wire[s];
        const unsigned char *sname = config->wire + s + 1;
        size_t c = 0;
        while (c < inlen) {
            size_t clen = in[c];
            if (clen == 0 || c + 1 + clen > inlen) {
                break;
            }
            if (clen == slen && memcmp(in + c + 1, sname, slen) == 0) {
                *out = in + c + 1;
                *outlen = (unsigned char)clen;
                return SSL_TLSEXT_ERR_OK;
            }
            c += 1 + clen;
        }
        s += 1 + slen;
    }
    return config->no_overlap_continues ? SSL_TLSEXT_ERR_NOACK : SSL_TLSEXT_ERR_ALERT_FATAL;
}

void CTokengateShims_SSL_CTX_set_alpn_server(SSL_CTX *ctx, CTokengateShims_alpn_server_config *config) {
    SSL_CTX_set_alpn_select_cb(ctx, tokengate_alpn_select, config);
}

// MARK: Keys and certificates

EVP_PKEY *CTokengateShims_EVP_EC_gen_P256(void) { return EVP_EC_gen("P-256"); }

GENERAL_NAMES *CTokengateShims_GENERAL_NAMES_new(void) { return GENERAL_NAMES_new(); }

static int tokengate_push_name(GENERAL_NAMES *names, GENERAL_NAME *name) {
    if (name == NULL) {
        return 0;
    }
    if (sk_GENERAL_NAME_push(names, name) <= 0) {
        GENERAL_NAME_free(name);
        return 0;
    }
    return 1;
}

int CTokengateShims_GENERAL_NAMES_add_dns(GENERAL_NAMES *names, const char *dns) {
    ASN1_IA5STRING *value = ASN1_IA5STRING_new();
    if (value == NULL) {
        return 0;
    }
    if (!ASN1_STRING_set(value, dns, (int)strlen(dns))) {
        ASN1_IA5STRING_free(value);
        return 0;
    }
    GENERAL_NAME *name = GENERAL_NAME_new();
    if (name == NULL) {
        ASN1_IA5STRING_free(value);
        return 0;
    }
    GENERAL_NAME_set0_value(name, GEN_DNS, value);
    return tokengate_push_name(names, name);
}

int CTokengateShims_GENERAL_NAMES_add_ip(GENERAL_NAMES *names, const char *ip) {
    return tokengate_push_name(names, a2i_GENERAL_NAME(NULL, NULL, NULL, GEN_IPADD, ip, 0));
}

void CTokengateShims_GENERAL_NAMES_free(GENERAL_NAMES *names) { GENERAL_NAMES_free(names); }

int CTokengateShims_X509_add_subject_alt_names(X509 *cert, GENERAL_NAMES *names) {
    return X509_add1_ext_i2d(cert, NID_subject_alt_name, names, 0, X509V3_ADD_DEFAULT) == 1;
}

int CTokengateShims_X509_add_ext_text(X509 *cert, int nid, const char *value) {
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, cert, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    if (ext == NULL) {
        return 0;
    }
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok == 1;
}

int CTokengateShims_X509_for_each_dns_san(X509 *cert, CTokengateShims_dns_name_callback cb, void *ctx) {
    GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    if (names == NULL) {
        return 0;
    }
    int visited = 0;
    for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *name = sk_GENERAL_NAME_value(names, i);
        if (name->type != GEN_DNS) {
            continue;
        }
        cb(ctx, ASN1_STRING_get0_data(name->d.dNSName), (size_t)ASN1_STRING_length(name->d.dNSName));
        visited++;
    }
    GENERAL_NAMES_free(names);
    return visited;
}

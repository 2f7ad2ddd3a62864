//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
#ifndef C_TOKENGATE_SHIMS_TLS_H
#define C_TOKENGATE_SHIMS_TLS_H

// MARK: TLS shims for TokengateTLS.
//
// Swift cannot call function-like C macros, and a few callbacks are simpler and allocation-free in C.
// Everything here is a thin wrapper; the policy (versions, ciphers, ALPN preference) lives in Swift.

#include <stddef.h>
#include <openssl/ssl.h>
#include <openssl/bio.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

// MARK: Option bits (`SSL_OP_BIT(n)` is a function-like macro, so Swift does not import these)

static const uint64_t CTokengateShims_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;
static const uint64_t CTokengateShims_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;
static const uint64_t CTokengateShims_SSL_OP_CIPHER_SERVER_PREFERENCE = SSL_OP_CIPHER_SERVER_PREFERENCE;

// MARK: Macro wrappers (SSL_CTX)

int CTokengateShims_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version);
int CTokengateShims_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version);
long CTokengateShims_SSL_CTX_set_mode(SSL_CTX *ctx, long mode);
long CTokengateShims_SSL_CTX_set_read_ahead(SSL_CTX *ctx, int yes);
int CTokengateShims_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list);
/// Adds `cert` to the chain sent after the leaf; takes its own reference (the caller still frees `cert`).
int CTokengateShims_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *cert);

/// The SNI callback: `int cb(SSL *ssl, int *alert, void *arg)`; return SSL_TLSEXT_ERR_OK to continue.
typedef int (*CTokengateShims_servername_callback)(SSL *ssl, int *alert, void *arg);
void CTokengateShims_SSL_CTX_set_tlsext_servername_callback(SSL_CTX *ctx, CTokengateShims_servername_callback cb,
                                                            void *arg);

// MARK: Macro wrappers (SSL)

int CTokengateShims_SSL_set_tlsext_host_name(SSL *ssl, const char *name);

// MARK: Macro wrappers (BIO)

void CTokengateShims_BIO_set_retry_read(BIO *bio);
void CTokengateShims_BIO_clear_retry_flags(BIO *bio);

// MARK: ALPN, server side

/// The server's ALPN preference list in wire format, plus what to do when the client's list has no overlap.
/// Owned by the Swift `TLSServerContext`; it must outlive every `SSL_CTX` it is installed on.
typedef struct CTokengateShims_alpn_server_config CTokengateShims_alpn_server_config;

/// Copies `wire` (length-prefixed protocol names, the ALPN wire format). `no_overlap_continues`: 1 = finish the
/// handshake without ALPN when nothing matches (SSL_TLSEXT_ERR_NOACK), 0 = fail it with no_application_protocol.
CTokengateShims_alpn_server_config *CTokengateShims_alpn_server_config_new(const unsigned char *wire, size_t length,
                                                                           int no_overlap_continues);
void CTokengateShims_alpn_server_config_free(CTokengateShims_alpn_server_config *config);
/// Installs a select callback that picks the first protocol of the *server's* list that the client offered.
void CTokengateShims_SSL_CTX_set_alpn_server(SSL_CTX *ctx, CTokengateShims_alpn_server_config *config);

// MARK: Keys and certificates

/// A fresh EC P-256 key (EVP_EC_gen is a macro over a variadic function).
EVP_PKEY *CTokengateShims_EVP_EC_gen_P256(void);

/// Builds a subjectAltName extension one name at a time. `add_ip` takes an IPv4/IPv6 literal.
GENERAL_NAMES *CTokengateShims_GENERAL_NAMES_new(void);
int CTokengateShims_GENERAL_NAMES_add_dns(GENERAL_NAMES *names, const char *dns);
int CTokengateShims_GENERAL_NAMES_add_ip(GENERAL_NAMES *names, const char *ip);
void CTokengateShims_GENERAL_NAMES_free(GENERAL_NAMES *names);
/// Adds `names` as the subjectAltName extension of `cert` (not critical). Returns 1 on success.
int CTokengateShims_X509_add_subject_alt_names(X509 *cert, GENERAL_NAMES *names);
/// Adds an extension from its OpenSSL config text, e.g. (NID_basic_constraints, "critical,CA:FALSE").
int CTokengateShims_X509_add_ext_text(X509 *cert, int nid, const char *value);

/// Calls `cb(ctx, name, length)` for each DNS name in the certificate's subjectAltName, in order.
/// Returns the number of names visited. Names are not NUL-terminated and may contain any byte; the caller
/// validates them.
typedef void (*CTokengateShims_dns_name_callback)(void *ctx, const unsigned char *name, size_t length);
int CTokengateShims_X509_for_each_dns_san(X509 *cert, CTokengateShims_dns_name_callback cb, void *ctx);

#endif

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL
internal import CTokengateShims

/// The one TLS policy tokengate speaks, applied to every `SSL_CTX` it creates (server and client).
///
/// - TLS 1.2 and 1.3 only; a server may raise the floor to 1.3 (``TLSMinimumVersion``), never lower it.
/// - TLS 1.2: ECDHE key exchange with AEAD ciphers only (AES-GCM, ChaCha20-Poly1305); no CBC, no RSA key
///   transport, no DHE. TLS 1.3 suites are all AEAD by design; the list is pinned anyway.
/// - No renegotiation (`SSL_OP_NO_RENEGOTIATION`), no compression, no 0-RTT (`max_early_data` 0 both ways).
/// - Session tickets stay on (stateless resumption is safe without 0-RTT).
enum TLSPolicy {
    static let tls12Ciphers =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
        + "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
        + "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
    static let tls13Suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
    static let groups = "X25519:P-256:P-384"

    /// The largest plaintext per TLS record (RFC 8446 §5.1); writes are cut into pieces of this size.
    static let maxRecordPlaintext = 16_384
    /// Worst-case bytes a record adds around its plaintext: 5 header + 8 explicit nonce + 16 tag (TLS 1.2
    /// AES-GCM); TLS 1.3 adds 5 + 1 + 16. Used only to size the outgoing buffer in one allocation.
    static let maxRecordOverhead = 29

    /// Creates an `SSL_CTX` for `method` with the policy applied and `minimumVersion` as the protocol floor.
    /// The caller owns the result (`SSL_CTX_free`).
    static func makeContext(server: Bool, minimumVersion: TLSMinimumVersion = .tls12) throws(TLSError) -> OpaquePointer {
        ERR_clear_error()
        guard let context = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()) else {
            throw TLSError(
                code: .internalError,
                message: "SSL_CTX_new failed: \(OpenSSLErrorQueue.drainReasons(fallback: "out of memory"))"
            )
        }
        do {
            try Self.apply(to: context, server: server, minimumVersion: minimumVersion)
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        return context
    }

    private static func apply(
        to context: OpaquePointer,
        server: Bool,
        minimumVersion: TLSMinimumVersion
    ) throws(TLSError) {
        func check(_ ok: Bool, _ what: String) throws(TLSError) {
            guard ok else {
                throw TLSError(
                    code: .internalError,
                    message: "\(what) failed: \(OpenSSLErrorQueue.drainReasons(fallback: "unknown reason"))"
                )
            }
        }
        try check(CTokengateShims_SSL_CTX_set_min_proto_version(context, minimumVersion.protocolVersion) == 1, "min version")
        try check(CTokengateShims_SSL_CTX_set_max_proto_version(context, TLS1_3_VERSION) == 1, "max version")
        try check(SSL_CTX_set_cipher_list(context, Self.tls12Ciphers) == 1, "TLS 1.2 cipher list")
        try check(SSL_CTX_set_ciphersuites(context, Self.tls13Suites) == 1, "TLS 1.3 suites")
        try check(CTokengateShims_SSL_CTX_set1_groups_list(context, Self.groups) == 1, "groups")

        var options = CTokengateShims_SSL_OP_NO_RENEGOTIATION | CTokengateShims_SSL_OP_NO_COMPRESSION
        if server {
            options |= CTokengateShims_SSL_OP_CIPHER_SERVER_PREFERENCE
        }
        _ = SSL_CTX_set_options(context, options)
        try check(SSL_CTX_set_max_early_data(context, 0) == 1, "max early data")
        try check(SSL_CTX_set_recv_max_early_data(context, 0) == 1, "recv max early data")

        // RELEASE_BUFFERS: idle keep-alive connections give their 16 KiB+ record buffers back (what nginx does).
        // ACCEPT_MOVING_WRITE_BUFFER: a retried SSL_write may pass a different pointer (defensive: our BIO
        // never asks for a write retry). Read-ahead lets one BIO read pull many records at once from the
        // ByteBuffer we already hold, instead of a 5-byte header read plus a body read per record.
        _ = CTokengateShims_SSL_CTX_set_mode(
            context,
            Int(SSL_MODE_RELEASE_BUFFERS) | Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER)
        )
        _ = CTokengateShims_SSL_CTX_set_read_ahead(context, 1)
    }

    /// Encodes ALPN names in the wire format (each name prefixed by its one-byte length).
    static func alpnWireFormat(_ protocols: [String]) throws(TLSError) -> [UInt8] {
        var wire: [UInt8] = []
        for name in protocols {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count), bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw TLSError(
                    code: .invalidConfiguration,
                    message: "ALPN protocol names must be 1–255 printable ASCII bytes; got \(bytes.count) bytes"
                )
            }
            wire.append(UInt8(bytes.count))
            wire.append(contentsOf: bytes)
        }
        return wire
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL
internal import CTokengateShims
#if canImport(Glibc)
import Glibc
#endif

// MARK: Loading one certificate source into an SSL_CTX.

extension TLSServerContext {
    /// What loading one ``TLSCertificateSource`` found out.
    struct LoadedCertificate {
        /// The DNS subjectAltNames of the leaf, in certificate order.
        var dnsNames: [String]
        /// The leaf's subject common name, read only when it has no DNS subjectAltName.
        var commonName: String?
        /// Non-fatal findings (expired or not yet valid).
        var warnings: [TLSError]
        /// The leaf's `notAfter`, in seconds since the epoch (`nil` when OpenSSL cannot convert it).
        var notAfter: Int64?
    }

    /// The most certificates accepted in one chain file (leaf + intermediates); real chains have 2–4.
    static let maximumChainLength = 10

    /// Loads the certificate chain and key of `source` into `context` and checks that they belong together.
    ///
    /// Order of C calls: the leaf goes in with `SSL_CTX_use_certificate` before any `add1_chain_cert` (the
    /// chain is attached to the current leaf), and the key is checked against the leaf with
    /// `X509_check_private_key` before `SSL_CTX_use_PrivateKey`, so that a mismatch gets its own message
    /// instead of OpenSSL's generic one.
    static func load(_ source: TLSCertificateSource, into context: OpaquePointer) throws(TLSError) -> LoadedCertificate
    {
        let certificatePath = source.certificatePath
        let keyPath = source.privateKeyPath

        let certificateBytes = try PEMFile.readAll(path: certificatePath)
        guard PEMFile.looksLikePEM(certificateBytes) else {
            throw TLSError(code: .notPEM, message: "\(certificatePath) is not PEM (no '-----BEGIN' line)")
        }
        let chain = try Self.parseCertificates(certificateBytes, path: certificatePath)
        defer { chain.forEach { X509_free($0) } }
        let leaf = chain[0]

        var keyBytes = try PEMFile.readAll(path: keyPath)
        defer { PEMFile.wipe(&keyBytes) }
        guard PEMFile.looksLikePEM(keyBytes) else {
            throw TLSError(code: .notPEM, message: "\(keyPath) is not PEM (no '-----BEGIN' line)")
        }
        let key = try Self.parsePrivateKey(keyBytes, path: keyPath)
        defer { EVP_PKEY_free(key) }

        ERR_clear_error()
        guard X509_check_private_key(leaf, key) == 1 else {
            ERR_clear_error()
            throw TLSError(
                code: .keyMismatch,
                message: "the private key in \(keyPath) does not match the certificate in \(certificatePath)"
            )
        }

        ERR_clear_error()
        guard SSL_CTX_use_certificate(context, leaf) == 1 else {
            let reason = OpenSSLErrorQueue.drainReasons(fallback: "rejected")
            throw TLSError(code: .invalidCertificate, message: "\(certificatePath): \(reason)")
        }
        for intermediate in chain.dropFirst() {
            guard CTokengateShims_SSL_CTX_add1_chain_cert(context, intermediate) == 1 else {
                let reason = OpenSSLErrorQueue.drainReasons(fallback: "rejected")
                throw TLSError(code: .invalidCertificate, message: "\(certificatePath) (chain): \(reason)")
            }
        }
        guard SSL_CTX_use_PrivateKey(context, key) == 1, SSL_CTX_check_private_key(context) == 1 else {
            let reason = OpenSSLErrorQueue.drainReasons(fallback: "rejected")
            throw TLSError(code: .invalidPrivateKey, message: "\(keyPath): \(reason)")
        }

        var warnings: [TLSError] = []
        if X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0 {
            warnings.append(TLSError(code: .certificateExpired, message: "\(certificatePath) has expired"))
        } else if X509_cmp_current_time(X509_get0_notBefore(leaf)) > 0 {
            warnings.append(TLSError(code: .certificateExpired, message: "\(certificatePath) is not valid yet"))
        }
        let dnsNames = Self.dnsNames(of: leaf)
        return LoadedCertificate(
            dnsNames: dnsNames,
            commonName: dnsNames.isEmpty ? Self.commonName(of: leaf) : nil,
            warnings: warnings,
            notAfter: Self.notAfter(of: leaf)
        )
    }

    /// The certificate's `notAfter` as UNIX time: for the expiry metric, which an alert compares with now.
    static func notAfter(of certificate: OpaquePointer) -> Int64? {
        guard let time = X509_get0_notAfter(certificate) else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Int64(timegm(&parts))
    }

    /// Parses every certificate block; the first is the leaf. The caller frees the result.
    static func parseCertificates(_ bytes: [UInt8], path: String) throws(TLSError) -> [OpaquePointer] {
        var certificates: [OpaquePointer] = []
        let result: Result<Void, TLSError> = bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else {
                return .failure(TLSError(code: .internalError, message: "BIO_new_mem_buf failed"))
            }
            defer { BIO_free(bio) }
            while true {
                ERR_clear_error()
                guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else {
                    // Running out of PEM blocks ends the loop with PEM_R_NO_START_LINE; anything else is a
                    // block that is there but broken.
                    let last = ERR_peek_last_error()
                    let noMoreBlocks = ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE
                    if noMoreBlocks, !certificates.isEmpty {
                        ERR_clear_error()
                        return .success(())
                    }
                    let reason = OpenSSLErrorQueue.drainReasons(fallback: "no certificate")
                    return .failure(
                        TLSError(code: .invalidCertificate, message: "\(path): no parseable certificate: \(reason)")
                    )
                }
                certificates.append(certificate)
                guard certificates.count <= Self.maximumChainLength else {
                    return .failure(
                        TLSError(
                            code: .invalidCertificate,
                            message: "\(path) holds more than \(Self.maximumChainLength) certificates"
                        )
                    )
                }
            }
        }
        do {
            try result.get()
        } catch {
            certificates.forEach { X509_free($0) }
            throw error
        }
        return certificates
    }

    /// Parses an unencrypted private key. The password callback refuses, so an encrypted key fails here
    /// instead of OpenSSL prompting on the terminal of a server process.
    private static func parsePrivateKey(_ bytes: [UInt8], path: String) throws(TLSError) -> OpaquePointer {
        let key: OpaquePointer? = bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else {
                return nil
            }
            defer { BIO_free(bio) }
            ERR_clear_error()
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in -1 }, nil)
        }
        guard let key else {
            let reason = OpenSSLErrorQueue.drainReasons(fallback: "no private key")
            throw TLSError(
                code: .invalidPrivateKey,
                message: "\(path): no parseable unencrypted private key: \(reason)"
            )
        }
        return key
    }

    /// The DNS subjectAltNames of `certificate`. Names that are not printable ASCII are skipped (they cannot
    /// match a host name and should not reach logs).
    static func dnsNames(of certificate: OpaquePointer) -> [String] {
        final class Collector {
            var names: [String] = []
        }
        let collector = Collector()
        _ = CTokengateShims_X509_for_each_dns_san(
            certificate,
            { context, name, length in
                guard let context, let name else {
                    return
                }
                let bytes = UnsafeBufferPointer(start: name, count: length)
                guard !bytes.isEmpty, bytes.count <= 253, bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                    return
                }
                Unmanaged<Collector>.fromOpaque(context).takeUnretainedValue().names.append(
                    String(decoding: bytes, as: UTF8.self)
                )
            },
            Unmanaged.passUnretained(collector).toOpaque()
        )
        return collector.names
    }

    /// The last subject CN of `certificate` (the most specific, as `X509_check_host` reads it), when it is
    /// printable ASCII; `nil` otherwise. Only used for a certificate without DNS subjectAltNames.
    static func commonName(of certificate: OpaquePointer) -> String? {
        guard let subject = X509_get_subject_name(certificate) else { return nil }
        var last: Int32 = -1
        var position = X509_NAME_get_index_by_NID(subject, NID_commonName, -1)
        while position >= 0 {
            last = position
            position = X509_NAME_get_index_by_NID(subject, NID_commonName, position)
        }
        guard last >= 0, let entry = X509_NAME_get_entry(subject, last), let data = X509_NAME_ENTRY_get_data(entry),
            let bytes = ASN1_STRING_get0_data(data)
        else { return nil }
        let name = UnsafeBufferPointer(start: bytes, count: Int(ASN1_STRING_length(data)))
        guard !name.isEmpty, name.count <= 253, name.allSatisfy({ (0x21...0x7E).contains($0) }) else { return nil }
        return String(decoding: name, as: UTF8.self)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL
internal import CTokengateShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Self-signed certificates for the development default and for tests, built with libcrypto's X509 API
/// (no `openssl` command at run time).
///
/// The key is EC P-256. The certificate is X.509 v3 with a random 128-bit serial, valid from one hour ago
/// (clock skew) for `validityDays`, `CN` = the first host name, `basicConstraints critical CA:FALSE`,
/// `extendedKeyUsage serverAuth`, and subjectAltNames: a DNS name for each host name and an IP address for
/// each IP literal (`127.0.0.1`, `::1`, …). Signed with ECDSA-SHA256.
public enum SelfSignedCertificate {
    /// - Returns: the certificate and the PKCS#8 private key, both PEM.
    /// - Throws: ``TLSError`` with ``TLSError/Code/certificateGenerationFailed`` (also for empty or
    ///   malformed host names).
    public static func generate(
        hostnames: [String],
        validityDays: Int = 30
    ) throws -> (certificatePEM: String, privateKeyPEM: String) {
        guard !hostnames.isEmpty, (1...3650).contains(validityDays) else {
            throw Self.failure("need at least one host name and 1–3650 validity days")
        }
        for name in hostnames {
            let allowed = name.utf8.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
                    || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: ":")
                    || $0 == UInt8(ascii: "*")
            }
            guard allowed, (1...253).contains(name.utf8.count) else {
                throw Self.failure("host names must be DNS names or IP literals")
            }
        }

        ERR_clear_error()
        guard let key = CTokengateShims_EVP_EC_gen_P256() else {
            throw Self.failure("EC key generation failed")
        }
        defer { EVP_PKEY_free(key) }
        guard let certificate = X509_new() else {
            throw Self.failure("X509_new failed")
        }
        defer { X509_free(certificate) }

        guard X509_set_version(certificate, 2) == 1 else {  // 2 means v3
            throw Self.failure("X509_set_version")
        }
        var serial = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&serial, Int32(serial.count)) == 1 else {
            throw Self.failure("RAND_bytes")
        }
        serial[0] &= 0x7F  // a positive INTEGER
        serial[0] |= 0x01  // and never shorter than 16 bytes
        guard let serialNumber = BN_bin2bn(serial, Int32(serial.count), nil) else {
            throw Self.failure("BN_bin2bn")
        }
        defer { BN_free(serialNumber) }
        guard BN_to_ASN1_INTEGER(serialNumber, X509_get_serialNumber(certificate)) != nil else {
            throw Self.failure("serial number")
        }
        guard X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) != nil,
            X509_gmtime_adj(X509_getm_notAfter(certificate), validityDays * 86_400) != nil
        else {
            throw Self.failure("validity")
        }
        guard X509_set_pubkey(certificate, key) == 1 else {
            throw Self.failure("X509_set_pubkey")
        }

        let name = X509_get_subject_name(certificate)
        let commonName = Array(hostnames[0].utf8)
        guard X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, Int32(commonName.count), -1, 0) == 1,
            X509_set_issuer_name(certificate, name) == 1
        else {
            throw Self.failure("subject name")
        }

        guard let names = CTokengateShims_GENERAL_NAMES_new() else {
            throw Self.failure("GENERAL_NAMES_new")
        }
        defer { CTokengateShims_GENERAL_NAMES_free(names) }
        for host in hostnames {
            let added =
                Self.isIPLiteral(host)
                ? CTokengateShims_GENERAL_NAMES_add_ip(names, host)
                : CTokengateShims_GENERAL_NAMES_add_dns(names, host)
            guard added == 1 else {
                throw Self.failure("subjectAltName \(host)")
            }
        }
        guard CTokengateShims_X509_add_subject_alt_names(certificate, names) == 1,
            CTokengateShims_X509_add_ext_text(certificate, NID_basic_constraints, "critical,CA:FALSE") == 1,
            CTokengateShims_X509_add_ext_text(certificate, NID_ext_key_usage, "serverAuth") == 1,
            CTokengateShims_X509_add_ext_text(certificate, NID_subject_key_identifier, "hash") == 1
        else {
            throw Self.failure("extensions")
        }
        guard X509_sign(certificate, key, EVP_sha256()) > 0 else {
            throw Self.failure("X509_sign")
        }

        let certificatePEM = try Self.pem { PEM_write_bio_X509($0, certificate) }
        let keyPEM = try Self.pem { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) }
        return (certificatePEM, keyPEM)
    }

    /// Runs `write` against a memory BIO and returns what it wrote.
    private static func pem(_ write: (OpaquePointer) -> Int32) throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else {
            throw Self.failure("BIO_new")
        }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else {
            throw Self.failure("PEM encoding")
        }
        let length = Int(BIO_ctrl_pending(bio))
        var bytes = [UInt8](repeating: 0, count: length)
        guard BIO_read(bio, &bytes, Int32(length)) == Int32(length) else {
            throw Self.failure("BIO_read")
        }
        let text = String(decoding: bytes, as: UTF8.self)
        PEMFile.wipe(&bytes)
        return text
    }

    private static func isIPLiteral(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    private static func failure(_ step: String) -> TLSError {
        TLSError(
            code: .certificateGenerationFailed,
            message: "\(step): \(OpenSSLErrorQueue.drainReasons(fallback: "failed"))"
        )
    }
}

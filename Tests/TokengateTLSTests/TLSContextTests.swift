//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateOpenSSL
import Foundation
import Testing

@testable import TokengateTLS

@Suite struct TLSContextTests {
    @Test func unreadableCertificateNamesTheFile() throws {
        let source = TLSCertificateSource(certificatePath: "/nonexistent/cert.pem", privateKeyPath: "/nonexistent/k")
        let error = try #require(throws: TLSError.self) {
            try TLSServerContext(certificates: [source], alpnProtocols: ["http/1.1"])
        }
        #expect(error.code == .fileUnreadable)
        #expect(error.message.contains("/nonexistent/cert.pem"))
    }

    @Test func nonPEMFilesAreRejected() throws {
        let good = try TestCertificate.make(["localhost"])
        let directory = try TestDirectory.make()
        let der = directory + "/cert.der"
        try Data([0x30, 0x82, 0x01, 0x00, 0x01, 0x02]).write(to: URL(fileURLWithPath: der))
        let certError = try #require(throws: TLSError.self) {
            try TLSServerContext(
                certificates: [TLSCertificateSource(certificatePath: der, privateKeyPath: good.privateKeyPath)],
                alpnProtocols: []
            )
        }
        #expect(certError.code == .notPEM)
        #expect(certError.message.contains(der))

        let keyError = try #require(throws: TLSError.self) {
            try TLSServerContext(
                certificates: [TLSCertificateSource(certificatePath: good.certificatePath, privateKeyPath: der)],
                alpnProtocols: []
            )
        }
        #expect(keyError.code == .notPEM)
    }

    @Test func brokenPEMBlockIsAnInvalidCertificate() throws {
        let good = try TestCertificate.make(["localhost"])
        let path = try TestDirectory.make() + "/broken.pem"
        try "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        let error = try #require(throws: TLSError.self) {
            try TLSServerContext(
                certificates: [TLSCertificateSource(certificatePath: path, privateKeyPath: good.privateKeyPath)],
                alpnProtocols: []
            )
        }
        #expect(error.code == .invalidCertificate)
    }

    @Test func keyThatDoesNotMatchIsRejected() throws {
        let a = try TestCertificate.make(["a.example"])
        let b = try TestCertificate.make(["b.example"])
        let error = try #require(throws: TLSError.self) {
            try TLSServerContext(
                certificates: [
                    TLSCertificateSource(certificatePath: a.certificatePath, privateKeyPath: b.privateKeyPath)
                ],
                alpnProtocols: ["http/1.1"]
            )
        }
        #expect(error.code == .keyMismatch)
        #expect(error.message.contains(a.certificatePath) && error.message.contains(b.privateKeyPath))
        #expect(error.file == TLSError.CertificateFile(index: 0, isPrivateKey: true))
        #expect(!error.message.contains("PRIVATE KEY"))
    }

    @Test func expiredCertificateOnlyWarns() throws {
        let fresh = try TestCertificate.make(["old.example"])
        let expiredPath = try Self.rewriteExpired(fresh)
        let context = try TLSServerContext(
            certificates: [TLSCertificateSource(certificatePath: expiredPath, privateKeyPath: fresh.privateKeyPath)],
            alpnProtocols: ["http/1.1"]
        )
        #expect(context.warnings.map(\.code) == [.certificateExpired])
        #expect(context.warnings.map(\.file) == [TLSError.CertificateFile(index: 0, isPrivateKey: false)])
        #expect(context.warnings.first?.message.contains(expiredPath) == true)
        #expect(context.serverNames == [["old.example"]])
    }

    @Test func configurationErrors() throws {
        #expect(throws: TLSError.self) { try TLSServerContext(certificates: [], alpnProtocols: ["http/1.1"]) }
        let good = try TestCertificate.make(["localhost"])
        let error = try #require(throws: TLSError.self) {
            try TLSServerContext(certificates: [good.source], alpnProtocols: [""])
        }
        #expect(error.code == .invalidConfiguration)
        #expect(throws: TLSError.self) { try TLSClientContext(trustRootsPath: "/nonexistent/roots.pem") }
    }

    @Test func selfSignedCertificateCarriesDNSAndIPNames() throws {
        let generated = try SelfSignedCertificate.generate(hostnames: ["localhost", "127.0.0.1", "::1"])
        #expect(generated.certificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(generated.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let certificate = try TestCertificate.make(["localhost", "127.0.0.1", "::1"])
        let context = try TLSServerContext(certificates: [certificate.source], alpnProtocols: [])
        #expect(context.serverNames == [["localhost"]])
        #expect(throws: TLSError.self) { try SelfSignedCertificate.generate(hostnames: []) }
        #expect(throws: TLSError.self) { try SelfSignedCertificate.generate(hostnames: ["bad name,DNS:evil"]) }
    }

    @Test func serverNameMatching() {
        let matcher = TLSServerNameMatcher(serverNames: [
            ["default.example"],
            ["API.example.com", "*.apps.example.com"],
            ["api.example.com", "*.com", "x*.example.com"],
        ])
        #expect(matcher.certificateIndex(for: "api.example.com") == 1)
        #expect(matcher.certificateIndex(for: "API.EXAMPLE.COM.") == 1)
        #expect(matcher.certificateIndex(for: "shop.apps.example.com") == 1)
        #expect(matcher.certificateIndex(for: "a.b.apps.example.com") == nil)
        #expect(matcher.certificateIndex(for: "apps.example.com") == nil)
        #expect(matcher.certificateIndex(for: "example.com") == nil)
        #expect(matcher.certificateIndex(for: "xy.example.com") == nil)
        #expect(matcher.certificateIndex(for: "default.example") == 0)
        #expect(matcher.certificateIndex(for: "") == nil)
    }

    /// Re-signs a generated certificate with a notAfter in the past, through libcrypto.
    private static func rewriteExpired(_ certificate: TestCertificate) throws -> String {
        let certBIO = try #require(BIO_new_file(certificate.certificatePath, "r"))
        defer { BIO_free(certBIO) }
        let x509 = try #require(PEM_read_bio_X509(certBIO, nil, nil, nil))
        defer { X509_free(x509) }
        let keyBIO = try #require(BIO_new_file(certificate.privateKeyPath, "r"))
        defer { BIO_free(keyBIO) }
        let key = try #require(PEM_read_bio_PrivateKey(keyBIO, nil, nil, nil))
        defer { EVP_PKEY_free(key) }
        #expect(X509_gmtime_adj(X509_getm_notBefore(x509), -10 * 86_400) != nil)
        #expect(X509_gmtime_adj(X509_getm_notAfter(x509), -86_400) != nil)
        #expect(X509_sign(x509, key, EVP_sha256()) > 0)
        let path = try TestDirectory.make() + "/expired.pem"
        let out = try #require(BIO_new_file(path, "w"))
        #expect(PEM_write_bio_X509(out, x509) == 1)
        BIO_free(out)
        return path
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateTLS

/// What a certificate covers for a request's host (RFC 6125 §6.4), and which certificate's names a connection
/// gets from its SNI.
@Suite struct TLSCertificateNamesTests {
    func covers(_ names: TLSCertificateNames, _ host: String) -> Bool {
        var host = host
        return host.withUTF8 { names.covers(UnsafeRawBufferPointer($0)) }
    }

    @Test func exactNamesCompareWithoutCase() {
        let names = TLSCertificateNames(["API.example.com", "www.example.com."])
        #expect(self.covers(names, "api.example.com"))
        #expect(self.covers(names, "API.EXAMPLE.COM"))
        #expect(self.covers(names, "www.example.com"))
        #expect(!self.covers(names, "example.com"))
        #expect(!self.covers(names, "api.example.co"))
        #expect(!self.covers(names, "xapi.example.com"))
        #expect(!self.covers(names, ""))
    }

    @Test func aWildcardCoversExactlyOneLeftmostLabel() {
        let names = TLSCertificateNames(["*.Apps.example.com"])
        #expect(self.covers(names, "a.apps.example.com"))
        #expect(self.covers(names, "A-1.APPS.example.com"))
        #expect(!self.covers(names, "apps.example.com"))
        #expect(!self.covers(names, "a.b.apps.example.com"))
        #expect(!self.covers(names, ".apps.example.com"))
        #expect(!self.covers(names, "a.apps.example.com.evil"))
    }

    @Test func wildcardsThatAreNotAWholeLabelOrStandOverOneLabelCoverNothing() {
        let names = TLSCertificateNames(["a*.example.com", "*.com", "*", "*.", "*.*.example.com", "x.*.example.com", ""])
        #expect(names.isEmpty)
        for host in ["ab.example.com", "a.example.com", "example.com", "x.y.example.com", "x.z.example.com", "com"] {
            #expect(!self.covers(names, host), "\(host)")
        }
    }

    /// Two SNI-selected certificates and a default: each connection gets the names of the certificate its SNI
    /// selected, its own names and its configured `server_names` together; no SNI or an unknown name, the
    /// default's.
    @Test func theNamesFollowTheCertificateTheSNISelects() throws {
        let first = try TestCertificate.make(["default.test"])
        let second = try TestCertificate.make(["second.test", "*.apps.test"])
        let third = try TestCertificate.make(["inside.third.test"])
        let context = try TLSServerContext(
            certificates: [
                first.source,
                second.source,
                TLSCertificateSource(
                    certificatePath: third.certificatePath,
                    privateKeyPath: third.privateKeyPath,
                    serverNames: ["third.test"]
                ),
            ],
            alpnProtocols: ["http/1.1"]
        )
        #expect(context.certificateCount == 3)
        let cases: [(String?, String, Bool)] = [
            (nil, "default.test", true),
            (nil, "second.test", false),
            ("unknown.test", "default.test", true),
            ("second.test", "second.test", true),
            ("SECOND.test.", "x.apps.test", true),
            ("x.apps.test", "second.test", true),
            ("second.test", "default.test", false),
            ("third.test", "third.test", true),
            // The certificate's own name counts too: a client can have validated it.
            ("third.test", "inside.third.test", true),
            ("third.test", "second.test", false),
        ]
        for (serverName, host, covered) in cases {
            let names = context.certificateNames(forServerName: serverName)
            #expect(self.covers(names, host) == covered, "SNI \(serverName ?? "(none)"), host \(host)")
        }
    }

    /// A certificate without DNS subjectAltNames (made by `openssl req`, which adds none) covers its subject
    /// CN, as clients that accept such a certificate read it.
    @Test func aCertificateWithoutDNSNamesCoversItsCommonName() throws {
        let directory = try TestDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/O=tokengate tests/CN=cn-only.test", "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem",
        ]
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0)
        let other = try TestCertificate.make(["other.test"])
        let context = try TLSServerContext(
            certificates: [
                TLSCertificateSource(certificatePath: directory + "/cert.pem", privateKeyPath: directory + "/key.pem"),
                other.source,
            ],
            alpnProtocols: []
        )
        #expect(context.serverNames[0] == [])
        let names = context.certificateNames(forServerName: nil)
        #expect(self.covers(names, "cn-only.test"))
        #expect(!self.covers(names, "other.test"))
        #expect(!self.covers(names, "tokengate tests"))
    }
}

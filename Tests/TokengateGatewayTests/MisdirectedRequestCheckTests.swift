//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing
import TokengateTLS

@testable import TokengateGateway

/// Which `Host` values are compared with the connection's certificate, and how (the ports, dots and cases a
/// client may send).
@Suite struct MisdirectedRequestCheckTests {
    let names = TLSCertificateNames(["a.example.com", "*.apps.example.com"])

    func misdirected(_ host: String) -> Bool {
        var host = host
        return host.withUTF8 { MisdirectedRequestCheck.isMisdirected(host: UnsafeRawBufferPointer($0), names: self.names) }
    }

    @Test func aCoveredHostPassesWithAnyPortCaseOrTrailingDot() {
        for host in ["a.example.com", "A.Example.COM", "a.example.com:443", "a.example.com.", "a.example.com.:8443", "x.apps.example.com:1"] {
            #expect(!self.misdirected(host), "\(host)")
        }
    }

    @Test func anotherHostIsMisdirected() {
        for host in ["b.example.com", "b.example.com:443", "example.com", "a.example.com..", "x.y.apps.example.com", "apps.example.com", "localhost"] {
            #expect(self.misdirected(host), "\(host)")
        }
    }

    /// SNI cannot carry an address, and a request without a host names no origin: neither is compared.
    @Test func addressesAndAbsentHostsAreNotCompared() {
        for host in ["127.0.0.1", "127.0.0.1:8443", "[::1]", "[::1]:8443", "[2001:db8::1]", "", "."] {
            #expect(!self.misdirected(host), "\(host)")
        }
        // A name with a numeric label is still a name.
        #expect(self.misdirected("1.2.3.example"))
        #expect(self.misdirected("1x.2.3.4"))
    }
}

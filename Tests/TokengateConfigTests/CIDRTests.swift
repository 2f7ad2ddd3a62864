//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing

@testable import TokengateConfig

@Suite("CIDR")
struct CIDRTests {
    @Test("parsing")
    func parsing() {
        #expect(CIDR("127.0.0.1/32")?.description == "127.0.0.1/32")
        #expect(CIDR("127.0.0.1")?.prefixLength == 32)
        #expect(CIDR("10.0.0.0/8")?.family == .ipv4)
        #expect(CIDR("0.0.0.0/0")?.prefixLength == 0)
        #expect(CIDR("::1")?.prefixLength == 128)
        #expect(CIDR("fd00::/8")?.family == .ipv6)
        #expect(CIDR("::/0")?.prefixLength == 0)
        for bad in [
            "10.0.0.1/8", "/8", "10.0.0.0/33", "10.0.0.0/08", "10.0.0.0/", "10.0.0.0/-1", "10.0.0/8", "fd00::1/8",
            "::/129", "host.example/32", "", "10.0.0.0/8/8",
        ] {
            #expect(CIDR(bad) == nil, "\(bad)")
        }
    }

    @Test("membership")
    func membership() throws {
        let ten = try #require(CIDR("10.0.0.0/8"))
        #expect(ten.contains(ipAddress: "10.1.2.3"))
        #expect(ten.contains([10, 255, 255, 255]))
        #expect(!ten.contains(ipAddress: "11.0.0.1"))
        #expect(!ten.contains(ipAddress: "9.255.255.255"))
        #expect(ten.contains(ipAddress: "::ffff:10.1.2.3"))
        #expect(!ten.contains(ipAddress: "::10.1.2.3"))
        #expect(!ten.contains(ipAddress: "not an address"))
        #expect(!ten.contains([10, 0, 0]))

        let host = try #require(CIDR("127.0.0.1/32"))
        #expect(host.contains(ipAddress: "127.0.0.1"))
        #expect(!host.contains(ipAddress: "127.0.0.2"))

        let all = try #require(CIDR("0.0.0.0/0"))
        #expect(all.contains(ipAddress: "203.0.113.9"))
        #expect(!all.contains(ipAddress: "::1"))

        let ula = try #require(CIDR("fd00::/8"))
        #expect(ula.contains(ipAddress: "fd12:3456::1"))
        #expect(!ula.contains(ipAddress: "fe80::1"))
        #expect(!ula.contains(ipAddress: "10.0.0.1"))

        let odd = try #require(CIDR("2001:db8:8000::/33"))
        #expect(odd.contains(ipAddress: "2001:db8:8000::1"))
        #expect(!odd.contains(ipAddress: "2001:db8:7fff::1"))

        let low = try #require(CIDR("::1/128"))
        #expect(low.contains(ipAddress: "::1"))
        #expect(!low.contains(ipAddress: "::2"))
    }
}

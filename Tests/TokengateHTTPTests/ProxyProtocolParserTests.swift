//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing
import TokengateHTTP

@Suite struct ProxyProtocolParserTests {
    private func v2(command: UInt8 = 0x21, family: UInt8, block: [UInt8]) -> [UInt8] {
        [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, command, family,
         UInt8(block.count >> 8), UInt8(block.count & 0xFF)] + block
    }

    @Test func version1LinesGiveTheSourceAddress() {
        let line = Array("PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n".utf8)
        #expect(ProxyProtocolParser.parse(line + Array("\u{16}\u{03}".utf8)) == .header(source: "192.0.2.7", length: line.count))
        let six = Array("PROXY TCP6 2001:DB8:0:0::1 2001:db8::2 1 65535\r\n".utf8)
        #expect(ProxyProtocolParser.parse(six) == .header(source: "2001:db8::1", length: six.count), "canonical text")
        let unknown = Array("PROXY UNKNOWN whatever follows\r\n".utf8)
        #expect(ProxyProtocolParser.parse(unknown) == .header(source: nil, length: unknown.count))
    }

    @Test func everyPrefixOfAValidHeaderIsIncomplete() {
        let headers = [
            Array("PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n".utf8),
            self.v2(family: 0x11, block: [192, 0, 2, 9, 10, 0, 0, 1, 0x1F, 0x90, 0x01, 0xBB]),
        ]
        for header in headers {
            for cut in 0..<header.count {
                #expect(ProxyProtocolParser.parse(header.prefix(cut)) == .incomplete, "\(cut) bytes")
            }
        }
    }

    @Test func version2GivesTheSourceAddressAndSkipsTLVs() {
        let tlv: [UInt8] = [0x05, 0x00, 0x03, 0x61, 0x62, 0x63]  // PP2_TYPE_UNIQUE_ID "abc"
        let four = self.v2(family: 0x11, block: [192, 0, 2, 9, 10, 0, 0, 1, 0x1F, 0x90, 0x01, 0xBB] + tlv)
        #expect(ProxyProtocolParser.parse(four + [0x16, 0x03]) == .header(source: "192.0.2.9", length: four.count))
        var address: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [5]
        address += [UInt8](repeating: 0, count: 16) + [0, 1, 0, 2]
        let six = self.v2(family: 0x21, block: address)
        #expect(ProxyProtocolParser.parse(six) == .header(source: "2001:db8::5", length: six.count))
        let local = self.v2(command: 0x20, family: 0x00, block: [])
        #expect(ProxyProtocolParser.parse(local) == .header(source: nil, length: 16), "LOCAL: the peer's address")
        let unix = self.v2(family: 0x31, block: [UInt8](repeating: 0, count: 216))
        #expect(ProxyProtocolParser.parse(unix) == .header(source: nil, length: 232))
    }

    /// Whatever a client or a broken balancer sends, the answer is a refusal naming the rule — never a crash,
    /// never an address, never a wait past the limits.
    @Test(arguments: [
        "GET / HTTP/1.1\r\n", "\u{16}\u{03}\u{01}", "PROXY", "PROXX TCP4", "proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r", "PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", "PROXY TCP4 ::1 5.6.7.8 1 2\r\n",
        "PROXY TCP6 1.2.3.4 ::1 1 2\r\n", "PROXY TCP4 1.2.3.04 5.6.7.8 1 2\r\n", "PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", "PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", "PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY TCP4 1.2.3.4\u{0} 5.6.7.8 1 2\r\n", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", "PROXY \r\n",
        "PROXY TCP4 " + String(repeating: "1", count: 120),
        "PROXY TCP4 " + String(repeating: "1", count: 95) + "\r\n",
    ])
    func hostileVersion1InputIsRefused(text: String) {
        guard case .invalid = ProxyProtocolParser.parse(Array(text.utf8)) else {
            if text == "PROXY" {
                #expect(ProxyProtocolParser.parse(Array(text.utf8)) == .incomplete)
                return
            }
            Issue.record("\(text.debugDescription) was not refused: \(ProxyProtocolParser.parse(Array(text.utf8)))")
            return
        }
    }

    @Test func hostileVersion2InputIsRefused() {
        var cases: [(String, [UInt8])] = [
            ("version 1 in a v2 header", Array(self.v2(family: 0x11, block: [UInt8](repeating: 0, count: 12)).enumerated().map { $0.offset == 12 ? 0x11 : $0.element })),
            ("command 2", self.v2(command: 0x22, family: 0x11, block: [UInt8](repeating: 0, count: 12))),
            ("IPv4 block too short", self.v2(family: 0x11, block: [1, 2, 3, 4])),
            ("IPv6 block too short", self.v2(family: 0x21, block: [UInt8](repeating: 1, count: 35))),
            ("datagram", self.v2(family: 0x12, block: [UInt8](repeating: 0, count: 12))),
            ("unknown family", self.v2(family: 0x41, block: [UInt8](repeating: 0, count: 12))),
            ("broken signature", [0x0D, 0x0A, 0x0D, 0x0B]),
        ]
        // A length past the limit is refused from the 16-byte header alone, before any of the block arrives.
        let huge = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x21, 0x11, 0xFF, 0xFF] as [UInt8]
        cases.append(("65535 bytes announced", huge))
        for (name, bytes) in cases {
            guard case .invalid = ProxyProtocolParser.parse(bytes) else {
                Issue.record("\(name) was not refused: \(ProxyProtocolParser.parse(bytes))")
                continue
            }
        }
    }

    /// Every byte string of a few lengths from the two signatures' alphabets: no crash, and a header is only
    /// ever found within the bytes given.
    @Test func shortRandomInputsNeverCrash() {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = Array("PROXY TCP46UNKOW.:0123456789abcdef\r\n".utf8) + [0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x21, 0x11, 0xFF]
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...120, using: &generator)
            var bytes = (0..<count).map { _ in alphabet.randomElement(using: &generator)! }
            if Bool.random(using: &generator) { bytes = Array("PROXY ".utf8) + bytes }
            if case .header(_, let length) = ProxyProtocolParser.parse(bytes) {
                #expect(length <= bytes.count)
            }
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads the PROXY protocol header (HAProxy's, versions 1 and 2) a TCP load balancer puts in front of a
/// connection's first byte, to say whose connection it relays.
///
/// Pure: it is handed every byte received so far and says whether the header is complete, how many bytes it
/// took, and what it says; the caller (``ProxyProtocolHandler``) keeps the bytes and does the I/O. It reads
/// as little as it can before deciding: a first byte that starts neither signature is refused at once, and a
/// version 1 line or a version 2 block longer than its limit is refused as soon as the limit is passed, so a
/// client can never make the gateway hold more than ``maximumLength`` bytes or wait for a line end that will
/// not come (the TLS handshake timeout runs meanwhile).
///
/// Only what a TCP listener can use is taken as an address: `TCP4`/`TCP6` (version 1) and the `PROXY` command
/// with `AF_INET`/`AF_INET6` over `STREAM` (version 2). `UNKNOWN`, the `LOCAL` command (a load balancer's own
/// health check) and other families are valid headers that give no address: the connection's own peer is
/// used then, as the specification asks.
package enum ProxyProtocolParser {
    package enum Result: Equatable, Sendable {
        /// The bytes so far are a valid beginning: more are needed.
        case incomplete
        /// The header took `length` bytes; `source` is the client's address (text, canonical form), `nil` when
        /// the header names none.
        case header(source: String?, length: Int)
        /// Not a PROXY header, or a broken one: the connection is closed. The text names the rule, never the bytes.
        case invalid(String)
    }

    /// A version 1 line's limit, `\r\n` included (the specification's 107 bytes).
    package static let maximumV1Length = 107
    /// The most a version 2 header may take: 16 bytes and at most 2032 of addresses and TLVs. Load balancers
    /// send a few dozen bytes of TLVs (AWS's endpoint id, a TLS summary); the 64 KiB the length field allows
    /// would only be a way to make the gateway buffer.
    package static let maximumLength = 2048

    static let v2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    static let v1Prefix = Array("PROXY ".utf8)

    package static func parse(_ bytes: some Collection<UInt8>) -> Result {
        let bytes = Array(bytes.prefix(self.maximumLength + 1))
        guard let first = bytes.first else { return .incomplete }
        if first == self.v2Signature[0] {
            return self.parseV2(bytes)
        }
        if first == self.v1Prefix[0] {
            return self.parseV1(bytes)
        }
        return .invalid("the connection does not start with a PROXY protocol header")
    }

    // MARK: Version 1: `PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n`.

    private static func parseV1(_ bytes: [UInt8]) -> Result {
        let prefixLength = min(bytes.count, self.v1Prefix.count)
        guard bytes[..<prefixLength].elementsEqual(self.v1Prefix[..<prefixLength]) else {
            return .invalid("the connection does not start with a PROXY protocol header")
        }
        guard let cr = bytes.firstIndex(of: 0x0D) else {
            if bytes.count >= self.maximumV1Length {
                return .invalid("the PROXY protocol v1 line is longer than 107 bytes")
            }
            if bytes.contains(0x0A) {
                return .invalid("the PROXY protocol v1 line ends without CR LF")
            }
            return .incomplete
        }
        guard cr + 2 <= self.maximumV1Length else {
            return .invalid("the PROXY protocol v1 line is longer than 107 bytes")
        }
        guard cr + 1 < bytes.count else { return .incomplete }
        guard bytes[cr + 1] == 0x0A else {
            return .invalid("the PROXY protocol v1 line ends without CR LF")
        }
        let line = bytes[self.v1Prefix.count..<cr]
        guard line.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E || $0 == 0x20 }) else {
            return .invalid("the PROXY protocol v1 line holds a byte outside printable ASCII")
        }
        let words = line.split(separator: 0x20, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        let length = cr + 2
        guard let protocolName = words.first else {
            return .invalid("the PROXY protocol v1 line names no protocol")
        }
        switch protocolName {
        case "UNKNOWN":
            // The rest of the line is to be ignored (the specification's words); the peer's address is used.
            return .header(source: nil, length: length)
        case "TCP4", "TCP6":
            guard words.count == 5 else {
                return .invalid("the PROXY protocol v1 line needs two addresses and two ports, single spaces apart")
            }
            let family = protocolName == "TCP4" ? AF_INET : AF_INET6
            guard let source = self.canonical(words[1], family: family), self.canonical(words[2], family: family) != nil else {
                return .invalid("the PROXY protocol v1 line holds an address that is not of its protocol's family")
            }
            guard self.isPort(words[3]), self.isPort(words[4]) else {
                return .invalid("the PROXY protocol v1 line holds a port that is not a number from 0 to 65535")
            }
            return .header(source: source, length: length)
        default:
            return .invalid("the PROXY protocol v1 line names a protocol other than TCP4, TCP6 or UNKNOWN")
        }
    }

    /// A decimal port without a leading zero (the specification's form), 0 to 65535.
    private static func isPort(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 5, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return false }
        guard text == "0" || !text.hasPrefix("0") else { return false }
        return Int(text).map { $0 <= 65_535 } ?? false
    }

    /// `text` as the address family's canonical text, when it is a literal of that family.
    private static func canonical(_ text: String, family: Int32) -> String? {
        guard text.utf8.count <= 45 else { return nil }
        var storage = [UInt8](repeating: 0, count: 16)
        let ok = storage.withUnsafeMutableBytes { pointer in text.withCString { inet_pton(family, $0, pointer.baseAddress) } }
        guard ok == 1 else { return nil }
        return self.text(family == AF_INET ? Array(storage[..<4]) : storage)
    }

    /// The text of a 4- or 16-byte address (`inet_ntop`: IPv6 in its RFC 5952 form).
    static func text(_ address: [UInt8]) -> String? {
        let family = address.count == 4 ? AF_INET : AF_INET6
        var output = [CChar](repeating: 0, count: 64)
        let written = address.withUnsafeBytes { bytes in
            output.withUnsafeMutableBufferPointer { inet_ntop(family, bytes.baseAddress, $0.baseAddress, 64) }
        }
        guard written != nil else { return nil }
        return String(decoding: output.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: Version 2: the binary header.

    private static func parseV2(_ bytes: [UInt8]) -> Result {
        let signatureLength = min(bytes.count, self.v2Signature.count)
        guard bytes[..<signatureLength].elementsEqual(self.v2Signature[..<signatureLength]) else {
            return .invalid("the connection does not start with a PROXY protocol header")
        }
        guard bytes.count >= 16 else { return .incomplete }
        let versionCommand = bytes[12]
        guard versionCommand >> 4 == 2 else {
            return .invalid("the PROXY protocol v2 header has a version other than 2")
        }
        let command = versionCommand & 0x0F
        guard command <= 1 else {
            return .invalid("the PROXY protocol v2 header has a command other than LOCAL or PROXY")
        }
        let familyTransport = bytes[13]
        let length = Int(bytes[14]) << 8 | Int(bytes[15])
        guard 16 + length <= self.maximumLength else {
            return .invalid("the PROXY protocol v2 header is longer than \(self.maximumLength) bytes")
        }
        guard bytes.count >= 16 + length else { return .incomplete }
        let total = 16 + length
        let block = bytes[16..<total]
        if command == 0 {
            // LOCAL: the load balancer's own connection (a health check); its address block is to be ignored.
            return .header(source: nil, length: total)
        }
        switch familyTransport {
        case 0x11:  // AF_INET, STREAM: source 4, destination 4, ports 2 + 2.
            guard block.count >= 12 else {
                return .invalid("the PROXY protocol v2 header is too short for its IPv4 addresses")
            }
            return .header(source: self.text(Array(block.prefix(4))), length: total)
        case 0x21:  // AF_INET6, STREAM: 16 + 16 + 2 + 2.
            guard block.count >= 36 else {
                return .invalid("the PROXY protocol v2 header is too short for its IPv6 addresses")
            }
            return .header(source: self.text(Array(block.prefix(16))), length: total)
        case 0x00, 0x31, 0x32:
            // UNSPEC, or a Unix socket in front: nothing a client address could be; the peer's is used.
            return .header(source: nil, length: total)
        case 0x12, 0x22:
            return .invalid("the PROXY protocol v2 header relays a datagram connection to a stream listener")
        default:
            return .invalid("the PROXY protocol v2 header has an unknown address family or transport")
        }
    }
}

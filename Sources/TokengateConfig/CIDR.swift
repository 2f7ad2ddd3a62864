//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// An IPv4 or IPv6 network such as `10.0.0.0/8` or `fd00::/8`; a bare address means a single host.
///
/// Stored as two 64-bit words so that ``contains(_:)`` on the request path is a couple of masks and compares,
/// with no allocation. IPv4-mapped IPv6 addresses (`::ffff:10.1.2.3`, as a dual-stack socket reports IPv4
/// peers) match IPv4 networks.
public struct CIDR: Sendable, Hashable, CustomStringConvertible {
    public enum Family: Sendable, Hashable {
        case ipv4
        case ipv6
    }

    public let family: Family
    public let prefixLength: Int
    /// Network bits, high half (IPv6 only; zero for IPv4).
    private let high: UInt64
    /// Network bits, low half (IPv4 in the low 32 bits).
    private let low: UInt64

    /// Parses `address/prefix` or a bare address. Host bits under the prefix must be zero (`10.0.0.1/8` is
    /// refused: it is almost always a typo for a host or for another network).
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let addressText = parts[0]
        let maximum: Int
        let bytes: [UInt8]
        if let v4 = IPAddressParser.ipv4(addressText) {
            self.family = .ipv4
            bytes = v4
            maximum = 32
        } else if let v6 = IPAddressParser.ipv6(addressText) {
            self.family = .ipv6
            bytes = v6
            maximum = 128
        } else {
            return nil
        }
        var prefix = maximum
        if parts.count == 2 {
            let prefixText = parts[1]
            guard !prefixText.isEmpty, prefixText.utf8.count <= 3, prefixText.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                let value = Int(prefixText), value <= maximum
            else {
                return nil
            }
            // No leading zeros: `/08` is not a prefix anyone means to write.
            guard prefixText == "0" || !prefixText.hasPrefix("0") else {
                return nil
            }
            prefix = value
        }
        let (high, low) = CIDR.words(bytes)
        let (maskHigh, maskLow) = CIDR.mask(family: self.family, prefixLength: prefix)
        guard high & ~maskHigh == 0, low & ~maskLow == 0 else {
            return nil
        }
        self.prefixLength = prefix
        self.high = high
        self.low = low
    }

    /// Whether `address` (4 bytes, or 16 bytes including IPv4-mapped ones) is inside this network.
    public func contains(_ address: some Collection<UInt8>) -> Bool {
        var bytes = (UInt64(0), UInt64(0))
        var count = 0
        for byte in address {
            guard count < 16 else {
                return false
            }
            if count < 8 {
                bytes.0 = bytes.0 << 8 | UInt64(byte)
            } else {
                bytes.1 = bytes.1 << 8 | UInt64(byte)
            }
            count += 1
        }
        switch count {
        case 4:
            // The four bytes landed in the high word; move them to where IPv4 networks keep them.
            return self.contains(family: .ipv4, high: 0, low: bytes.0)
        case 16:
            if bytes.0 == 0, bytes.1 >> 32 == 0xFFFF {
                return self.contains(family: .ipv4, high: 0, low: bytes.1 & 0xFFFF_FFFF)
            }
            return self.contains(family: .ipv6, high: bytes.0, low: bytes.1)
        default:
            return false
        }
    }

    /// Whether the textual address (IPv4 or IPv6, no brackets) is inside this network; `false` if unparseable.
    public func contains(ipAddress: String) -> Bool {
        if let v4 = IPAddressParser.ipv4(ipAddress) {
            return self.contains(v4)
        }
        if let v6 = IPAddressParser.ipv6(ipAddress) {
            return self.contains(v6)
        }
        return false
    }

    public var description: String {
        switch self.family {
        case .ipv4:
            let v = self.low
            return "\(v >> 24 & 0xFF).\(v >> 16 & 0xFF).\(v >> 8 & 0xFF).\(v & 0xFF)/\(self.prefixLength)"
        case .ipv6:
            var groups: [String] = []
            for word in [self.high, self.low] {
                for shift in stride(from: 48, through: 0, by: -16) {
                    groups.append(String(word >> UInt64(shift) & 0xFFFF, radix: 16))
                }
            }
            return groups.joined(separator: ":") + "/\(self.prefixLength)"
        }
    }

    private func contains(family: Family, high: UInt64, low: UInt64) -> Bool {
        guard family == self.family else {
            return false
        }
        let (maskHigh, maskLow) = CIDR.mask(family: family, prefixLength: self.prefixLength)
        return high & maskHigh == self.high && low & maskLow == self.low
    }

    private static func words(_ bytes: [UInt8]) -> (UInt64, UInt64) {
        var high: UInt64 = 0
        var low: UInt64 = 0
        if bytes.count == 4 {
            for byte in bytes {
                low = low << 8 | UInt64(byte)
            }
        } else {
            for byte in bytes[0..<8] {
                high = high << 8 | UInt64(byte)
            }
            for byte in bytes[8..<16] {
                low = low << 8 | UInt64(byte)
            }
        }
        return (high, low)
    }

    private static func mask(family: Family, prefixLength: Int) -> (UInt64, UInt64) {
        switch family {
        case .ipv4:
            let bits = prefixLength == 0 ? UInt64(0) : (UInt64(0xFFFF_FFFF) << UInt64(32 - prefixLength)) & 0xFFFF_FFFF
            return (0, bits)
        case .ipv6:
            func word(_ n: Int) -> UInt64 {
                n <= 0 ? 0 : n >= 64 ? ~UInt64(0) : ~UInt64(0) << UInt64(64 - n)
            }
            return (word(prefixLength), word(prefixLength - 64))
        }
    }
}

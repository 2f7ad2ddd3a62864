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

/// Strict IP literal parsing through the C library's `inet_pton`.
///
/// `inet_pton` is used rather than a hand-written parser because it is the exact grammar the socket layer will
/// apply later: dotted-quad only for IPv4 (no octal, no shortened forms), RFC 4291 text for IPv6.
package enum IPAddressParser {
    /// The 4 or 16 bytes of an IPv4 or IPv6 literal, or `nil`.
    package static func bytes(_ text: some StringProtocol) -> [UInt8]? {
        self.ipv4(text) ?? self.ipv6(text)
    }

    /// The 4 bytes of a dotted-quad IPv4 address, or `nil`.
    package static func ipv4(_ text: some StringProtocol) -> [UInt8]? {
        guard !text.isEmpty, text.utf8.count <= 15 else {
            return nil
        }
        var address = in_addr()
        let ok = String(text).withCString { inet_pton(AF_INET, $0, &address) }
        guard ok == 1 else {
            return nil
        }
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    /// The 16 bytes of an IPv6 address (without brackets or zone), or `nil`.
    package static func ipv6(_ text: some StringProtocol) -> [UInt8]? {
        guard !text.isEmpty, text.utf8.count <= 45, text.contains(":") else {
            return nil
        }
        var address = in6_addr()
        let ok = String(text).withCString { inet_pton(AF_INET6, $0, &address) }
        guard ok == 1 else {
            return nil
        }
        return withUnsafeBytes(of: &address) { Array($0) }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengatePercentEncoding

/// RFC 9110 §7.2's `Host = uri-host [ ":" port ]`: a bracketed IP literal, or a name of RFC 3986's unreserved
/// characters (letters, digits, `-`, `.`, `_`, `~`: every DNS name, IDNs in their ASCII form, and IPv4
/// addresses), then an optional port of at most 5 digits up to 65535. Stricter than RFC 3986's reg-name, which
/// also allows `%` escapes and sub-delims (`'`, `(`, `,`, `;`, …): no host anyone serves needs them, and
/// backends read `X-Forwarded-Host` with parsers that split on `,` or trust it in markup.
///
/// The gateway forwards `Host` and repeats it as `X-Forwarded-Host`, which backends use to build absolute
/// URLs and redirects; RFC 9112 §3.2 asks a server to answer `400` to an invalid one rather than pass on
/// userinfo (`a@b`), a path (`host/evil`), spaces, quotes or markup. HTTP/2's `:authority` becomes `Host`
/// and is held to the same rule.
enum HostFieldCheck {
    static func isValid(_ value: UnsafeRawBufferPointer) -> Bool {
        guard !value.isEmpty else { return true }  // RFC 9112 §3.2 allows an empty Host; nothing to pass on.
        var index = 0
        if value[0] == UInt8(ascii: "[") {
            guard let close = value.firstIndex(of: UInt8(ascii: "]")), close > 1 else { return false }
            for byte in value[1..<close] where !(Self.isHexDigit(byte) || byte == UInt8(ascii: ":") || byte == UInt8(ascii: ".")) {
                return false
            }
            index = close + 1
        } else {
            while index < value.count, value[index] != UInt8(ascii: ":") {
                guard Self.isRegNameByte(value[index]) else { return false }
                index += 1
            }
            if index == 0 { return false }  // `:80` alone
        }
        guard index < value.count else { return true }
        guard value[index] == UInt8(ascii: ":") else { return false }
        let port = value[(index + 1)...]
        guard port.count <= 5 else { return false }
        var number = 0
        for byte in port {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return false }
            number = number * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return number <= 65535
    }

    private static func isRegNameByte(_ byte: UInt8) -> Bool {
        PercentEncoding.isUnreserved(byte)
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }
}

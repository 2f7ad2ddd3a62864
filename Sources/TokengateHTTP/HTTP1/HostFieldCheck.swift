//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
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
///
/// ``problem(count:first:required:emptyAllowed:)`` is the one check of a request's `Host` field lines, for
/// every listener: the public ones (the exchange), the plain-HTTP redirect (which names the host in
/// `Location`) and the admin listener (whose rebinding guard judges it).
package enum HostFieldCheck {
    /// What is wrong with a request's `Host` field lines; ``description`` is the answer's text.
    package enum Problem: Sendable, Equatable, CustomStringConvertible {
        /// Two or more; or none where one is required.
        case notExactlyOne
        /// One with an empty value where a host must be named.
        case empty
        /// One whose value is not `uri-host [":" port]` (``HostFieldCheck/isValid(_:)``).
        case invalid

        package var description: String {
            switch self {
            case .notExactlyOne: "a request needs exactly one Host header"
            case .empty: "the Host header is empty"
            case .invalid: "the Host field is not a valid host and port"
            }
        }
    }

    /// RFC 9112 §3.2: a server answers `400` to a request with more than one `Host` field line, or with an
    /// invalid value, and to an HTTP/1.1 request without one (``isRequired(in:)``).
    /// - Parameters:
    ///   - count: how many `Host` field lines the request has.
    ///   - first: the first one's value, without surrounding whitespace; `nil` when there is none.
    ///   - required: whether a request without one is refused.
    ///   - emptyAllowed: whether an empty value passes. RFC 9112 §3.2 allows one (it names no host, so there is
    ///     nothing to pass on); a caller that puts the host in its answer or judges it needs a name.
    package static func problem(count: Int, first: UnsafeRawBufferPointer?, required: Bool, emptyAllowed: Bool) -> Problem? {
        guard count <= 1, count == 1 || !required else { return .notExactlyOne }
        guard let first else { return nil }
        if first.isEmpty, !emptyAllowed { return .empty }
        return Self.isValid(first) ? nil : .invalid
    }

    /// ``problem(count:first:required:emptyAllowed:)`` for values held as strings (the admin listener's
    /// `HTTPHeaders`, the plain listener's few); spaces and tabs around a value are not part of it.
    package static func problem(_ values: [String], required: Bool, emptyAllowed: Bool) -> Problem? {
        guard let value = values.first else {
            return Self.problem(count: 0, first: nil, required: required, emptyAllowed: emptyAllowed)
        }
        var trimmed = String(Substring(value).trimmingOWS())
        return trimmed.withUTF8 {
            Self.problem(count: values.count, first: UnsafeRawBufferPointer($0), required: required, emptyAllowed: emptyAllowed)
        }
    }

    /// Whether a request of `version` must carry `Host` (RFC 9112 §3.2): HTTP/1.1 must; HTTP/1.0 predates it,
    /// and HTTP/2 names the host in `:authority`.
    package static func isRequired(in version: HTTPVersion) -> Bool {
        version.major == 1 && version.minor >= 1
    }

    package static func isValid(_ value: UnsafeRawBufferPointer) -> Bool {
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

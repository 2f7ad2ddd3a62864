//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengatePercentEncoding

/// `application/x-www-form-urlencoded` bodies and URL queries (the WHATWG URL standard's parser):
/// finding a field, and removing one while leaving every other byte as the client sent it.
package enum FormURLEncoded {
    /// One `name=value` pair as raw bytes of the input, and its decoded name.
    package struct Pair {
        package var range: Range<Int>
        package var name: String
        package var rawValue: ArraySlice<UInt8>
    }

    package static func pairs(_ bytes: [UInt8]) -> [Pair] {
        var pairs: [Pair] = []
        var start = 0
        while start <= bytes.count {
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: "&") { end += 1 }
            if end > start {
                let piece = bytes[start..<end]
                let equals = piece.firstIndex(of: UInt8(ascii: "=")) ?? end
                let name = Self.decode(bytes[start..<equals]) ?? ""
                let value = equals < end ? bytes[(equals + 1)..<end] : []
                pairs.append(Pair(range: start..<end, name: name, rawValue: value))
            }
            start = end + 1
        }
        return pairs
    }

    /// Every decoded value of the field `name`, in order; `nil` entries for values that are not valid
    /// percent-encoded UTF-8.
    package static func values(named name: String, in bytes: [UInt8]) -> [String?] {
        Self.pairs(bytes).filter { $0.name == name }.map { Self.decode($0.rawValue) }
    }

    /// Whether a `;` inside a pair starts a piece named `name` (`x=1;access_token=…`). The WHATWG parser, and
    /// so the gateway, splits on `&` only, but parsers that also split on `;` (Rack before 3, Python's
    /// `parse_qs` before 3.9.2) would find a field there that the gateway neither checked nor stripped.
    package static func hasSemicolonField(named name: String, in bytes: [UInt8]) -> Bool {
        for pair in Self.pairs(bytes) {
            var rest = bytes[pair.range]
            while let semicolon = rest.firstIndex(of: UInt8(ascii: ";")) {
                rest = rest[(semicolon + 1)...]
                let nameEnd = rest.firstIndex { $0 == UInt8(ascii: "=") || $0 == UInt8(ascii: ";") } ?? rest.endIndex
                if Self.decode(rest[..<nameEnd]) == name { return true }
            }
        }
        return false
    }

    /// The body with every `name` field removed, joined with `&` as before.
    package static func removing(_ name: String, from bytes: [UInt8]) -> [UInt8] {
        let kept = Self.pairs(bytes).filter { $0.name != name }
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        for (index, pair) in kept.enumerated() {
            if index > 0 { result.append(UInt8(ascii: "&")) }
            result.append(contentsOf: bytes[pair.range])
        }
        return result
    }

    /// Percent-decoding with `+` as space. `nil` when a `%` escape is broken or the result is not UTF-8,
    /// so that a half-decoded token is never verified.
    package static func decode(_ bytes: ArraySlice<UInt8>) -> String? {
        PercentEncoding.decode(bytes)
    }
}

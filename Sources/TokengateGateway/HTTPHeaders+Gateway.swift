//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1

/// Header look-ups for the request path that neither allocate nor split values on commas (NIOHTTP1's
/// `canonicalForm` does both, and walks `Character`s).
extension HTTPHeaders {
    /// How many fields are called `name` (ASCII case-insensitive).
    func count(name: String) -> Int {
        var count = 0
        for (field, _) in self where field.utf8.count == name.utf8.count && Self.equalsIgnoringCase(field, name) {
            count += 1
        }
        return count
    }

    /// Whether any field name starts with `prefix` (lowercase ASCII), ignoring case.
    func containsName(withPrefix prefix: String) -> Bool {
        for (field, _) in self where Self.hasPrefixIgnoringCase(field, prefix) {
            return true
        }
        return false
    }

    /// Header names are compared with many candidates on every request: the length check (O(1) for native
    /// strings) rules out nearly all of them before any byte is compared.
    ///
    /// The bytes are compared through the strings' contiguous UTF-8 (native and small strings have it), not
    /// through `UTF8View` iteration, which checks the string's representation at every step.
    static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        let contiguous = a.utf8.withContiguousStorageIfAvailable { left in
            b.utf8.withContiguousStorageIfAvailable { right in
                for index in left.indices where Self.lower(left[index]) != Self.lower(right[index]) {
                    return false
                }
                return true
            }
        }
        if let contiguous = contiguous, let equal = contiguous {
            return equal
        }
        return a.utf8.elementsEqual(b.utf8) { Self.lower($0) == Self.lower($1) }
    }

    static func hasPrefixIgnoringCase(_ value: String, _ lowercasePrefix: String) -> Bool {
        var iterator = value.utf8.makeIterator()
        for expected in lowercasePrefix.utf8 {
            guard let byte = iterator.next(), Self.lower(byte) == expected else { return false }
        }
        return true
    }

    /// Whether the comma-separated list `value` holds `token` (lowercase ASCII), ignoring case and the optional
    /// whitespace around elements; without splitting into new strings as `canonicalForm` does.
    static func listContains(_ value: String, token: String) -> Bool {
        let bytes = value.utf8
        let wanted = token.utf8
        var index = bytes.startIndex
        while index < bytes.endIndex {
            while index < bytes.endIndex, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") {
                index = bytes.index(after: index)
            }
            var candidate = wanted.startIndex
            var matches = true
            while index < bytes.endIndex, bytes[index] != UInt8(ascii: ",") {
                let byte = bytes[index]
                if byte != UInt8(ascii: " "), byte != UInt8(ascii: "\t") {
                    if candidate < wanted.endIndex, Self.lower(byte) == wanted[candidate] {
                        candidate = wanted.index(after: candidate)
                    } else {
                        matches = false
                    }
                } else if candidate != wanted.endIndex {
                    matches = false  // Whitespace inside an element ("kee p-alive") never matches.
                }
                index = bytes.index(after: index)
            }
            if matches, candidate == wanted.endIndex {
                return true
            }
            if index < bytes.endIndex {
                index = bytes.index(after: index)  // The comma.
            }
        }
        return false
    }

    @inline(__always)
    static func lower(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }
}

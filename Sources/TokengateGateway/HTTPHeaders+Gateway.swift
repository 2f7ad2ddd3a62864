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
                FieldBytes.equalsIgnoringCase(UnsafeRawBufferPointer(left), UnsafeRawBufferPointer(right))
            }
        }
        if let contiguous = contiguous, let equal = contiguous {
            return equal
        }
        return a.utf8.elementsEqual(b.utf8) { FieldBytes.lower($0) == FieldBytes.lower($1) }
    }

    static func hasPrefixIgnoringCase(_ value: String, _ lowercasePrefix: String) -> Bool {
        var iterator = value.utf8.makeIterator()
        for expected in lowercasePrefix.utf8 {
            guard let byte = iterator.next(), FieldBytes.lower(byte) == expected else { return false }
        }
        return true
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1

/// Name comparisons for the heads and trailers still held as `HTTPHeaders` (the gateway's own answers,
/// trailers), by the byte rules of ``FieldBytes``: NIOHTTP1's own look-ups walk `Character`s.
extension HTTPHeaders {
    /// Header names are compared with many candidates on every request: the length check (O(1) for native
    /// strings) rules out nearly all of them before any byte is compared.
    ///
    /// The bytes are compared through the strings' contiguous UTF-8 (native and small strings have it), not
    /// through `UTF8View` iteration, which checks the string's representation at every step.
    package static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
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
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Comparisons on the raw bytes of field names and values, where they lie in the buffer they arrived in.
///
/// A client's request fields (``RequestFields``) and a backend's response head (``UpstreamResponseHead``) are
/// kept as the bytes they came in, and the framing fields of both parsers are read from them: no `String` is
/// made for a name only to compare it.
package enum FieldBytes {
    /// `body` with the UTF-8 bytes of a field kept as strings (a head the gateway built, trailers), for the
    /// byte-level writers; native strings hand out their storage, nothing is copied.
    package static func withBytes<Result>(
        of name: String,
        _ value: String,
        _ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Result
    ) -> Result {
        var name = name
        var value = value
        return name.withUTF8 { name in
            value.withUTF8 { value in body(UnsafeRawBufferPointer(name), UnsafeRawBufferPointer(value)) }
        }
    }

    /// ASCII case-insensitive equality with `lowercase` (a lowercase ASCII literal). Lengths first: for a
    /// field name, that rules out nearly every candidate before a byte is compared.
    @inline(__always)
    package static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        let expected = UnsafeRawBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        return Self.equalsIgnoringCase(bytes, expected)
    }

    /// ASCII case-insensitive equality of two byte strings (only `A`–`Z` fold; every other byte must match).
    package static func equalsIgnoringCase(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        for index in 0..<a.count where Self.lower(a[index]) != Self.lower(b[index]) {
            return false
        }
        return true
    }

    /// Whether `bytes` is one of `candidates` (lowercase ASCII literals), ignoring case.
    package static func isOne(of candidates: [StaticString], _ bytes: UnsafeRawBufferPointer) -> Bool {
        for candidate in candidates where Self.equalsIgnoringCase(bytes, candidate) {
            return true
        }
        return false
    }

    /// Whether the comma-separated list `value` holds `token` (lowercase ASCII), ignoring case and the optional
    /// whitespace around elements, without splitting it into new strings.
    package static func listContains(_ value: UnsafeRawBufferPointer, token: StaticString) -> Bool {
        let wanted = UnsafeRawBufferPointer(start: token.utf8Start, count: token.utf8CodeUnitCount)
        var index = 0
        while index < value.count {
            while index < value.count, value[index] == UInt8(ascii: " ") || value[index] == UInt8(ascii: "\t") {
                index += 1
            }
            var candidate = 0
            var matches = true
            while index < value.count, value[index] != UInt8(ascii: ",") {
                let byte = value[index]
                if byte != UInt8(ascii: " "), byte != UInt8(ascii: "\t") {
                    if candidate < wanted.count, Self.lower(byte) == wanted[candidate] {
                        candidate += 1
                    } else {
                        matches = false
                    }
                } else if candidate != wanted.count {
                    matches = false  // Whitespace inside an element ("kee p-alive") never matches.
                }
                index += 1
            }
            if matches, candidate == wanted.count {
                return true
            }
            index += 1  // The comma (or past the end).
        }
        return false
    }

    /// The elements of a comma-separated list, without the whitespace around them; empty elements are left out.
    package static func listElements(_ value: UnsafeRawBufferPointer) -> [[UInt8]] {
        var elements: [[UInt8]] = []
        for element in value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true) {
            var start = element.startIndex
            var end = element.endIndex
            while start < end, value[start] == UInt8(ascii: " ") || value[start] == UInt8(ascii: "\t") { start += 1 }
            while end > start, value[end - 1] == UInt8(ascii: " ") || value[end - 1] == UInt8(ascii: "\t") { end -= 1 }
            if start < end { elements.append(Array(value[start..<end])) }
        }
        return elements
    }

    /// All digits, at most 18 of them (no overflow), no sign, no spaces, no list.
    package static func decimal(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 18 else { return nil }
        var result = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            result = result * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return result
    }

    @inline(__always)
    package static func lower(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengatePercentEncoding
import TokengateHTTP

/// Finds what looks like a compact JWT inside a URL's path or query: `eyJ` (base64url for `{"`, how every JWT
/// header starts) followed by base64url characters holding at least two dots — as sent, or behind up to three
/// rounds of percent-encoding (`%65yJ…`, `%2565yJ…`), since whatever reads the URL later may decode it.
///
/// Used where a token must never go on: a token route refuses such a path (a client that put its token in
/// the URL), and the access log never writes such a run, whatever the route (a public route may serve links
/// that carry tokens, such as e-mail verification links). A shape, not a verification: a false positive
/// costs a `400` on a token route or a redacted log field, a false negative a token in a log.
enum JWTShape {
    /// Whether `bytes`, or what up to three rounds of percent-decoding make of them, hold a JWT-shaped run.
    /// Decodes only when there is a `%` (no allocation for the common URL).
    static func isPresent(inURLPart bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        if Self.firstRange(in: bytes) != nil { return true }
        guard bytes.contains(UInt8(ascii: "%")) else { return false }
        var current = Array(bytes)
        for _ in 0..<3 {
            guard let decoded = PercentEncoding.decodedBytes(current, plusIsSpace: false, keepingBrokenEscapes: true),
                decoded != current
            else { return false }
            if decoded.withUnsafeBufferPointer({ Self.firstRange(in: $0) }) != nil { return true }
            current = decoded
        }
        return false
    }

    static func firstRange(in bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var index = 0
        while index + 3 <= bytes.count {
            guard bytes[index] == UInt8(ascii: "e"), bytes[index + 1] == UInt8(ascii: "y"), bytes[index + 2] == UInt8(ascii: "J") else {
                index += 1
                continue
            }
            var end = index + 3
            var dots = 0
            while end < bytes.count, Self.isTokenByte(bytes[end]) {
                if bytes[end] == UInt8(ascii: ".") { dots += 1 }
                end += 1
            }
            if dots >= 2 { return index..<end }
            index = end
        }
        return nil
    }

    /// The base64url alphabet and the dot.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
            true
        default:
            false
        }
    }
}

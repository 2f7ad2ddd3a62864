//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The request path as the access log writes it: without the query (which may carry anything), with every
/// JWT-shaped run replaced by `[token]` (``JWTShape``), and cut at ``maxBytes`` so that a target of the
/// size `limits.max_uri_bytes` allows does not make every refused request a many-kilobyte line.
enum AccessLogPath {
    static let maxBytes = 512

    static func text(for uri: String) -> String {
        var uri = uri
        return uri.withUTF8 { target in
            let path = UnsafeBufferPointer(rebasing: target[..<(target.firstIndex(of: UInt8(ascii: "?")) ?? target.count)])
            guard path.count > Self.maxBytes || JWTShape.firstRange(in: path) != nil else {
                return String(decoding: path, as: UTF8.self)  // The common case: the path as it came.
            }
            var text: [UInt8] = []
            var rest = path
            while let token = JWTShape.firstRange(in: rest) {
                text.append(contentsOf: rest[..<token.lowerBound])
                text.append(contentsOf: "[token]".utf8)
                rest = UnsafeBufferPointer(rebasing: rest[token.upperBound...])
            }
            text.append(contentsOf: rest)
            guard text.count > Self.maxBytes else { return String(decoding: text, as: UTF8.self) }
            // Cut on a UTF-8 boundary (the HTTP/2 path may hold any byte nghttp2 lets through).
            var cut = Self.maxBytes
            while cut > 0, text[cut] & 0xC0 == 0x80 { cut -= 1 }
            return String(decoding: text[..<cut], as: UTF8.self) + "…"
        }
    }
}

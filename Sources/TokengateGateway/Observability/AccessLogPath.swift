//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateHTTP

/// The request path as the access log writes it: without the query (which may carry anything), with every
/// JWT-shaped run replaced by `[token]` (``JWTShape``), and cut at ``maxBytes`` so that a target of the
/// size `limits.max_uri_bytes` allows does not make every refused request a many-kilobyte line.
///
/// A path that still holds a token behind percent-encoding (`/x;%65yJ…`: an accepted path has its encoded
/// unreserved characters decoded before it is logged, but a refused one is logged as sent) is not written at
/// all: ``withheld`` stands for it, since its encoded runs cannot be cut out where they lie.
enum AccessLogPath {
    static let maxBytes = 512
    static let withheld = "[withheld: the path holds a token]"

    static func text(for uri: String) -> String {
        var uri = uri
        return uri.withUTF8 { target in
            let path = UnsafeBufferPointer(rebasing: target[..<(target.firstIndex(of: UInt8(ascii: "?")) ?? target.count)])
            guard path.count > Self.maxBytes || JWTShape.isPresent(inURLPart: path) else {
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
            if text.withUnsafeBufferPointer({ JWTShape.isPresent(inURLPart: $0) }) { return Self.withheld }
            guard text.count > Self.maxBytes else { return String(decoding: text, as: UTF8.self) }
            // Cut on a UTF-8 boundary (the HTTP/2 path may hold any byte nghttp2 lets through).
            var cut = Self.maxBytes
            while cut > 0, text[cut] & 0xC0 == 0x80 { cut -= 1 }
            return String(decoding: text[..<cut], as: UTF8.self) + "…"
        }
    }
}

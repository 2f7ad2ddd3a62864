//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The lifetime a `Cache-Control` value gives a response (RFC 9111 §5.2.2): `max-age=N` in seconds, `0` for
/// `no-store` or `no-cache` (the caller's lower bound then applies), `nil` when the value says nothing about it.
/// A malformed or repeated `max-age` counts as absent, as §4.2.1 says a cache must treat an invalid lifetime.
enum CacheControlMaxAge {
    static func seconds(_ value: String?) -> Int64? {
        guard let value else { return nil }
        var maxAge: Int64?
        var seenMaxAge = false
        var noCache = false
        for part in value.split(separator: ",") {
            let directive = part.trimmingWhitespace()
            let pieces = directive.split(separator: "=", maxSplits: 1)
            let name = pieces.first.map { $0.lowercased() } ?? ""
            switch name {
            case "no-store", "no-cache":
                noCache = true
            case "max-age":
                if seenMaxAge { return nil }
                seenMaxAge = true
                var text = pieces.count == 2 ? Substring(pieces[1]) : ""
                if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 { text = text.dropFirst().dropLast() }
                guard !text.isEmpty, text.count <= 12, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
                maxAge = Int64(text)
            default:
                continue
            }
        }
        return noCache ? 0 : maxAge
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Reading and rewriting `Cookie` request headers (RFC 6265 §4.2, §5.4).
///
/// The naive "split on `;`, then on the first `=`" done right: optional whitespace around pairs, a
/// value in double quotes is unquoted, names compare case-sensitively (as browsers send them), and a
/// pair without `=` is skipped rather than taken for a name.
package enum CookieHeader {
    /// Every value of the cookie `name` across all `Cookie` header values, in order.
    package static func values(named name: String, in headerValues: [String]) -> [Substring] {
        var found: [Substring] = []
        for header in headerValues {
            for pair in header.split(separator: ";", omittingEmptySubsequences: true) {
                guard let (cookieName, value) = Self.split(pair) else { continue }
                if cookieName == name {
                    found.append(value)
                }
            }
        }
        return found
    }

    /// The `Cookie` header value with every cookie called `name` removed, or `nil` when nothing is left.
    package static func removing(_ name: String, from headerValues: [String]) -> String? {
        Self.removing([name], from: headerValues)
    }

    /// The `Cookie` header value with every cookie called one of `names` removed (names compare
    /// case-sensitively, as cookies do), or `nil` when nothing is left.
    package static func removing(_ names: [String], from headerValues: [String]) -> String? {
        var kept: [Substring] = []
        for header in headerValues {
            for pair in header.split(separator: ";", omittingEmptySubsequences: true) {
                let trimmed = pair.trimmingOWS()
                if trimmed.isEmpty { continue }
                if let (cookieName, _) = Self.split(pair), names.contains(where: { $0 == cookieName }) { continue }
                kept.append(trimmed)
            }
        }
        return kept.isEmpty ? nil : kept.joined(separator: "; ")
    }

    private static func split(_ pair: Substring) -> (Substring, Substring)? {
        guard let equals = pair.firstIndex(of: "=") else { return nil }
        let name = pair[pair.startIndex..<equals].trimmingOWS()
        var value = pair[pair.index(after: equals)...].trimmingOWS()
        if value.count >= 2, value.first == "\"", value.last == "\"" {
            value = value.dropFirst().dropLast()
        }
        guard !name.isEmpty else { return nil }
        return (name, value)
    }
}

extension Substring {
    /// The substring without leading and trailing spaces and horizontal tabs (HTTP's OWS).
    package func trimmingOWS() -> Substring {
        // On UTF-8 code units: spaces and tabs are ASCII, so the indices stay on scalar boundaries, and no
        // Character (grapheme) is ever formed.
        let utf8 = self.utf8
        var start = utf8.startIndex
        var end = utf8.endIndex
        while start < end, utf8[start] == UInt8(ascii: " ") || utf8[start] == UInt8(ascii: "\t") {
            start = utf8.index(after: start)
        }
        while end > start {
            let before = utf8.index(before: end)
            guard utf8[before] == UInt8(ascii: " ") || utf8[before] == UInt8(ascii: "\t") else { break }
            end = before
        }
        return self[start..<end]
    }
}

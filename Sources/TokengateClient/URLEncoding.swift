//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengatePercentEncoding

/// The `application/x-www-form-urlencoded` parser (WHATWG URL standard) over the shared strict
/// ``PercentEncoding``: a broken `%` escape or a result that is not UTF-8 is an error, never a half-decoded
/// value.
enum URLEncoding {
    /// The decoded `name=value` pairs of a query or fragment, in order. `nil` when any pair is broken.
    static func pairs(_ text: Substring) -> [(name: String, value: String)]? {
        var result: [(name: String, value: String)] = []
        for piece in text.split(separator: "&", omittingEmptySubsequences: true) {
            let piece = Substring(piece)
            let name: Substring
            let value: Substring
            if let equals = piece.firstIndex(of: "=") {
                name = piece[piece.startIndex..<equals]
                value = piece[piece.index(after: equals)...]
            } else {
                name = piece[...]
                value = ""
            }
            guard let decodedName = PercentEncoding.decode(name.utf8), let decodedValue = PercentEncoding.decode(value.utf8)
            else { return nil }
            result.append((decodedName, decodedValue))
        }
        return result
    }
}

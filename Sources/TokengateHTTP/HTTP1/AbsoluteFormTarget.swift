//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A request target in absolute form (`https://api.example.com/v1/items?x=1`, RFC 9112 §3.2.2), which a server
/// must accept although clients send it mostly to forward proxies.
///
/// The gateway routes by `Host`, and the HTTP/1.1 parser has already held the target to visible ASCII. Rather
/// than replace `Host` with the target's authority (what the RFC asks of a proxy), the target is taken only when
/// the two agree, ignoring case: a request whose two authorities differ is refused, as HTTP/2 refuses a `Host`
/// that differs from `:authority`, so no check ever sees one host while the backend sees another.
package enum AbsoluteFormTarget {
    package enum Result: Equatable {
        /// The origin-form target to use: the path (`/` when the target has none) and the query.
        case path(String)
        case authorityDiffersFromHost
        case notAbsoluteForm
    }

    package static func originForm(of target: String, host: String?) -> Result {
        let lowered = target.prefix(8).lowercased()
        let schemeLength: Int
        if lowered.hasPrefix("https://") {
            schemeLength = 8
        } else if lowered.hasPrefix("http://") {
            schemeLength = 7
        } else {
            return .notAbsoluteForm
        }
        let rest = target.utf8.dropFirst(schemeLength)
        let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? rest.endIndex
        let authority = Substring(rest[..<authorityEnd])
        guard !authority.isEmpty else { return .notAbsoluteForm }
        guard let host, host.lowercased() == authority.lowercased() else { return .authorityDiffersFromHost }
        let remainder = String(Substring(rest[authorityEnd...]))
        return .path(remainder.hasPrefix("/") ? remainder : "/" + remainder)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Picks which configured certificate answers a client's SNI host name.
///
/// Rules (pure, no OpenSSL, so they are unit-testable):
/// - Names compare ASCII case-insensitively; one trailing dot on the SNI name is ignored.
/// - An exact name match on any certificate wins over a wildcard match on any certificate; among equal
///   matches, the certificate configured first wins.
/// - `*.example.com` matches exactly one extra label (`a.example.com`, not `example.com` nor `a.b.example.com`).
///   Partial-label wildcards (`a*.example.com`) and wildcards over a single label (`*.com`) are ignored.
/// - No SNI, or no match: `nil`, meaning the default (first configured) certificate.
struct TLSServerNameMatcher: Sendable {
    private var exact: [String: Int] = [:]
    private var wildcard: [String: Int] = [:]

    /// - Parameter serverNames: the names that select each certificate, in configuration order: its configured
    ///   `server_names`, or its DNS SANs when none are configured.
    init(serverNames: [[String]]) {
        for (index, names) in serverNames.enumerated() {
            for name in names {
                let lowered = Self.lowercasedASCII(name)
                if lowered.hasPrefix("*.") {
                    let suffix = String(lowered.dropFirst(2))
                    guard suffix.contains("."), !suffix.contains("*"), !suffix.hasPrefix(".") else {
                        continue
                    }
                    if self.wildcard[suffix] == nil {
                        self.wildcard[suffix] = index
                    }
                } else if !lowered.contains("*"), !lowered.isEmpty {
                    if self.exact[lowered] == nil {
                        self.exact[lowered] = index
                    }
                }
            }
        }
    }

    /// The index of the certificate for `serverName`, or `nil` for the default one.
    func certificateIndex(for serverName: String) -> Int? {
        var name = Self.lowercasedASCII(serverName)
        if name.hasSuffix(".") {
            name.removeLast()
        }
        if let index = self.exact[name] {
            return index
        }
        guard let dot = name.firstIndex(of: "."), dot != name.startIndex else {
            return nil
        }
        return self.wildcard[String(name[name.index(after: dot)...])]
    }

    /// Lowercases A–Z only: host names are ASCII (IDNs arrive as punycode), and `String.lowercased()` would
    /// apply Unicode rules to whatever bytes a client sends.
    static func lowercasedASCII(_ text: String) -> String {
        String(
            decoding: text.utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 },
            as: UTF8.self
        )
    }
}

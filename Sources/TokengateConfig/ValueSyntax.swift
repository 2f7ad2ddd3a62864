//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A problem with a scalar's text; the decoder adds the file, position and key path.
struct ValueSyntaxError: Error, Equatable {
    var message: String

    init(_ message: String) {
        self.message = message
    }
}

/// The grammars of the configuration's scalar values: durations, sizes, addresses, URLs, names.
///
/// Every parser is strict (no signs, no spaces, no decimals, no alternative spellings) because a configuration
/// that means something other than what it looks like is worse than one that does not load.
enum ValueSyntax {
    // MARK: Durations

    /// Parses `500ms`, `2s`, `5m`, `14d`, `1h30m`: one or more `<digits><unit>` with units `d`, `h`, `m`, `s`,
    /// `ms` in strictly decreasing order. A bare number is refused: `60` could mean seconds or milliseconds.
    static func duration(_ text: String) throws(ValueSyntaxError) -> Duration {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else {
            throw ValueSyntaxError("expected a duration such as 500ms, 2s, 5m, 1h30m or 14d, got an empty value")
        }
        var index = 0
        var totalMilliseconds: Int64 = 0
        var lastUnitRank = Int.max
        while index < bytes.count {
            let digitsStart = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                index += 1
            }
            guard index > digitsStart else {
                throw ValueSyntaxError("expected a duration such as 500ms, 2s, 5m, 1h30m or 14d, got \(text)")
            }
            guard index - digitsStart <= 12 else {
                throw ValueSyntaxError("duration \(text) is too large")
            }
            var number: Int64 = 0
            for digit in bytes[digitsStart..<index] {
                number = number * 10 + Int64(digit - 0x30)
            }
            let unitStart = index
            while index < bytes.count, !(bytes[index] >= 0x30 && bytes[index] <= 0x39) {
                index += 1
            }
            let unit = String(decoding: bytes[unitStart..<index], as: UTF8.self)
            let rank: Int
            let milliseconds: Int64
            switch unit {
            case "d":
                (rank, milliseconds) = (5, 86_400_000)
            case "h":
                (rank, milliseconds) = (4, 3_600_000)
            case "m":
                (rank, milliseconds) = (3, 60_000)
            case "s":
                (rank, milliseconds) = (2, 1_000)
            case "ms":
                (rank, milliseconds) = (1, 1)
            case "":
                throw ValueSyntaxError("duration \(text) needs a unit (ms, s, m, h or d), for example \(text)s")
            default:
                throw ValueSyntaxError("unknown duration unit '\(unit)' in \(text) (use ms, s, m, h or d)")
            }
            guard rank < lastUnitRank else {
                throw ValueSyntaxError("units in duration \(text) must go from largest to smallest, each once")
            }
            lastUnitRank = rank
            let (product, overflow) = number.multipliedReportingOverflow(by: milliseconds)
            let (sum, overflow2) = totalMilliseconds.addingReportingOverflow(product)
            guard !overflow, !overflow2 else {
                throw ValueSyntaxError("duration \(text) is too large")
            }
            totalMilliseconds = sum
        }
        return .milliseconds(totalMilliseconds)
    }

    /// Formats a duration the way the configuration writes it (`1h30m`, `500ms`), for messages and docs.
    static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        var milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        if milliseconds == 0 {
            return "0s"
        }
        var text = ""
        for (unit, size) in [("d", Int64(86_400_000)), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)]
        where milliseconds >= size {
            text += "\(milliseconds / size)\(unit)"
            milliseconds %= size
        }
        return text
    }

    // MARK: Sizes

    /// Parses `8KiB`, `1MiB`, `100MB`, `1GiB` or a plain number of bytes.
    static func size(_ text: String) throws(ValueSyntaxError) -> Int {
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
            index += 1
        }
        guard index > 0 else {
            throw ValueSyntaxError("expected a size such as 8KiB, 1MiB, 100MB or a number of bytes, got \(text)")
        }
        guard index <= 15 else {
            throw ValueSyntaxError("size \(text) is too large")
        }
        let number = Int(String(decoding: bytes[0..<index], as: UTF8.self))!
        let unit = String(decoding: bytes[index...], as: UTF8.self)
        let multiplier: Int
        switch unit {
        case "", "B": multiplier = 1
        case "KB": multiplier = 1000
        case "MB": multiplier = 1000 * 1000
        case "GB": multiplier = 1000 * 1000 * 1000
        case "KiB": multiplier = 1024
        case "MiB": multiplier = 1024 * 1024
        case "GiB": multiplier = 1024 * 1024 * 1024
        default:
            throw ValueSyntaxError("unknown size unit '\(unit)' in \(text) (use B, KB, MB, GB, KiB, MiB or GiB)")
        }
        let (value, overflow) = number.multipliedReportingOverflow(by: multiplier)
        guard !overflow else {
            throw ValueSyntaxError("size \(text) is too large")
        }
        return value
    }

    // MARK: Addresses and hosts

    /// Parses `host:port` and `[v6]:port`; the host is an IP literal or a DNS name.
    static func socketAddress(_ text: String) throws(ValueSyntaxError) -> SocketAddressSpec {
        let example = "expected host:port or [ipv6]:port, such as 0.0.0.0:8443 or [::1]:8443"
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw ValueSyntaxError("\(example), got \(text)")
            }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else {
                throw ValueSyntaxError("\(example), got \(text) (missing :port)")
            }
            portText = rest.dropFirst()
            guard IPAddressParser.ipv6(host) != nil else {
                throw ValueSyntaxError("'\(host)' is not an IPv6 address")
            }
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw ValueSyntaxError("\(example), got \(text) (missing :port)")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") {
                throw ValueSyntaxError("IPv6 addresses need brackets, as in [\(host)]:\(portText)")
            }
            guard IPAddressParser.ipv4(host) != nil || self.isHostName(host) else {
                throw ValueSyntaxError("'\(host)' is neither an IPv4 address nor a host name")
            }
        }
        let port = try self.port(portText, in: text)
        return SocketAddressSpec(host: host.lowercased(), port: port)
    }

    static func port(_ text: Substring, in whole: String) throws(ValueSyntaxError) -> Int {
        guard !text.isEmpty, text.utf8.count <= 5, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let port = Int(text), port <= 65_535
        else {
            throw ValueSyntaxError("port in \(whole) must be a number from 0 to 65535")
        }
        return port
    }

    /// A DNS name: dot-separated labels of letters, digits and inner hyphens, at most 253 characters.
    static func isHostName(_ text: some StringProtocol) -> Bool {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 253 else {
            return false
        }
        for label in bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false) {
            guard !label.isEmpty, label.count <= 63, label.first != UInt8(ascii: "-"), label.last != UInt8(ascii: "-")
            else {
                return false
            }
            for byte in label {
                let ok =
                    (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                    || byte == UInt8(ascii: "-")
                guard ok else {
                    return false
                }
            }
        }
        // A name made only of digits and dots would be a malformed IPv4 address, not a host name.
        return !bytes.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: ".") }
    }

    /// Splits `host[:port]` (with `[v6]`) as found in a URL authority. Returns the host without brackets.
    static func authority(_ text: Substring, defaultPort: Int, in whole: String) throws(ValueSyntaxError) -> (
        String, Int
    ) {
        var host: Substring
        var port = defaultPort
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw ValueSyntaxError("unclosed [ in \(whole)")
            }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else {
                    throw ValueSyntaxError("unexpected text after ] in \(whole)")
                }
                port = try self.port(rest.dropFirst(), in: whole)
            }
            guard IPAddressParser.ipv6(host) != nil else {
                throw ValueSyntaxError("'\(host)' is not an IPv6 address")
            }
        } else {
            host = text
            if let colon = text.lastIndex(of: ":") {
                host = text[..<colon]
                port = try self.port(text[text.index(after: colon)...], in: whole)
            }
            guard IPAddressParser.ipv4(host) != nil || self.isHostName(host) else {
                throw ValueSyntaxError("'\(host)' is neither an IPv4 address nor a host name")
            }
        }
        guard port != 0 else {
            throw ValueSyntaxError("port in \(whole) must be from 1 to 65535")
        }
        return (host.lowercased(), port)
    }

    // MARK: URLs

    /// Parses an upstream target: `http://host[:port]` or `https://host[:port]`, with at most a trailing `/`.
    static func upstreamTarget(_ text: String) throws(ValueSyntaxError) -> UpstreamTarget {
        let scheme: UpstreamScheme
        let rest: Substring
        if text.hasPrefix("http://") {
            scheme = .http
            rest = text.dropFirst(7)
        } else if text.hasPrefix("https://") {
            scheme = .https
            rest = text.dropFirst(8)
        } else {
            throw ValueSyntaxError("expected http://host:port or https://host:port, got \(self.redacted(text))")
        }
        var authority = rest
        if authority.hasSuffix("/") {
            authority = authority.dropLast()
        }
        if authority.contains("@") {
            throw ValueSyntaxError("upstream targets cannot carry credentials")
        }
        if authority.contains(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            throw ValueSyntaxError(
                "upstream targets are host:port only (no path, query or fragment): the request path is forwarded as is"
            )
        }
        guard !authority.isEmpty else {
            throw ValueSyntaxError("missing host in \(text)")
        }
        let (host, port) = try self.authority(authority, defaultPort: scheme.defaultPort, in: text)
        return UpstreamTarget(scheme: scheme, host: host, port: port)
    }

    /// Checks an absolute `http(s)://host[:port]/path[?query]` URL (no credentials, no fragment).
    static func httpURL(_ text: String, requireHTTPS: Bool = false) throws(ValueSyntaxError) {
        let rest: Substring
        if text.hasPrefix("https://") {
            rest = text.dropFirst(8)
        } else if text.hasPrefix("http://"), !requireHTTPS {
            rest = text.dropFirst(7)
        } else {
            throw ValueSyntaxError(
                requireHTTPS
                    ? "expected an https:// URL, got \(text)" : "expected an http:// or https:// URL, got \(text)"
            )
        }
        guard self.isPrintableASCII(text, allowSpace: false) else {
            throw ValueSyntaxError("URLs must be printable ASCII without spaces (percent-encode the rest)")
        }
        guard !text.contains("#") else {
            throw ValueSyntaxError("URL \(text) must not have a fragment")
        }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.contains("@") else {
            throw ValueSyntaxError("URLs here cannot carry credentials")
        }
        guard !authority.isEmpty else {
            throw ValueSyntaxError("missing host in \(text)")
        }
        _ = try self.authority(authority, defaultPort: 443, in: text)
    }

    /// A URL as it may be shown in a message: not at all when it could carry credentials (`user:pass@`).
    static func redacted(_ url: String) -> String {
        url.contains("@") ? "a URL with credentials" : url
    }

    // MARK: Names

    /// RFC 9110 `tchar`: the characters allowed in header names and cookie names.
    static func isToken(_ text: some StringProtocol) -> Bool {
        !text.isEmpty && text.utf8.count <= 256
            && text.utf8.allSatisfy { byte in
                (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                    || "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
    }

    /// Printable ASCII (0x21–0x7E, plus space when allowed).
    static func isPrintableASCII(_ text: some StringProtocol, allowSpace: Bool) -> Bool {
        text.utf8.allSatisfy { ($0 > 0x20 && $0 < 0x7F) || (allowSpace && $0 == 0x20) }
    }

    /// A name for upstreams and apps: letters, digits, `_` and `-`.
    static func isSimpleName(_ text: some StringProtocol) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy { byte in
                (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                    || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
    }

    /// An unquoted SQL identifier (`[A-Za-z_][A-Za-z0-9_]*`, at most 63 bytes, PostgreSQL's limit),
    /// optionally schema-qualified when `qualified` is true. Restricting to this grammar is what lets the store
    /// put names in queries without any injection risk.
    static func isSQLIdentifier(_ text: some StringProtocol, qualified: Bool) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 1 || (qualified && parts.count == 2) else {
            return false
        }
        return parts.allSatisfy { part in
            guard let first = part.utf8.first, part.utf8.count <= 63 else {
                return false
            }
            let isLetter = { (b: UInt8) in (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || b == 0x5F }
            return isLetter(first) && part.utf8.allSatisfy { isLetter($0) || ($0 >= 0x30 && $0 <= 0x39) }
        }
    }

    /// An environment variable name.
    static func isEnvironmentName(_ text: some StringProtocol) -> Bool {
        self.isSQLIdentifier(text, qualified: false) && text.utf8.count <= 128
    }

    // MARK: Suggestions

    /// The closest candidate to `word`, if it is close enough to be a plausible typo.
    static func suggestion(for word: String, among candidates: [String]) -> String? {
        let lowered = word.lowercased()
        var best: (String, Int)?
        for candidate in candidates {
            let distance = self.editDistance(lowered, candidate.lowercased())
            if distance < (best?.1 ?? Int.max) {
                best = (candidate, distance)
            }
        }
        guard let (candidate, distance) = best else {
            return nil
        }
        let threshold = max(1, min(3, candidate.count / 3))
        return distance <= threshold ? candidate : nil
    }

    /// Levenshtein distance with transpositions counted as one edit (optimal string alignment).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8.prefix(64))
        let b = Array(b.utf8.prefix(64))
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous2 = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], previous2[j - 2] + 1)
                }
            }
            (previous2, previous, current) = (previous, current, previous2)
        }
        return previous[b.count]
    }
}

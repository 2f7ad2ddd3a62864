//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengatePercentEncoding
import TokengateHTTP

/// A return address that is a path on this site, and nothing else: the guard against open redirects
/// (the login page sends the browser back there, and so does the demo RP after a login).
///
/// A browser resolves a `Location` against the current URL, so anything that a browser could read as
/// *another* origin must be refused, including the forms browsers repair on the way:
/// - `//evil` and `/\evil` are scheme-relative (browsers treat `\` as `/` in special schemes);
/// - `https://evil`, `javascript:…` do not start with `/`;
/// - tab, CR and LF are removed by URL parsers, so `/\t/evil` becomes `//evil` — control characters are
///   refused outright (this also keeps CRLF out of the `Location` header);
/// - percent-encoded forms (`/%2F/evil`, `/%5Cevil`, `/%2e%2e/`) are refused as well: some servers and
///   frameworks decode once before redirecting again, so the decoded path must pass the same checks.
///
/// Accepted: printable ASCII only (anything else must arrive percent-encoded), at most ``maximumLength``
/// bytes, starting with exactly one `/`, no `\`, no `.` or `..` segment.
package enum SameSiteReturnPath {
    package static let maximumLength = 2048

    /// `candidate` when it is a same-site path, else `nil`.
    package static func validate(_ candidate: String) -> String? {
        let bytes = Array(candidate.utf8)
        guard !bytes.isEmpty, bytes.count <= Self.maximumLength else { return nil }
        guard Self.isSafe(bytes) else { return nil }
        // One round of percent-decoding; a broken escape is refused rather than guessed at.
        guard let decoded = PercentEncoding.decodedBytes(bytes, plusIsSpace: false),
            Self.isSafe(decoded, allowNonASCII: true)
        else { return nil }
        return candidate
    }

    /// The shape checks, on raw or decoded bytes.
    private static func isSafe(_ bytes: [UInt8], allowNonASCII: Bool = false) -> Bool {
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count > 1, bytes[1] == UInt8(ascii: "/") { return false }
        for byte in bytes {
            if byte < 0x21 || byte == 0x7F { return false }
            if byte >= 0x80 && !allowNonASCII { return false }
            if byte == UInt8(ascii: "\\") { return false }
        }
        // Dot segments only in the path part (a query may well hold "..").
        let pathEnd =
            bytes.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) ?? bytes.endIndex
        for segment in bytes[..<pathEnd].split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if segment.elementsEqual([UInt8(ascii: ".")])
                || segment.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")])
            {
                return false
            }
        }
        return true
    }
}

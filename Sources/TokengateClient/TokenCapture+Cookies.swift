//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// MARK: Cookies: "split on `;`, then on the first `=`", done right (RFC 6265 §5.2).

extension TokenCapture {
    /// From a `Cookie` request-header string, as Android's `CookieManager.getCookie(url)` returns it:
    /// `a=1; auth_token=…; b=2`.
    ///
    /// Pairs are split on `;`, then on the *first* `=` (values may hold `=`); whitespace around names and values
    /// is ignored; a value in double quotes is unquoted; a piece without `=` is skipped. Cookie names are
    /// case-sensitive (RFC 6265), so `AUTH_TOKEN` is a different cookie. When the name occurs more than once
    /// (cookies from several paths), the first token-shaped value wins: browsers list the most specific path
    /// first (RFC 6265 §5.4). A `Cookie` header carries no expiry; the token's own `exp` is used.
    public static func fromCookieHeader(_ header: String?, name: String = TokenCapture.defaultCookieName)
        -> StoredToken?
    {
        guard let header else { return nil }
        for piece in header.split(separator: ";", omittingEmptySubsequences: true) {
            guard let (cookieName, value) = Self.nameValue(piece), cookieName == name,
                BearerTokenSyntax.isValid(value)
            else { continue }
            return .captured(String(value), deliveredExpiry: nil)
        }
        return nil
    }

    /// From `Set-Cookie` response-header lines, in the order they came.
    ///
    /// Each line is `name=value` and attributes; attribute names are case-insensitive. `Max-Age` (seconds from
    /// `now`) takes precedence over `Expires` (an HTTP date), as RFC 6265 §5.3 says; a `Max-Age` of zero or
    /// less, or a past `Expires`, deletes the cookie. A later line for the same name replaces an earlier one,
    /// so a deletion after a token leaves no token. Lines may also be given combined with commas, as some
    /// APIs fold them (``setCookieLines(_:)`` splits them).
    public static func fromSetCookie(
        _ lines: [String],
        name: String = TokenCapture.defaultCookieName,
        now: Date = Date()
    ) -> StoredToken? {
        var found: StoredToken?
        for line in lines.flatMap(Self.setCookieLines) {
            let pieces = line.split(separator: ";", omittingEmptySubsequences: false)
            guard let first = pieces.first, let (cookieName, value) = Self.nameValue(first), cookieName == name else {
                continue
            }
            var maxAge: Int64?
            var expires: Date?
            for attribute in pieces.dropFirst() {
                let (attributeName, attributeValue) =
                    Self.nameValue(attribute).map { (String($0.0), String($0.1)) }
                    ?? (attribute.trimmingCharacters(in: .whitespaces), "")
                switch attributeName.lowercased() {
                case "max-age":
                    // RFC 6265 §5.2.2: an optional "-" and digits, else the attribute is ignored.
                    let digits = attributeValue.hasPrefix("-") ? attributeValue.dropFirst() : attributeValue[...]
                    if !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                        maxAge = Int64(attributeValue) ?? (attributeValue.hasPrefix("-") ? Int64.min : Int64.max)
                    }
                case "expires":
                    if let date = HTTPDate.parse(attributeValue) { expires = date }
                default:
                    continue
                }
            }
            let expiry: Date?
            if let maxAge {
                expiry = maxAge <= 0 ? .distantPast : now.addingTimeInterval(TimeInterval(min(maxAge, 400 * 86_400)))
            } else {
                expiry = expires
            }
            if let expiry, expiry <= now {
                found = nil  // deleted
            } else if BearerTokenSyntax.isValid(value) {
                found = .captured(String(value), deliveredExpiry: expiry)
            } else {
                found = nil  // overwritten with something that is not a token
            }
        }
        return found
    }

    /// From `HTTPCookie`s (`WKHTTPCookieStore.getAllCookies`, `HTTPCookieStorage`): the cookie `name` for
    /// `domain` (exact, or a parent domain the cookie was set for), with its expiry.
    public static func fromCookies(
        _ cookies: [HTTPCookie],
        domain: String,
        name: String = TokenCapture.defaultCookieName,
        now: Date = Date()
    ) -> StoredToken? {
        let host = domain.lowercased()
        for cookie in cookies where cookie.name == name {
            var cookieDomain = cookie.domain.lowercased()
            if cookieDomain.hasPrefix(".") { cookieDomain.removeFirst() }
            guard host == cookieDomain || host.hasSuffix("." + cookieDomain) else { continue }
            if let expiry = cookie.expiresDate, expiry <= now { continue }
            guard BearerTokenSyntax.isValid(cookie.value) else { continue }
            return .captured(cookie.value, deliveredExpiry: cookie.expiresDate)
        }
        return nil
    }

    /// Splits a `Set-Cookie` value that an API folded into one line with commas. A comma starts a new cookie
    /// only when `name=` follows it; the comma inside `Expires=Wed, 21 Oct 2015 …` does not.
    public static func setCookieLines(_ folded: String) -> [String] {
        var lines: [String] = []
        var current = ""
        var index = folded.startIndex
        while index < folded.endIndex {
            let character = folded[index]
            if character == ",", Self.startsCookie(folded[folded.index(after: index)...]) {
                lines.append(current)
                current = ""
            } else {
                current.append(character)
            }
            index = folded.index(after: index)
        }
        lines.append(current)
        return lines.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
    }

    /// Whether `rest` (after a comma) begins, after spaces, with an RFC 7230 token and `=`.
    private static func startsCookie(_ rest: Substring) -> Bool {
        let trimmed = rest.drop(while: { $0 == " " || $0 == "\t" })
        guard let equals = trimmed.firstIndex(of: "=") else { return false }
        let name = trimmed[trimmed.startIndex..<equals]
        return !name.isEmpty && name.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && scalar.value > 0x20 && scalar.value < 0x7F && !"()<>@,;:\\\"/[]?={} ".unicodeScalars.contains(scalar)
        }
    }

    /// `name=value` with whitespace trimmed and one pair of surrounding double quotes removed from the value;
    /// `nil` without `=` or with an empty name.
    static func nameValue(_ pair: Substring) -> (Substring, Substring)? {
        guard let equals = pair.firstIndex(of: "=") else { return nil }
        let name = Self.trimmed(pair[pair.startIndex..<equals])
        var value = Self.trimmed(pair[pair.index(after: equals)...])
        if value.count >= 2, value.first == "\"", value.last == "\"" {
            value = value.dropFirst().dropLast()
        }
        guard !name.isEmpty else { return nil }
        return (name, value)
    }

    private static func trimmed(_ text: Substring) -> Substring {
        var result = text
        while let first = result.first, first == " " || first == "\t" { result = result.dropFirst() }
        while let last = result.last, last == " " || last == "\t" { result = result.dropLast() }
        return result
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateHTTP

/// Keeps web pages away from the admin listener: its clients are tools (curl, probes, Prometheus,
/// `tokengate revoke`), never a browser.
///
/// Without `secret_file` (allowed on loopback) the listener trusts whoever can connect, and a browser on the
/// operator's machine can connect. A page can send it a "simple" cross-site POST (`fetch` with `no-cors`
/// and a `text/plain` body, which the admin API parses as JSON) that forces a user's cutoff back to 0 and
/// un-revokes their tokens; and through DNS rebinding (a name of the attacker's that resolves to 127.0.0.1)
/// it can read `/admin/users/…` and `/metrics` as a same-origin page. So:
///
/// - a request with `Origin`, or with `Sec-Fetch-Site` other than `none` (`none`: typed into the address
///   bar), comes from a page and is refused with 403 `cross_site_request`. Every current browser sends one of
///   them on such a request; tools send neither;
/// - on a plain listener without `secret_file`, `Host` must be `localhost` or an IP address (what a loopback
///   listener is reached by); any other name is refused with 403 `host_not_allowed`. That stops DNS rebinding
///   in a browser too old to send `Sec-Fetch-Site`. With a secret a page cannot send it, and over TLS a
///   rebinding name fails the certificate check, so there any name is allowed.
package enum AdminBrowserGuard {
    /// The refusal for `headers`, as `(error, description)`, or `nil` when the request may proceed.
    package static func refusal(for headers: HTTPHeaders, anyHostAllowed: Bool) -> (error: String, description: String)? {
        if headers.contains(name: "origin") {
            return ("cross_site_request", "the admin API does not answer requests from web pages (Origin)")
        }
        if let site = headers.first(name: "sec-fetch-site"), site.lowercased() != "none" {
            return ("cross_site_request", "the admin API does not answer requests from web pages (Sec-Fetch-Site)")
        }
        if !anyHostAllowed, let host = headers.first(name: "host"), !Self.isLoopbackStyleHost(host) {
            return (
                "host_not_allowed",
                "without secret_file or tls the admin API answers only Host localhost or an IP address"
            )
        }
        return nil
    }

    /// `localhost`, an IPv4 address or a bracketed IPv6 literal, each with an optional port.
    package static func isLoopbackStyleHost(_ host: String) -> Bool {
        var name = Substring(host)
        if name.hasPrefix("[") {
            guard let end = name.firstIndex(of: "]") else { return false }
            let rest = name[name.index(after: end)...]
            guard rest.isEmpty || Self.isPort(rest) else { return false }
            let literal = name[name.index(after: name.startIndex)..<end]
            return !literal.isEmpty && literal.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
        }
        if let colon = name.lastIndex(of: ":") {
            guard Self.isPort(name[colon...]) else { return false }
            name = name[..<colon]
        }
        if name.lowercased() == "localhost" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCIIDigit) && Int(part)! <= 255
        }
    }

    /// `:` followed by 1–5 digits.
    private static func isPort(_ text: Substring) -> Bool {
        text.first == ":" && (2...6).contains(text.count) && text.dropFirst().allSatisfy(\.isASCIIDigit)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { self >= "0" && self <= "9" }
}

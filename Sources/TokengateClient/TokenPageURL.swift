//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengatePercentEncoding

/// The URL the app opens in its embedded web view: the site's token page, optionally for a registered app
/// (then the token comes back by a redirect to the app's callback instead of the page).
///
/// It never holds a token; there is no way to put one in.
public struct TokenPageURL: Sendable, Hashable {
    public let url: URL

    /// - Parameters:
    ///   - site: `https://host[:port]` (plain `http` only for loopback hosts); no path beyond `/`, no query,
    ///     fragment or credentials.
    ///   - path: the token page's path on the site (the route's `path_prefix`), `/token` by default.
    ///   - app: the registered app's name (`apps: [{ name, callback }]` in tokengate's configuration), for the
    ///     callback flow.
    ///   - state: with `app`, a value the app checks in the callback (``randomState()``); 1–256 characters of
    ///     `A-Z a-z 0-9 - . _ ~`.
    ///   - pkce: with `app`, PKCE (RFC 7636): the page sends `code_challenge` and `code_challenge_method=S256`,
    ///     and the callback then holds a code to redeem with the verifier (``CodeRedemption``) instead of the
    ///     token. Use a fresh ``PKCEVerifier/random()`` for each visit.
    /// - Throws: ``TokengateClientError`` `insecureURL` or `invalidURL`.
    public init(
        site: URL,
        path: String = "/token",
        app: String? = nil,
        state: String? = nil,
        pkce: PKCEVerifier? = nil
    ) throws {
        try TokenPageURL.checkSite(site)
        guard path.hasPrefix("/"), !path.hasPrefix("//"), path.utf8.count <= 1024,
            path.utf8.allSatisfy({ byte in
                byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "?") && byte != UInt8(ascii: "#")
                    && byte != UInt8(ascii: "\\")
            })
        else {
            throw TokengateClientError(.invalidURL, "the token page path must be a plain path such as /token")
        }
        var query: [String] = []
        if let app {
            try TokenPageURL.checkApp(app)
            query.append("app=" + app)
        }
        if let state {
            guard app != nil else { throw TokengateClientError(.invalidURL, "state needs an app") }
            guard (1...256).contains(state.utf8.count), state.utf8.allSatisfy(PercentEncoding.isUnreserved) else {
                throw TokengateClientError(.invalidURL, "state must be 1 to 256 characters of A-Z a-z 0-9 - . _ ~")
            }
            query.append("state=" + state)
        }
        if let pkce {
            guard app != nil else { throw TokengateClientError(.invalidURL, "a code challenge needs an app") }
            query.append("code_challenge=" + pkce.challenge + "&code_challenge_method=" + PKCEVerifier.method)
        }
        var text = site.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        text += path
        if !query.isEmpty { text += "?" + query.joined(separator: "&") }
        guard let url = URL(string: text) else {
            throw TokengateClientError(.invalidURL, "cannot build the token page URL")
        }
        self.url = url
    }

    /// 32 random characters of base64url (192 bits) for ``init(site:path:app:state:pkce:)``'s `state`.
    public static func randomState() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        return String((0..<32).map { _ in alphabet[Int(generator.next() % 64)] })
    }

    /// A registered app's name: 1–64 letters, digits, `_` and `-` (it goes into the URL's query unescaped).
    static func checkApp(_ app: String) throws {
        guard (1...64).contains(app.utf8.count),
            app.utf8.allSatisfy({ PercentEncoding.isUnreserved($0) && $0 != UInt8(ascii: ".") && $0 != UInt8(ascii: "~") })
        else {
            throw TokengateClientError(.invalidURL, "app names hold letters, digits, _ and - only")
        }
    }

    static func checkSite(_ site: URL) throws {
        guard let scheme = site.scheme?.lowercased(), let host = site.host, !host.isEmpty else {
            throw TokengateClientError(.invalidURL, "the site URL needs a scheme and a host")
        }
        guard scheme == "https" || (scheme == "http" && TokenPageURL.isLoopback(host)) else {
            throw TokengateClientError(.insecureURL, "the token page must be https")
        }
        guard site.query == nil, site.fragment == nil, site.user == nil, site.password == nil,
            site.path.isEmpty || site.path == "/"
        else {
            throw TokengateClientError(.invalidURL, "the site URL must be just https://host[:port]")
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host.lowercased())
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengatePercentEncoding

// MARK: The app callback (`myapp://token#access_token=…&expires_in=…`, as OAuth 2.0 implicit grants deliver it).

extension TokenCapture {
    /// From the URL the app was opened with (or the web view was sent to), for the callback registered with
    /// tokengate.
    ///
    /// - Returns: `nil` when `url` is not for `callback` at all (another deep link); the token otherwise.
    /// - Throws: ``TokengateClientError``:
    ///   - `unauthorized` for `status=unauthorized&message=…` (the user canceled) or an OAuth `error=…`, with
    ///     the site's message in ``TokengateClientError/serverMessage``;
    ///   - `stateMismatch` when `expectedState` is given and the callback's `state` differs or is missing;
    ///   - `malformedCallback` for a broken escape, a parameter twice, a `token_type` other than bearer, an
    ///     `expires_in`/`expires_at` that is not a time, a value that is not token-shaped, or neither a token
    ///     nor an error.
    ///
    /// Parameters are read from the fragment (tokengate's form; a fragment never reaches a server), or from the
    /// query when the fragment has none of them (the Geni form). Values are percent-decoded once, `+` as
    /// space. `expires_in` is seconds from `now`; `expires_at` is UNIX seconds or a UTC date
    /// (`2014-01-05T11:57:26Z`, or OCLC's `2014-01-05 11:57:26Z`).
    ///   - `codeNeedsRedemption` when the callback holds a PKCE code: use
    ///     ``deliveryFromCallback(_:callback:expectedState:now:)``, which returns it.
    public static func fromCallback(
        _ url: URL,
        callback: String,
        expectedState: String? = nil,
        now: Date = Date()
    ) throws -> StoredToken? {
        switch try Self.deliveryFromCallback(url, callback: callback, expectedState: expectedState, now: now) {
        case nil:
            return nil
        case .token(let token):
            return token
        case .code:
            throw TokengateClientError(
                .codeNeedsRedemption,
                "the callback holds a PKCE code; read it with deliveryFromCallback and redeem it"
            )
        }
    }

    /// For an app that sent a PKCE challenge: the code the callback carries, to redeem with the verifier
    /// (``CodeRedemption``); `nil` when `url` is not for `callback`.
    ///
    /// A callback that carries a token instead is refused (`malformedCallback`): the site answers a challenge
    /// with a code, always, so a token there was put in by someone else. An app that intercepted the login's
    /// callback knows its `state`, and could open this app with its own account's token, logging the user into
    /// the attacker's account; a code it cannot make, and one it intercepted fails without the verifier.
    ///
    /// - Throws: as ``deliveryFromCallback(_:callback:expectedState:now:)``.
    public static func codeFromCallback(
        _ url: URL,
        callback: String,
        expectedState: String? = nil
    ) throws -> AuthorizationCode? {
        switch try Self.deliveryFromCallback(url, callback: callback, expectedState: expectedState) {
        case nil:
            return nil
        case .code(let code):
            return code
        case .token:
            throw TokengateClientError(
                .malformedCallback,
                "the callback holds a token where this login (PKCE) expects a code: refused, it was not the site's"
            )
        }
    }

    /// Like ``fromCallback(_:callback:expectedState:now:)``, for an app that may use PKCE or not (prefer
    /// ``codeFromCallback(_:callback:expectedState:)`` when it sent a challenge): a callback with
    /// `code=…` gives ``CallbackDelivery/code(_:)``, to redeem with the verifier (``CodeRedemption``); one with
    /// `access_token=…` gives ``CallbackDelivery/token(_:)``. A callback with both is malformed.
    ///
    /// - Throws: as ``fromCallback(_:callback:expectedState:now:)``; `malformedCallback` also for a code that
    ///   is not base64url and dots.
    public static func deliveryFromCallback(
        _ url: URL,
        callback: String,
        expectedState: String? = nil,
        now: Date = Date()
    ) throws -> CallbackDelivery? {
        guard Self.matches(url, callback: callback) else { return nil }
        let text = url.absoluteString
        var fragment: Substring?
        var query: Substring?
        var beforeFragment = Substring(text)
        if let hash = text.firstIndex(of: "#") {
            fragment = text[text.index(after: hash)...]
            beforeFragment = text[..<hash]
        }
        if let mark = beforeFragment.firstIndex(of: "?") {
            query = beforeFragment[beforeFragment.index(after: mark)...]
        }
        let fragmentParameters = try fragment.map(Self.parameters) ?? [:]
        let parameters: [String: String]
        if Self.interesting.contains(where: { fragmentParameters[$0] != nil }) {
            parameters = fragmentParameters
        } else {
            parameters = try query.map(Self.parameters) ?? [:]
        }

        if let expectedState, parameters["state"] != expectedState {
            throw TokengateClientError(.stateMismatch, "the callback's state is not the one this app sent")
        }
        if parameters["status"] == "unauthorized" || parameters["error"] != nil {
            let message = parameters["message"] ?? parameters["error_description"] ?? parameters["error"]
            throw TokengateClientError(
                .unauthorized,
                "the site did not hand over a token",
                serverMessage: message.map(Self.printable)
            )
        }
        if let code = parameters["code"] {
            guard parameters["access_token"] == nil else {
                throw TokengateClientError(.malformedCallback, "the callback holds both a code and a token")
            }
            guard let parsed = AuthorizationCode(code) else {
                throw TokengateClientError(.malformedCallback, "the callback's code is not a tokengate code")
            }
            return .code(parsed)
        }
        guard let token = parameters["access_token"] else {
            throw TokengateClientError(.malformedCallback, "the callback holds neither a token nor an error")
        }
        let cookie: StoredToken.CookieDelivery?
        if let type = parameters["token_type"], type.lowercased() == "cookie" {
            cookie = try Self.cookieDelivery(token: token, parameters: parameters, malformed: .malformedCallback)
        } else {
            guard BearerTokenSyntax.isValid(token) else {
                throw TokengateClientError(.malformedCallback, "the callback's access_token is not a bearer token")
            }
            if let type = parameters["token_type"], type.lowercased() != "bearer" {
                throw TokengateClientError(.malformedCallback, "the callback's token_type is not bearer")
            }
            guard parameters["cookie_name"] == nil, parameters["cookie_signature"] == nil else {
                throw TokengateClientError(.malformedCallback, "a bearer token has no cookie name")
            }
            cookie = nil
        }
        var expiry: Date?
        if let expiresIn = parameters["expires_in"] {
            expiry = try ExpiresIn.expiry(after: Int64(expiresIn), from: now, malformed: .malformedCallback)
        } else if let expiresAt = parameters["expires_at"] {
            guard let date = Self.parseExpiresAt(expiresAt) else {
                throw TokengateClientError(.malformedCallback, "expires_at is not a time")
            }
            expiry = date
        }
        return .token(.captured(token, deliveredExpiry: expiry, cookie: cookie))
    }

    /// `token_type=cookie`: the site's own login cookie (a token page that mints in the site's format), sent as
    /// `Cookie: cookie_name=access_token`, with `cookie_signature_name=cookie_signature` beside it for a signed
    /// pair (Express `cookie-session`'s `NAME.sig`). Every name and value is checked with RFC 6265's rules.
    static func cookieDelivery(
        token: String, parameters: [String: String], malformed: TokengateClientError.Code
    ) throws -> StoredToken.CookieDelivery {
        guard let name = parameters["cookie_name"], CookieValueSyntax.isValidName(name) else {
            throw TokengateClientError(malformed, "a cookie token needs a cookie_name that is a cookie name")
        }
        guard CookieValueSyntax.isValidValue(token) else {
            throw TokengateClientError(malformed, "the access_token is not a cookie value")
        }
        switch (parameters["cookie_signature_name"], parameters["cookie_signature"]) {
        case (nil, nil):
            return StoredToken.CookieDelivery(name: name)
        case (let signatureName?, let signature?):
            guard CookieValueSyntax.isValidName(signatureName), signatureName != name else {
                throw TokengateClientError(malformed, "cookie_signature_name is not a second cookie name")
            }
            guard CookieValueSyntax.isValidValue(signature) else {
                throw TokengateClientError(malformed, "cookie_signature is not a cookie value")
            }
            return StoredToken.CookieDelivery(name: name, signatureName: signatureName, signature: signature)
        default:
            throw TokengateClientError(malformed, "a signature cookie needs both its name and its value")
        }
    }

    /// The parameters this function reads; the fragment is used when it holds any of them.
    private static let interesting = ["access_token", "code", "status", "error", "state"]

    /// Whether `url` is for `callback`: the same scheme (case-insensitive), and the same text up to the query or
    /// fragment (host and path compared exactly, as registered).
    static func matches(_ url: URL, callback: String) -> Bool {
        func base(_ text: Substring) -> (scheme: String, rest: Substring)? {
            let end = text.firstIndex(where: { $0 == "?" || $0 == "#" }) ?? text.endIndex
            let head = text[..<end]
            guard let colon = head.firstIndex(of: ":") else { return nil }
            return (head[..<colon].lowercased(), head[head.index(after: colon)...])
        }
        guard let expected = base(Substring(callback)), let actual = base(Substring(url.absoluteString)) else {
            return false
        }
        return expected.scheme == actual.scheme && expected.rest == actual.rest
    }

    /// Decoded parameters; a broken pair, or any of the interesting ones twice, is malformed.
    private static func parameters(_ text: Substring) throws -> [String: String] {
        guard text.utf8.count <= 16_384, let pairs = URLEncoding.pairs(text) else {
            throw TokengateClientError(.malformedCallback, "the callback's parameters are not URL-encoded")
        }
        var result: [String: String] = [:]
        for (name, value) in pairs {
            if result[name] != nil {
                throw TokengateClientError(.malformedCallback, "a callback parameter appears twice")
            }
            result[name] = value
        }
        return result
    }

    static func parseExpiresAt(_ value: String) -> Date? {
        var text = value.trimmingCharacters(in: .whitespaces)
        // OCLC shows `2014-01-05%2011:57:26Z`: encoded twice on the way; decode what is left once more.
        if text.contains("%"), let again = PercentEncoding.decode(text.utf8) { text = again }
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let seconds = Int64(text),
            seconds < 253_402_300_800
        {
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime]
        if let date = iso.date(from: text.replacingOccurrences(of: " ", with: "T")) { return date }
        return nil
    }

    /// Printable text only, at most 200 characters: the message came from a URL anyone can craft.
    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F && !(0x80..<0xA0).contains($0.value) }).prefix(200))
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig
import TokengatePercentEncoding
import TokengateTokens
import TokengateHTTP

/// A click on the confirmation page's "continue": `POST <page>?app=…[&state=…][&code_challenge=…&
/// code_challenge_method=S256]&confirm=1` with the form body `confirmation=<value>`.
///
/// The query is the login's own (``TokenPageRequest``, read as the `GET` reads it, with ``marker``): the page
/// builds it (``target(for:)``), and the form posts it back as it is, so the browser's address bar and the
/// login redirect (when the session ended meanwhile) show the same login. The body holds only the value
/// (``TokenPageConfirmationKey``), once: which of two values would count?
///
/// ### Why the marker is in the query
/// `POST <page>` is already a PKCE code redemption (``TokenPageRedemptionRequest``), which carries no query. The
/// marker tells the two apart from the request head alone, before a byte of the body is read, so each has its
/// own checks (the confirmation's `Sec-Fetch-Site` and `Origin`), its own size limit and its own reason codes,
/// and a redemption is read exactly as before. Any `confirm` in a `POST`'s query makes it a confirmation.
struct TokenPageConfirmationRequest: Sendable, Equatable {
    /// The query parameter that marks a confirmation (``isConfirmation(target:)``), always `confirm=1`.
    static let marker = "confirm"
    /// The largest body read: the form holds one 55-character value.
    static let maximumBody = 1024

    /// The login being confirmed, read from the query; its ``TokenPageRequest/app`` is set and it is no cancel.
    var request: TokenPageRequest
    var app: TokenPageApp
    /// The value of the body's `confirmation` field, not checked yet.
    var value: String

    /// Why a `POST` is not a confirmation that can be checked. The descriptions hold nothing of the request.
    enum Refusal: Error, Sendable, Equatable {
        /// The query is not one the page builds: the page's own refusal of it, when it has one.
        case query(TokenPageRequest.Refusal?)
        /// The body: `confirmation` missing, repeated or not URL-encoded.
        case body(String)

        var description: String {
            switch self {
            case .query: "the address is not one this page made"
            case .body(let problem): problem
            }
        }
    }

    /// Whether a request target (a `POST`'s) carries the ``marker``: it is then a confirmation, never a redemption.
    static func isConfirmation(target: String) -> Bool {
        guard let mark = target.firstIndex(of: "?") else { return false }
        return FormURLEncoded.pairs(Array(target[target.index(after: mark)...].utf8)).contains { $0.name == Self.marker }
    }

    static func parse(target: String, body: [UInt8], apps: [TokenPageApp]) -> Result<Self, Refusal> {
        let request: TokenPageRequest
        switch TokenPageRequest.parse(target: target, isHead: false, apps: apps) {
        case .request(let parsed): request = parsed
        case .refused(let refusal): return .failure(.query(refusal))
        }
        // Exactly `confirm=1`, once, on a login for an app that is not a cancel (cancel is a plain `GET`).
        let query = target.firstIndex(of: "?").map { Array(target[target.index(after: $0)...].utf8) } ?? []
        let markers = FormURLEncoded.values(named: Self.marker, in: query)
        guard markers == ["1"], let app = request.app, !request.cancel else { return .failure(.query(nil)) }

        var values: [String] = []
        for pair in FormURLEncoded.pairs(body) where pair.name == "confirmation" {
            guard let value = FormURLEncoded.decode(pair.rawValue) else {
                return .failure(.body("confirmation is not URL-encoded"))
            }
            values.append(value)
        }
        guard values.count <= 1 else { return .failure(.body("confirmation is given twice")) }
        guard let value = values.first, !value.isEmpty else { return .failure(.body("confirmation is missing")) }
        return .success(TokenPageConfirmationRequest(request: request, app: app, value: value))
    }

    /// The query the confirmation page's form posts to, relative to the page (`?app=…&confirm=1`): the browser
    /// keeps the page's path, so the click reaches the route that showed the page whatever its prefix.
    static func target(for request: TokenPageRequest) -> String {
        var query = "?app=" + PercentEncoding.encode(request.app?.name ?? "")
        if let state = request.state { query += "&state=" + PercentEncoding.encode(state) }
        if let challenge = request.challenge {
            query += "&code_challenge=" + PercentEncoding.encode(challenge.text) + "&code_challenge_method=S256"
        }
        return query + "&" + Self.marker + "=1"
    }
}

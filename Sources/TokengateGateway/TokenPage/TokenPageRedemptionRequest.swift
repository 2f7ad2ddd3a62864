//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens
import TokengateHTTP

/// A PKCE code redemption (RFC 7636 §4.5, RFC 6749 §4.1.3): the form body of `POST` to the token page.
///
/// Fields, each exactly once (others are ignored, as RFC 6749 §3.2 asks): `grant_type=authorization_code`,
/// `code`, `code_verifier` (43–128 characters of `A-Z a-z 0-9 - . _ ~`) and `app`, the registered app the
/// code was issued to (or OAuth's own name for it, `client_id`, which OAuth client libraries send; both may be
/// given if they agree). A field given twice is refused: which one would count?
struct TokenPageRedemptionRequest: Sendable, Equatable {
    /// The largest body read: the four fields fit in well under 1 KiB for any user id the page mints for.
    static let maximumBody = 4096

    var code: String
    var verifier: String
    var app: String

    /// Why a body is not a redemption; each maps to an RFC 6749 §5.2 error.
    enum Refusal: Error, Sendable, Equatable {
        /// A field missing, repeated or not URL-encoded; `code_verifier` malformed.
        case invalidRequest(String)
        /// `grant_type` other than `authorization_code`.
        case unsupportedGrantType
    }

    static func parse(_ body: [UInt8]) -> Result<TokenPageRedemptionRequest, Refusal> {
        var seen: [String: String]
        switch Self.fields(body, Self.fields + ["client_id"]) {
        case .success(let fields): seen = fields
        case .failure(let refusal): return .failure(refusal)
        }
        switch Self.app(seen) {
        case .success(let app): seen["app"] = app
        case .failure(let refusal): return .failure(refusal)
        }
        for name in Self.fields where seen[name]?.isEmpty ?? true {
            return .failure(.invalidRequest("\(name) is missing"))
        }
        guard seen["grant_type"] == "authorization_code" else { return .failure(.unsupportedGrantType) }
        guard let verifier = seen["code_verifier"], CodeChallenge.isValidVerifier(verifier) else {
            return .failure(.invalidRequest("code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~"))
        }
        return .success(TokenPageRedemptionRequest(code: seen["code"]!, verifier: verifier, app: seen["app"]!))
    }

    /// The fields read, in the order a missing one is named.
    private static let fields = ["grant_type", "code", "code_verifier", "app"]

    /// The `names` fields of a form body, each at most once and URL-decoded.
    static func fields(_ body: [UInt8], _ names: [String]) -> Result<[String: String], Refusal> {
        var seen: [String: String] = [:]
        for pair in FormURLEncoded.pairs(body) where names.contains(pair.name) {
            guard seen[pair.name] == nil else { return .failure(.invalidRequest("\(pair.name) is given twice")) }
            guard let value = FormURLEncoded.decode(pair.rawValue) else {
                return .failure(.invalidRequest("\(pair.name) is not URL-encoded"))
            }
            seen[pair.name] = value
        }
        return .success(seen)
    }

    /// `app`, or `client_id`, or both when they agree; nil (and later "app is missing") when neither is given.
    static func app(_ fields: [String: String]) -> Result<String?, Refusal> {
        switch (fields["app"], fields["client_id"]) {
        case (let app?, let client?) where app != client:
            return .failure(.invalidRequest("app and client_id name different apps"))
        case (let app?, _): return .success(app)
        case (nil, let client): return .success(client)
        }
    }

    /// The body's `grant_type`, when it is given exactly once (a refresh or a code redemption is told apart by it).
    static func grantType(_ body: [UInt8]) -> String? {
        guard case .success(let fields) = Self.fields(body, ["grant_type"]) else { return nil }
        return fields["grant_type"]
    }
}

/// A refresh (RFC 6749 §6): `grant_type=refresh_token`, `refresh_token` and `app` (or `client_id`), each once.
/// `scope` is not supported: a refresh gives what the login gave.
struct TokenPageRefreshRequest: Sendable, Equatable {
    var refreshToken: String
    var app: String

    static func parse(_ body: [UInt8]) -> Result<TokenPageRefreshRequest, TokenPageRedemptionRequest.Refusal> {
        var seen: [String: String]
        switch TokenPageRedemptionRequest.fields(body, ["grant_type", "refresh_token", "app", "client_id"]) {
        case .success(let fields): seen = fields
        case .failure(let refusal): return .failure(refusal)
        }
        switch TokenPageRedemptionRequest.app(seen) {
        case .success(let app): seen["app"] = app
        case .failure(let refusal): return .failure(refusal)
        }
        for name in ["refresh_token", "app"] where seen[name]?.isEmpty ?? true {
            return .failure(.invalidRequest("\(name) is missing"))
        }
        guard seen["grant_type"] == "refresh_token" else { return .failure(.unsupportedGrantType) }
        return .success(TokenPageRefreshRequest(refreshToken: seen["refresh_token"]!, app: seen["app"]!))
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens
import TokengateHTTP

/// A PKCE code redemption (RFC 7636 §4.5, RFC 6749 §4.1.3): the form body of `POST` to the token page.
///
/// Fields, each exactly once (others are ignored, as RFC 6749 §3.2 asks): `grant_type=authorization_code`,
/// `code`, `code_verifier` (43–128 characters of `A-Z a-z 0-9 - . _ ~`) and `app`, the registered app the
/// code was issued to (OAuth's `client_id`). A field given twice is refused: which one would count?
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
        var seen: [String: String] = [:]
        for pair in FormURLEncoded.pairs(body) where Self.fields.contains(pair.name) {
            guard seen[pair.name] == nil else { return .failure(.invalidRequest("\(pair.name) is given twice")) }
            guard let value = FormURLEncoded.decode(pair.rawValue) else {
                return .failure(.invalidRequest("\(pair.name) is not URL-encoded"))
            }
            seen[pair.name] = value
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
}

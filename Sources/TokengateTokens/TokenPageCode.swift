//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// What a token page authorization code (PKCE, RFC 7636) carries: enough to mint, at redemption, the token
/// the page would have put in the callback, and to check who redeems it.
///
/// The code travels through the browser to the app's callback, where any app that claimed the scheme can read
/// it; it is worth nothing without the verifier only the real app holds. It is sealed, not encrypted
/// (``TokenPageCodeKey``): its payload is readable, and holds nothing secret (the user id, the app name, the
/// challenge, two times).
///
/// Payload: `{"v":1,"sub":…,"app":…,"cc":…,"iat":…,"exp":…}`.
public struct TokenPageCode: Sendable, Equatable {
    /// How long a code lives: long enough for a phone to switch apps and make one request, short enough that a
    /// leaked code and verifier pair is soon useless.
    public static let lifetime: Int64 = 60

    /// The logged-in user the token will be for.
    public var subject: String
    /// The registered app the code was issued to (the callback it went to).
    public var app: String
    public var challenge: CodeChallenge
    /// When the page issued the code: cutoffs are checked against this at redemption, as they would have been
    /// against the `iat` of a token minted by the page itself.
    public var issuedAt: Int64
    public var expiresAt: Int64

    public init(subject: String, app: String, challenge: CodeChallenge, issuedAt: Int64, expiresAt: Int64? = nil) {
        self.subject = subject
        self.app = app
        self.challenge = challenge
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt ?? issuedAt + Self.lifetime
    }

    /// The JSON payload, built with the same string escaping as tokens.
    var payload: [UInt8] {
        var json = "{\"v\":1,\"sub\":" + TokenSigner.jsonString(self.subject)
        json += ",\"app\":" + TokenSigner.jsonString(self.app)
        json += ",\"cc\":" + TokenSigner.jsonString(self.challenge.text)
        json += ",\"iat\":\(self.issuedAt),\"exp\":\(self.expiresAt)}"
        return Array(json.utf8)
    }

    /// Reads a payload this type wrote. Only ever called on bytes whose MAC checked out, so a payload that does
    /// not parse is a bug or another version's code; either way it is refused, never guessed at.
    init?(payload: [UInt8]) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
            (object["v"] as? NSNumber)?.int64Value == 1,
            let subject = object["sub"] as? String,
            let app = object["app"] as? String,
            let challengeText = object["cc"] as? String,
            let challenge = CodeChallenge(challengeText),
            let issuedAt = (object["iat"] as? NSNumber)?.int64Value,
            let expiresAt = (object["exp"] as? NSNumber)?.int64Value
        else { return nil }
        self.init(subject: subject, app: app, challenge: challenge, issuedAt: issuedAt, expiresAt: expiresAt)
    }
}

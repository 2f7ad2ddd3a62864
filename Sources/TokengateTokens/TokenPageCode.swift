//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// What a token page authorization code (PKCE, RFC 7636) carries: enough to mint, at redemption, the token
/// the page would have put in the callback, and to check who redeems it and where.
///
/// The code travels through the browser to the app's callback, where any app that claimed the scheme receives
/// it; it is worth nothing without the verifier only the real app holds. It is encrypted and authenticated
/// (``TokenPageCodeKey``): such an app cannot read who logged in (the user id is often an e-mail address), nor
/// change anything in it.
///
/// Payload, before encryption: `{"v":3,"sub":…,"app":…,"page":…,"cc":…,"iat":…,"exp":…}` (`v` is the code
/// format's version, the same as the code's first byte).
public struct TokenPageCode: Sendable, Equatable {
    /// How long a code lives: long enough for a phone to switch apps and make one request, short enough that a
    /// leaked code and verifier pair is soon useless.
    public static let lifetime: Int64 = 60

    /// The logged-in user the token will be for.
    public var subject: String
    /// The registered app the code was issued to (the callback it went to).
    public var app: String
    /// The token page that issued it (its host and path prefix): only that page redeems it, with its own
    /// `token_lifetime`, so a code cannot be taken to a page with a looser policy.
    public var page: String
    public var challenge: CodeChallenge
    /// When the page issued the code; the code expires ``lifetime`` seconds later. It is the `iat` of the token
    /// minted at redemption, as if the page had minted it then: a password change or "disable mobile apps" after
    /// this moment kills that token, however late in the 60 seconds the code is redeemed and however late the
    /// gateway learns of the cutoff (a redemption checked against a snapshot that does not have it yet).
    public var issuedAt: Int64
    public var expiresAt: Int64
    /// Session members only the site knows (JSON pointer → value), from the whoami answer at issue time, for a
    /// page that mints in the site's format (Django's session auth hash): the redemption has no whoami answer.
    /// Sealed with the rest, so the app never reads them.
    public var siteValues: [String: String]

    public init(
        subject: String,
        app: String,
        page: String,
        challenge: CodeChallenge,
        issuedAt: Int64,
        expiresAt: Int64? = nil,
        siteValues: [String: String] = [:]
    ) {
        self.siteValues = siteValues
        self.subject = subject
        self.app = app
        self.page = page
        self.challenge = challenge
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt ?? issuedAt + Self.lifetime
    }

    /// The JSON payload, built with the same string escaping as tokens.
    var payload: [UInt8] {
        var json = "{\"v\":\(TokenPageCodeKey.version),\"sub\":" + TokenSigner.jsonString(self.subject)
        json += ",\"app\":" + TokenSigner.jsonString(self.app)
        json += ",\"page\":" + TokenSigner.jsonString(self.page)
        json += ",\"cc\":" + TokenSigner.jsonString(self.challenge.text)
        json += ",\"iat\":\(self.issuedAt),\"exp\":\(self.expiresAt)"
        if !self.siteValues.isEmpty {
            json += ",\"site\":{"
            json += self.siteValues.sorted { $0.key < $1.key }
                .map { TokenSigner.jsonString($0.key) + ":" + TokenSigner.jsonString($0.value) }.joined(separator: ",")
            json += "}"
        }
        json += "}"
        return Array(json.utf8)
    }

    /// Reads a payload this type wrote. Only ever called on bytes whose tag checked out, so a payload that does
    /// not parse is a bug or another version's code; either way it is refused, never guessed at.
    init?(payload: [UInt8]) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
            (object["v"] as? NSNumber)?.int64Value == Int64(TokenPageCodeKey.version),
            let subject = object["sub"] as? String,
            let app = object["app"] as? String,
            let page = object["page"] as? String,
            let challengeText = object["cc"] as? String,
            let challenge = CodeChallenge(challengeText),
            let issuedAt = (object["iat"] as? NSNumber)?.int64Value,
            let expiresAt = (object["exp"] as? NSNumber)?.int64Value
        else { return nil }
        var siteValues: [String: String] = [:]
        if let site = object["site"] {
            guard let values = site as? [String: String] else { return nil }
            siteValues = values
        }
        self.init(
            subject: subject, app: app, page: page, challenge: challenge, issuedAt: issuedAt, expiresAt: expiresAt,
            siteValues: siteValues)
    }
}

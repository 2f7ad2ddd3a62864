//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateSessionCookies
import TokengateTokens

/// Each framework logs users in with its own session code; tokengate accepts the cookie, refuses it tampered,
/// signed with another secret, expired, or logged in before the user's cutoff; and a cookie tokengate mints is
/// read back by the framework's own login check.
@Suite(.serialized) struct RealFrameworkTests {
    static let secret = "tokengate-test-only-" + String(repeating: "5ec7e7", count: 10)
    static let otherSecret = "another-site-test-only-" + String(repeating: "0dd", count: 10)

    /// Under CI the frameworks are installed by scripts/install-deps.sh test: a missing one is a failure there,
    /// not a silent skip.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["CI"] != nil, "only under CI"))
    func everyFrameworkIsInstalledUnderCI() {
        for app in FrameworkApp.all {
            #expect(app.isInstalled, "\(app.name) is not installed: run scripts/install-deps.sh test")
        }
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    /// One letter of the MAC-covered part changed to another letter of the same alphabet, so that the value keeps
    /// its encoding and only the authenticity check can catch it (never inside a `%XX` escape).
    static func tamper(_ value: String) -> String {
        var bytes = Array(value.utf8)
        var index = bytes.count / 3
        while index < bytes.count {
            let byte = bytes[index]
            let isLetter = (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            let escaped = (index >= 1 && bytes[index - 1] == UInt8(ascii: "%"))
                || (index >= 2 && bytes[index - 2] == UInt8(ascii: "%"))
            if isLetter, !escaped { break }
            index += 1
        }
        bytes[index] = bytes[index] == UInt8(ascii: "k") ? UInt8(ascii: "m") : UInt8(ascii: "k")
        return String(decoding: bytes, as: UTF8.self)
    }

    func verifier(_ app: FrameworkApp, secret: String = Self.secret) throws -> SessionCookieVerifier {
        try SessionCookieVerifier(
            format: app.format, secrets: [SessionCookieSecret(bytes: Array(secret.utf8))], fields: app.fields)
    }

    @Test(arguments: FrameworkApp.all)
    func theFrameworksOwnCookie(_ app: FrameworkApp) throws {
        try #require(app.isInstalled, "\(app.name) is not installed (scripts/install-deps.sh test)")
        let now = Self.now()
        let loginAt = now - 100
        let made = try app.run(
            secret: Self.secret,
            ops: [
                ["op": "login", "user": "42", "login_at": loginAt, "api": false],
                ["op": "login", "user": "7", "login_at": loginAt, "api": true],
            ])
        let cookie = try #require(made[0]["cookie"] as? String)
        let signature = made[0]["sig"] as? String
        let apiCookie = try #require(made[1]["cookie"] as? String)
        let apiSignature = made[1]["sig"] as? String
        let verifier = try self.verifier(app)

        // Accepted, with the user id, the login time and the kind.
        let result = verifier.verify(cookie, signature: signature, accept: .any, cutoffs: .empty, now: now)
        let token = try #require(result.token, "\(app.name): \(result)")
        #expect(token.subject == "42")
        #expect(token.issuedAt == loginAt)
        #expect(token.kind == .session)
        let api = verifier.verify(apiCookie, signature: apiSignature, accept: .any, cutoffs: .empty, now: now)
        #expect(api.token?.subject == "7")
        #expect(api.token?.kind == .api)
        #expect(
            verifier.verify(apiCookie, signature: apiSignature, accept: .session, cutoffs: .empty, now: now).rejection
                == .wrongKind)

        // Tampered, or signed with another site's secret.
        let tampered = Self.tamper(cookie)
        #expect(
            verifier.verify(tampered, signature: signature, accept: .any, cutoffs: .empty, now: now).rejection
                == .badSignature, "\(app.name): tampered \(tampered)")
        #expect(
            try self.verifier(app, secret: Self.otherSecret).verify(
                cookie, signature: signature, accept: .any, cutoffs: .empty, now: now
            ).rejection == .badSignature)

        // Expired: after the session max-age (or the format's own, whichever comes first).
        let late = verifier.verify(cookie, signature: signature, accept: .any, cutoffs: .empty, now: now + 400 * 86_400)
        #expect(late.rejection?.reason == .expired, "\(app.name): \(late)")

        // Logged in before the user's cutoff (a cutoff at the login's very second lets it live).
        let cutoff = CutoffSnapshot(users: [CutoffUserKey("42"): UserCutoffs(revokedBefore: loginAt + 1)])
        #expect(
            verifier.verify(cookie, signature: signature, accept: .any, cutoffs: cutoff, now: now).rejection == .revoked)
        let atCutoff = CutoffSnapshot(users: [CutoffUserKey("42"): UserCutoffs(revokedBefore: loginAt)])
        #expect(verifier.verify(cookie, signature: signature, accept: .any, cutoffs: atCutoff, now: now).token != nil)

        // A cookie tokengate mints is read back by the framework's own login check; a tampered one is not.
        let minter = try SessionCookieMinter(
            format: app.format, secrets: [SessionCookieSecret(bytes: Array(Self.secret.utf8))], fields: app.fields)
        var base = SessionJSONValue.object([])
        if case .django = app.format {
            // What Django's get_user checks besides the id: the backend and the session auth hash, which a site
            // hands the token page in its whoami answer.
            let hash = try #require(made[0]["auth_hash"] as? String)
            base = .object([
                ("_auth_user_backend", .string("django.contrib.auth.backends.ModelBackend")),
                ("_auth_user_hash", .string(hash)),
            ])
        }
        let minted = try minter.mint(userID: "42", loginTime: now - 5, base: base, now: now)
        #expect(verifier.verify(minted.value, signature: minted.signature, accept: .any, cutoffs: .empty, now: now).token?.subject == "42")
        let read = try app.run(
            secret: Self.secret,
            ops: [
                ["op": "read", "cookie": minted.value, "sig": minted.signature ?? ""],
                ["op": "read", "cookie": cookie, "sig": signature ?? ""],
                ["op": "read", "cookie": Self.tamper(minted.value), "sig": minted.signature ?? ""],
            ])
        #expect(read[0]["user"] as? String == "42", "\(app.name) did not read the minted cookie \(minted.value): \(read[0])")
        #expect(read[1]["user"] as? String == "42", "\(app.name) did not read its own cookie: \(read[1])")
        #expect(read[2]["user"] as? String == nil, "\(app.name) read a tampered cookie: \(read[2])")
    }

    @Test func railsFormatExpiryFromExpireAfter() throws {
        let app = FrameworkApp.rails70
        try #require(app.isInstalled, "Rails is not installed (scripts/install-deps.sh test)")
        let now = Self.now()
        let made = try app.run(secret: Self.secret, ops: [["op": "login", "user": "42", "login_at": now - 10]])
        let cookie = try #require(made[0]["cookie"] as? String)
        let verifier = try self.verifier(app)
        // expire_after: 3600 puts the expiry in the metadata; it comes before the session max-age.
        let token = try #require(verifier.verify(cookie, accept: .any, cutoffs: .empty, now: now).token)
        let expiresAt = try #require(token.expiresAt)
        #expect(abs(expiresAt - (now + 3600)) <= 5)
        #expect(verifier.verify(cookie, accept: .any, cutoffs: .empty, now: now + 7200).rejection == .formatExpired)
        // The 6.1 (SHA1) key cannot open a cookie sealed under the 7.0 (SHA256) key.
        let sha1 = try SessionCookieVerifier(
            format: .rails(RailsCookieOptions(version: .v6_1, cookieName: "_app_session")),
            secrets: [SessionCookieSecret(bytes: Array(Self.secret.utf8))], fields: app.fields)
        #expect(sha1.verify(cookie, accept: .any, cutoffs: .empty, now: now).rejection == .badSignature)
    }

    @Test func railsSignedCookie() throws {
        let app = FrameworkApp.rails61
        try #require(app.isInstalled, "Rails is not installed (scripts/install-deps.sh test)")
        let now = Self.now()
        let made = try app.run(secret: Self.secret, ops: [["op": "login", "user": "42", "login_at": now - 10]])
        let signed = try #require(made[0]["signed"] as? String)
        let format = SessionCookieFormat.rails(
            RailsCookieOptions(version: .v6_1, cookieName: "login", protection: .signed))
        let fields = SessionCookieFields(
            userID: SessionJSONPointer("/user_id")!, loginTime: SessionJSONPointer("/login_at")!)
        let secrets = [try SessionCookieSecret(bytes: Array(Self.secret.utf8))]
        let verifier = try SessionCookieVerifier(format: format, secrets: secrets, fields: fields)
        #expect(verifier.verify(signed, accept: .any, cutoffs: .empty, now: now).token?.subject == "42")
        #expect(verifier.verify(Self.tamper(signed), accept: .any, cutoffs: .empty, now: now).rejection == .badSignature)
        let minted = try SessionCookieMinter(format: format, secrets: secrets, fields: fields).mint(
            userID: "42", loginTime: now, now: now)
        let read = try app.run(secret: Self.secret, ops: [["op": "read_signed", "cookie": minted.value]])
        #expect(read[0]["user"] as? String == "42", "Rails did not read the minted signed cookie: \(read[0])")
    }
}

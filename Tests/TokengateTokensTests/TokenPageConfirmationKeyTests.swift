//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

/// The token page's confirmation values (``TokenPageConfirmationKey``): `base64url(2 ‖ issued-at (ms) ‖ HMAC)` over
/// the page, app, state, challenge, user and the confirmation cookie's SHA-256, under a key derived from the
/// signing key. Times are UNIX milliseconds; `clicked` is the earliest click that counts (one second later).
struct TokenPageConfirmationKeyTests {
    static let now: Int64 = 1_760_000_000_123
    static let clicked = now + TokenPageConfirmationKey.minimumDelayMilliseconds
    static let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    static let cookie = "Yx3vQm2c0fN8pL5sR1tW7uZ9aB4dE6gH2jK0mN3pQ5s"

    static func signer(_ algorithm: TokenAlgorithm = .hs256) throws -> (TokenSigner, String) {
        let generated = try KeyGenerator.generate(algorithm: algorithm, keyID: "k1")
        return (try TokenSigner(privateJWKS: Array(generated.privateJWKS.utf8)), generated.privateJWKS)
    }

    static func confirmation(
        page: String = "/token",
        app: String = "ios",
        state: String? = "S1",
        challenge: String? = Self.challenge,
        user: String = "alice",
        cookie: String = Self.cookie
    ) -> TokenPageConfirmation {
        TokenPageConfirmation(page: page, app: app, state: state, challenge: challenge, user: user, cookie: cookie)
    }

    @Test("a value checks for the same confirmation at any instance with the same signing key, within 5 minutes",
        arguments: [TokenAlgorithm.hs256, .es256, .edDSA, .rs256])
    func valid(_ algorithm: TokenAlgorithm) throws {
        let (signer, jwks) = try Self.signer(algorithm)
        let value = signer.tokenPageConfirmationKey.issue(Self.confirmation(), nowMilliseconds: Self.now)
        #expect(value.utf8.count == 55)
        #expect(value.utf8.allSatisfy { byte in
            (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        })
        let other = try TokenSigner(privateJWKS: Array(jwks.utf8)).tokenPageConfirmationKey
        for now in [Self.clicked, Self.clicked + 1, Self.now + TokenPageConfirmationKey.lifetime * 1000 - 1] {
            #expect(other.check(value, for: Self.confirmation(), nowMilliseconds: now, clockSkew: 0) == nil)
        }
        // Without state or challenge (an app with `pkce: optional` that sends neither).
        let bare = Self.confirmation(state: nil, challenge: nil)
        #expect(other.check(signer.tokenPageConfirmationKey.issue(bare, nowMilliseconds: Self.now), for: bare, nowMilliseconds: Self.clicked, clockSkew: 0) == nil)
    }

    @Test("an expired value, and one from the future beyond the clock skew, are refused")
    func times() throws {
        let key = try Self.signer().0.tokenPageConfirmationKey
        let value = key.issue(Self.confirmation(), nowMilliseconds: Self.now)
        #expect(key.check(value, for: Self.confirmation(), nowMilliseconds: Self.now + 300_000, clockSkew: 0) == .expired)
        #expect(key.check(value, for: Self.confirmation(), nowMilliseconds: Self.now + 86_400_000, clockSkew: 0) == .expired)
        #expect(key.check(value, for: Self.confirmation(), nowMilliseconds: Self.now - 1, clockSkew: 0) == .issuedInFuture)
        // Within the skew it is not "issued in the future": it is too soon, by this clock (see `tooSoon`).
        #expect(key.check(value, for: Self.confirmation(), nowMilliseconds: Self.now - 30_000, clockSkew: 30) == .tooSoon)
        #expect(key.check(value, for: Self.confirmation(), nowMilliseconds: Self.now - 30_001, clockSkew: 30) == .issuedInFuture)
    }

    /// Double-clickjacking: the second press of a double click lands on "continue" a few hundred milliseconds
    /// after the page was made, before the user has seen it.
    @Test("a click less than a second after the page was made is too soon; one at a second counts")
    func tooSoon() throws {
        let key = try Self.signer().0.tokenPageConfirmationKey
        let value = key.issue(Self.confirmation(), nowMilliseconds: Self.now)
        for early in [Self.now, Self.now + 1, Self.now + 200, Self.clicked - 1] {
            #expect(key.check(value, for: Self.confirmation(), nowMilliseconds: early, clockSkew: 30) == .tooSoon)
        }
        #expect(key.check(value, for: Self.confirmation(), nowMilliseconds: Self.clicked, clockSkew: 30) == nil)
        // Made by a clock ahead of this one (another instance running fast, or this clock stepped back): too soon
        // too, or a clock difference would beat the delay.
        for behind in [Self.now - 1, Self.now - 150, Self.now - 5_000] {
            #expect(key.check(value, for: Self.confirmation(), nowMilliseconds: behind, clockSkew: 30) == .tooSoon)
        }
        // The tag first: a forged value is a mismatch, never too soon.
        #expect(key.check(value, for: Self.confirmation(user: "mallory"), nowMilliseconds: Self.now, clockSkew: 30) == .mismatch)
    }

    @Test("a version-1 value (issue time in seconds) is malformed")
    func versionOne() throws {
        let key = try Self.signer().0.tokenPageConfirmationKey
        var bytes = try #require(Base64URL.decode(key.issue(Self.confirmation(), nowMilliseconds: Self.now)))
        bytes[0] = 1
        #expect(key.check(Base64URL.encode(bytes), for: Self.confirmation(), nowMilliseconds: Self.clicked, clockSkew: 0) == .malformed)
    }

    @Test("a value made for another session, user, page, app, state or challenge does not match")
    func boundToEverything() throws {
        let key = try Self.signer().0.tokenPageConfirmationKey
        let value = key.issue(Self.confirmation(), nowMilliseconds: Self.now)
        let others: [TokenPageConfirmation] = [
            Self.confirmation(cookie: Self.cookie + "x"),
            Self.confirmation(cookie: "cookie-of-mallory"),
            Self.confirmation(user: "mallory"),
            Self.confirmation(page: "/other-token"),
            Self.confirmation(app: "android"),
            Self.confirmation(state: "S2"),
            Self.confirmation(state: nil),
            Self.confirmation(challenge: "A" + String(Self.challenge.dropFirst())),
            Self.confirmation(challenge: nil),
            // Fields run together differently: the lengths keep them apart.
            Self.confirmation(app: "io", state: "sS1"),
        ]
        for other in others {
            #expect(key.check(value, for: other, nowMilliseconds: Self.clicked, clockSkew: 0) == .mismatch)
        }
        // And the attacker's own value (its cookie, its login) does not confirm the victim's.
        let attackers = key.issue(Self.confirmation(user: "mallory", cookie: "cookie-of-mallory"), nowMilliseconds: Self.now)
        #expect(key.check(attackers, for: Self.confirmation(), nowMilliseconds: Self.clicked, clockSkew: 0) == .mismatch)
    }

    @Test("a tampered value, one from another signing key and a malformed one are refused")
    func tamperedAndMalformed() throws {
        let key = try Self.signer().0.tokenPageConfirmationKey
        let value = key.issue(Self.confirmation(), nowMilliseconds: Self.now)
        var bytes = try #require(Base64URL.decode(value))
        for index in [0, 1, 8, 9, 40] {
            var changed = bytes
            changed[index] ^= 0x01
            let refusal = key.check(Base64URL.encode(changed), for: Self.confirmation(), nowMilliseconds: Self.clicked, clockSkew: 0)
            #expect(refusal == (index == 0 ? .malformed : .mismatch), "byte \(index)")
        }
        // A later issue time put in by hand (to outlive the 5 minutes) breaks the tag.
        bytes[8] &+= 100
        #expect(key.check(Base64URL.encode(bytes), for: Self.confirmation(), nowMilliseconds: Self.clicked, clockSkew: 0) == .mismatch)
        let stranger = try Self.signer().0.tokenPageConfirmationKey
        #expect(stranger.check(value, for: Self.confirmation(), nowMilliseconds: Self.clicked, clockSkew: 0) == .mismatch)
        for malformed in ["", "x", String(value.dropLast()), value + "A", value + "=", String(repeating: "+", count: 55)] {
            #expect(key.check(malformed, for: Self.confirmation(), nowMilliseconds: Self.clicked, clockSkew: 0) == .malformed)
        }
    }

    @Test("a value is never shaped like a JWT, and a confirmation's description holds nothing of the cookie")
    func noSecretsShown() throws {
        let (signer, _) = try Self.signer()
        let value = signer.tokenPageConfirmationKey.issue(Self.confirmation(), nowMilliseconds: Self.now)
        #expect(!value.contains("."), "never shaped like a JWT")
        // The cookie is kept only as its hash, and the description shows neither.
        let confirmation = Self.confirmation()
        let digest = confirmation.cookieDigest.map { String(format: "%02x", $0) }.joined()
        for shown in ["\(confirmation)", String(reflecting: confirmation)] {
            #expect(!shown.contains(Self.cookie) && !shown.contains(digest) && shown.contains("[redacted]"))
            #expect(!shown.contains("cookieDigest"), "the default description would print the digest's bytes")
        }
    }

    @Test("fresh cookie values are 32 random bytes in base64url, never the same twice")
    func freshCookies() throws {
        let values = (0..<64).compactMap { _ in TokenPageConfirmation.freshCookieValue() }
        #expect(values.count == 64 && Set(values).count == 64)
        #expect(values.allSatisfy { $0.utf8.count == 43 && Base64URL.decode($0)?.count == 32 })
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

/// The token page's confirmation values (``TokenPageConfirmationKey``): `base64url(1 ‖ issued-at ‖ HMAC)` over the
/// page, app, state, challenge, user and the session's SHA-256, under a key derived from the signing key.
struct TokenPageConfirmationKeyTests {
    static let now: Int64 = 1_760_000_000
    static let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    static let session = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.session-of-alice"

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
        session: String = Self.session
    ) -> TokenPageConfirmation {
        TokenPageConfirmation(page: page, app: app, state: state, challenge: challenge, user: user, session: session)
    }

    @Test("a value checks for the same confirmation at any instance with the same signing key, within 5 minutes",
        arguments: [TokenAlgorithm.hs256, .es256, .edDSA, .rs256])
    func valid(_ algorithm: TokenAlgorithm) throws {
        let (signer, jwks) = try Self.signer(algorithm)
        let value = signer.tokenPageConfirmationKey.issue(Self.confirmation(), now: Self.now)
        #expect(value.utf8.count == 55)
        #expect(value.utf8.allSatisfy { byte in
            (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        })
        let other = try TokenSigner(privateJWKS: Array(jwks.utf8)).tokenPageConfirmationKey
        for now in [Self.now, Self.now + 1, Self.now + TokenPageConfirmationKey.lifetime - 1] {
            #expect(other.check(value, for: Self.confirmation(), now: now, clockSkew: 0) == nil)
        }
        // Without state or challenge (an app with `pkce: optional` that sends neither).
        let bare = Self.confirmation(state: nil, challenge: nil)
        #expect(other.check(signer.tokenPageConfirmationKey.issue(bare, now: Self.now), for: bare, now: Self.now, clockSkew: 0) == nil)
    }

    @Test("an expired value, and one from the future beyond the clock skew, are refused")
    func times() throws {
        let key = try Self.signer().0.tokenPageConfirmationKey
        let value = key.issue(Self.confirmation(), now: Self.now)
        #expect(key.check(value, for: Self.confirmation(), now: Self.now + 300, clockSkew: 0) == .expired)
        #expect(key.check(value, for: Self.confirmation(), now: Self.now + 86_400, clockSkew: 0) == .expired)
        #expect(key.check(value, for: Self.confirmation(), now: Self.now - 1, clockSkew: 0) == .issuedInFuture)
        #expect(key.check(value, for: Self.confirmation(), now: Self.now - 30, clockSkew: 30) == nil)
        #expect(key.check(value, for: Self.confirmation(), now: Self.now - 31, clockSkew: 30) == .issuedInFuture)
    }

    @Test("a value made for another session, user, page, app, state or challenge does not match")
    func boundToEverything() throws {
        let key = try Self.signer().0.tokenPageConfirmationKey
        let value = key.issue(Self.confirmation(), now: Self.now)
        let others: [TokenPageConfirmation] = [
            Self.confirmation(session: Self.session + "x"),
            Self.confirmation(session: "session-of-mallory"),
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
            #expect(key.check(value, for: other, now: Self.now, clockSkew: 0) == .mismatch)
        }
        // And the attacker's own value (its session, its login) does not confirm the victim's.
        let attackers = key.issue(Self.confirmation(user: "mallory", session: "session-of-mallory"), now: Self.now)
        #expect(key.check(attackers, for: Self.confirmation(), now: Self.now, clockSkew: 0) == .mismatch)
    }

    @Test("a tampered value, one from another signing key and a malformed one are refused")
    func tamperedAndMalformed() throws {
        let key = try Self.signer().0.tokenPageConfirmationKey
        let value = key.issue(Self.confirmation(), now: Self.now)
        var bytes = try #require(Base64URL.decode(value))
        for index in [0, 1, 8, 9, 40] {
            var changed = bytes
            changed[index] ^= 0x01
            let refusal = key.check(Base64URL.encode(changed), for: Self.confirmation(), now: Self.now, clockSkew: 0)
            #expect(refusal == (index == 0 ? .malformed : .mismatch), "byte \(index)")
        }
        // A later issue time put in by hand (to outlive the 5 minutes) breaks the tag.
        bytes[8] &+= 100
        #expect(key.check(Base64URL.encode(bytes), for: Self.confirmation(), now: Self.now, clockSkew: 0) == .mismatch)
        let stranger = try Self.signer().0.tokenPageConfirmationKey
        #expect(stranger.check(value, for: Self.confirmation(), now: Self.now, clockSkew: 0) == .mismatch)
        for malformed in ["", "x", String(value.dropLast()), value + "A", value + "=", String(repeating: "+", count: 55)] {
            #expect(key.check(malformed, for: Self.confirmation(), now: Self.now, clockSkew: 0) == .malformed)
        }
    }

    @Test("a value is never shaped like a JWT, and a confirmation's description holds nothing of the session")
    func noSecretsShown() throws {
        let (signer, _) = try Self.signer()
        let value = signer.tokenPageConfirmationKey.issue(Self.confirmation(), now: Self.now)
        #expect(!value.contains("."), "never shaped like a JWT")
        // The session itself is kept only as its hash.
        #expect(!"\(Self.confirmation())".contains(Self.session))
    }
}

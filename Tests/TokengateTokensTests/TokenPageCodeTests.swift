//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

/// The token page's PKCE codes: `base64url(3 ‖ nonce ‖ AES-256-GCM(codeKey, payload) ‖ tag)`, with the code key
/// derived from the signing key (``TokenPageCodeKey``), and the S256 challenge (``CodeChallenge``).
struct TokenPageCodeTests {
    /// RFC 7636 Appendix B.
    static let rfcVerifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    static let rfcChallenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    static let now: Int64 = 1_760_000_000
    /// A user id that must not be readable in a code (an e-mail address, as RPs often use).
    static let user = "alice.liddell@example.com"

    static func signer(_ algorithm: TokenAlgorithm = .hs256) throws -> (TokenSigner, String) {
        let generated = try KeyGenerator.generate(algorithm: algorithm, keyID: "k1")
        return (try TokenSigner(privateJWKS: Array(generated.privateJWKS.utf8)), generated.privateJWKS)
    }

    static func code(app: String = "ios", page: String = "/token", issuedAt: Int64 = now, subject: String = user) -> TokenPageCode {
        TokenPageCode(
            subject: subject, app: app, page: page, challenge: CodeChallenge(Self.rfcChallenge)!, issuedAt: issuedAt)
    }

    @Test("S256 is SHA-256 in base64url: RFC 7636 Appendix B")
    func rfcVector() throws {
        #expect(CodeChallenge(verifier: Self.rfcVerifier).text == Self.rfcChallenge)
        let challenge = try #require(CodeChallenge(Self.rfcChallenge))
        #expect(challenge.isAnswered(by: Self.rfcVerifier))
        #expect(!challenge.isAnswered(by: String(Self.rfcVerifier.dropLast()) + "l"))
    }

    @Test("a challenge is exactly 43 characters of canonical base64url; a verifier 43 to 128 unreserved characters")
    func syntax() {
        #expect(CodeChallenge(String(Self.rfcChallenge.dropLast())) == nil)
        #expect(CodeChallenge(Self.rfcChallenge + "A") == nil)
        #expect(CodeChallenge(String(Self.rfcChallenge.dropLast()) + "N") == nil, "non-zero unused bits")
        #expect(CodeChallenge(String(Self.rfcChallenge.dropLast()) + "=") == nil)
        #expect(CodeChallenge(String(repeating: "+", count: 43)) == nil)
        #expect(CodeChallenge.isValidVerifier(String(repeating: "a", count: 43)))
        #expect(CodeChallenge.isValidVerifier(String(repeating: "~", count: 128)))
        #expect(!CodeChallenge.isValidVerifier(String(repeating: "a", count: 42)))
        #expect(!CodeChallenge.isValidVerifier(String(repeating: "a", count: 129)))
        #expect(!CodeChallenge.isValidVerifier(String(repeating: "a", count: 42) + "+"))
        // The plain method's "challenge" is the verifier itself: it does not answer itself.
        let plain = String(repeating: "a", count: 43)
        #expect(CodeChallenge(plain).map { $0.isAnswered(by: plain) } != true)
    }

    @Test("a sealed code is redeemed with its app and verifier, by any signer built from the same key",
        arguments: [TokenAlgorithm.hs256, .hs512, .es256, .edDSA, .rs256])
    func roundTrip(_ algorithm: TokenAlgorithm) throws {
        let (signer, jwks) = try Self.signer(algorithm)
        let text = try #require(signer.tokenPageCodeKey.seal(Self.code()))
        #expect(!text.contains("."), "base64url only: no dot, where a JWT has two")
        // Another gateway instance with the same signing key.
        let other = try TokenSigner(privateJWKS: Array(jwks.utf8))
        let redeemed = other.tokenPageCodeKey.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now + 1)
        #expect(redeemed.map(\.code) == .success(Self.code()))
        // Another signing key's code key refuses it.
        let (stranger, _) = try Self.signer(algorithm)
        #expect(
            stranger.tokenPageCodeKey.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now)
                == .failure(.badSignature)
        )
    }

    /// A page minting in Django's format seals the session auth hash from the whoami answer into the code: the
    /// redemption has no whoami answer, and the app must not read the hash.
    @Test("site values survive the seal, unreadable in the code")
    func siteValuesRoundTrip() throws {
        let (signer, _) = try Self.signer()
        var code = Self.code()
        let hash = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
        code.siteValues = ["/_auth_user_hash": hash, "/x\"y": "q\u{E9}"]
        let text = try #require(signer.tokenPageCodeKey.seal(code))
        #expect(!text.contains(hash) && !text.contains(Base64URL.encode(Array(hash.utf8)).prefix(20)))
        let redeemed = signer.tokenPageCodeKey.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now + 1)
        #expect(redeemed.map(\.code.siteValues) == .success(code.siteValues))
        #expect(redeemed.map(\.code) == .success(code))
    }

    /// An app that claims the same custom scheme receives the callback: it must not learn who logged in. A review
    /// found the payload only signed, so the user id (often an e-mail address) was there in base64url.
    @Test("the code is encrypted: neither the user id nor anything else of the payload is in it, encoded or decoded")
    func theUserIDIsNotReadable() throws {
        let key = try Self.signer().0.tokenPageCodeKey
        let text = try #require(key.seal(Self.code()))
        let bytes = try #require(Base64URL.decode(text))
        #expect(Self.user.utf8.count >= 10, "the user id is long enough to be looked for at every alignment")
        for secret in [Self.user, "alice", "example.com", "\"sub\"", "/token", Self.rfcChallenge] {
            #expect(!text.contains(secret), "\(secret) in the code's text")
            #expect(!bytes.contains(Array(secret.utf8)), "\(secret) in the code's bytes")
            // Nor base64url-encoded at any of the three alignments inside a longer base64url text. Only fragments of
            // 6 characters or more are looked for: a shorter one turns up in a random code by chance (a 2-character
            // one in several percent of codes), 6 characters once in some 10⁸ codes of this length.
            for prefix in ["", "x", "xx"] {
                let encoded = Base64URL.encode(Array((prefix + secret).utf8)).dropFirst(prefix.isEmpty ? 0 : 4).dropLast(2)
                guard encoded.count >= 6 else { continue }
                #expect(!text.contains(encoded), "\(secret) base64url-encoded in the code")
            }
        }
        // The same code sealed twice: two different codes, under two fresh nonces.
        let again = try #require(key.seal(Self.code()))
        #expect(again != text)
        let first = try key.open(text).get()
        let second = try key.open(again).get()
        #expect(first.code == second.code)
        #expect(first.nonce != second.nonce)
        #expect(TokenPageCodeNonce(bytes[1...12]) == first.nonce, "the nonce follows the version byte")
    }

    @Test("every character of a code matters: changing any one is refused, and the payload is never trusted first")
    func tamperEachCharacter() throws {
        let key = try Self.signer().0.tokenPageCodeKey
        let text = Array(try #require(key.seal(Self.code())).utf8)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.".utf8)
        for index in text.indices {
            for replacement in alphabet where replacement != text[index] {
                var tampered = text
                tampered[index] = replacement
                let result = key.redeem(String(decoding: tampered, as: UTF8.self), app: "ios", verifier: Self.rfcVerifier, now: Self.now)
                guard case .failure(let refusal) = result else {
                    Issue.record("byte \(index) changed to \(replacement) was accepted")
                    return
                }
                #expect(refusal == .badSignature || refusal == .malformed)
            }
        }
        // Cut short, extended, or with a dot.
        let full = String(decoding: text, as: UTF8.self)
        for candidate in [String(full.dropLast()), full + "A", full + ".", "." + full, String(full.dropFirst()), ""] {
            #expect(
                (try? key.redeem(candidate, app: "ios", verifier: Self.rfcVerifier, now: Self.now).get()) == nil,
                "\(candidate.count) bytes"
            )
        }
    }

    @Test("a flipped bit anywhere in the decoded code is refused: the version byte as malformed, the rest by the tag")
    func flipEachBit() throws {
        let key = try Self.signer().0.tokenPageCodeKey
        let sealed = try #require(key.seal(Self.code()))
        let bytes = try #require(Base64URL.decode(sealed))
        for index in bytes.indices {
            for bit in 0..<8 {
                var flipped = bytes
                flipped[index] ^= UInt8(1) << bit
                let result = key.redeem(Base64URL.encode(flipped), app: "ios", verifier: Self.rfcVerifier, now: Self.now)
                #expect(result == .failure(index == 0 ? .malformed : .badSignature), "byte \(index) bit \(bit)")
            }
        }
        // Too short to hold a version, a nonce, a tag and one byte of payload.
        #expect(key.open(Base64URL.encode(Array(bytes.prefix(29)))) == .failure(.malformed))
        #expect(key.open(Base64URL.encode(Array(bytes.prefix(30)))) == .failure(.badSignature))
    }

    /// Codes live 60 seconds, so an upgrade fails only the codes under way; they must fail like any bad code.
    @Test("a code of the previous format (v2: payload, a dot, its HMAC) is refused as malformed")
    func previousFormatIsRefused() throws {
        let secret = [UInt8](repeating: 7, count: 32)
        let jwks = #"{"keys":[{"kty":"oct","k":"\#(Base64URL.encode(secret))","alg":"HS256"}]}"#
        let signer = try TokenSigner(privateJWKS: Array(jwks.utf8))
        // Exactly what the previous release sealed: its payload, and the MAC under its own derived key.
        let payload = Array(#"{"v":2,"sub":"alice","app":"ios","page":"/token","cc":"\#(Self.rfcChallenge)","iat":\#(Self.now),"exp":\#(Self.now + 60)}"#.utf8)
        let v2Key = try #require(SignatureCheck(hmacBits: 256, secret: secret)?.hmacTag(Array("tokengate token page code v2".utf8)))
        let mac = try #require(SignatureCheck(hmacBits: 256, secret: v2Key)?.hmacTag(payload))
        let v2 = Base64URL.encode(payload) + "." + Base64URL.encode(mac)
        #expect(signer.tokenPageCodeKey.redeem(v2, app: "ios", verifier: Self.rfcVerifier, now: Self.now) == .failure(.malformed))
        // Without its dot, or with a v3 code's version byte set to 2, no better.
        #expect(signer.tokenPageCodeKey.open(Base64URL.encode(payload + mac)) == .failure(.malformed))
        let v3 = try #require(signer.tokenPageCodeKey.seal(Self.code()))
        var bytes = try #require(Base64URL.decode(v3))
        bytes[0] = 2
        #expect(signer.tokenPageCodeKey.open(Base64URL.encode(bytes)) == .failure(.malformed))
    }

    @Test("a code lives 60 seconds")
    func expiry() throws {
        let key = try Self.signer().0.tokenPageCodeKey
        let text = try #require(key.seal(Self.code()))
        #expect((try? key.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now + 59).get()) != nil)
        #expect(key.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now + 60) == .failure(.expired))
        #expect(key.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now + 3600) == .failure(.expired))
    }

    @Test("a code holds a user id of 256 characters that each need escaping; a text over 4096 bytes is refused unread")
    func sizeLimits() throws {
        let key = try Self.signer().0.tokenPageCodeKey
        let long = Self.code(subject: String(repeating: "\"", count: UserIDRules.maxUTF8Bytes))
        let text = try #require(key.seal(long))
        #expect(text.utf8.count <= TokenPageCodeKey.maximumLength)
        #expect(key.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now).map(\.code) == .success(long))
        #expect(key.open(String(repeating: "A", count: TokenPageCodeKey.maximumLength + 4)) == .failure(.malformed))
    }

    /// A code is redeemed by the page that issued it only: another page may have a longer `token_lifetime` or
    /// none (a review redeemed a 30-day page's code at a page without `exp`). And one issued later than now
    /// (another instance's clock ahead by more than the skew) would outlive its 60 s.
    @Test("the page must be the one that issued the code, and its issue time not ahead of the clock")
    func pageAndClock() throws {
        let key = try Self.signer().0.tokenPageCodeKey
        let text = try #require(key.seal(Self.code()))
        #expect(
            key.redeem(text, app: "ios", page: "/other-token", verifier: Self.rfcVerifier, now: Self.now, clockSkew: 60)
                == .failure(.wrongPage))
        #expect(
            (try? key.redeem(text, app: "ios", page: "/token", verifier: Self.rfcVerifier, now: Self.now, clockSkew: 60)
                .get().code) == Self.code())
        #expect(
            key.redeem(text, app: "ios", page: "/token", verifier: Self.rfcVerifier, now: Self.now - 61, clockSkew: 60)
                == .failure(.issuedInFuture))
        #expect(
            (try? key.redeem(text, app: "ios", page: "/token", verifier: Self.rfcVerifier, now: Self.now - 60, clockSkew: 60)
                .get()) != nil)
    }

    @Test("the app and the verifier must be the ones the code was issued for")
    func appAndVerifier() throws {
        let key = try Self.signer().0.tokenPageCodeKey
        let text = try #require(key.seal(Self.code()))
        #expect(key.redeem(text, app: "android", verifier: Self.rfcVerifier, now: Self.now) == .failure(.wrongApp))
        let other = String(repeating: "a", count: 43)
        #expect(key.redeem(text, app: "ios", verifier: other, now: Self.now) == .failure(.wrongVerifier))
        #expect(key.redeem(text, app: "ios", verifier: "short", now: Self.now) == .failure(.wrongVerifier))
        // The plain method: the challenge itself sent as the verifier.
        #expect(key.redeem(text, app: "ios", verifier: Self.rfcChallenge, now: Self.now) == .failure(.wrongVerifier))
    }

    @Test("the code key is derived under its own label: a code sealed with the signing secret itself, or under the v2 label, is refused")
    func domainSeparation() throws {
        let secret = [UInt8](repeating: 7, count: 32)
        let jwks = #"{"keys":[{"kty":"oct","k":"\#(Base64URL.encode(secret))","alg":"HS256"}]}"#
        let signer = try TokenSigner(privateJWKS: Array(jwks.utf8))
        let v2Label = try #require(SignatureCheck(hmacBits: 256, secret: secret)?.hmacTag(Array("tokengate token page code v2".utf8)))
        for keyBytes in [secret, v2Label] {
            let forgedKey = TokenPageCodeKey(cipher: try #require(AES256GCMKey(keyBytes)))
            let forged = try #require(forgedKey.seal(Self.code()))
            #expect(
                signer.tokenPageCodeKey.redeem(forged, app: "ios", verifier: Self.rfcVerifier, now: Self.now)
                    == .failure(.badSignature)
            )
        }
        // The derivation is HMAC-SHA256(secret, label) with the v3 label: the same key, built by hand, opens it.
        let v3 = try #require(SignatureCheck(hmacBits: 256, secret: secret)?.hmacTag(Array("tokengate token page code v3".utf8)))
        let byHand = TokenPageCodeKey(cipher: try #require(AES256GCMKey(v3)))
        let sealed = try #require(signer.tokenPageCodeKey.seal(Self.code()))
        #expect(byHand.open(sealed).map(\.code) == .success(Self.code()))
    }

    @Test("AES-256-GCM: the associated data is authenticated, a key must be 32 bytes, an empty plaintext seals")
    func cipher() throws {
        let key = try #require(AES256GCMKey([UInt8](repeating: 1, count: 32)))
        #expect(AES256GCMKey([UInt8](repeating: 1, count: 31)) == nil)
        #expect(AES256GCMKey([UInt8](repeating: 1, count: 33)) == nil)
        let sealed = try #require(key.seal(Array("hello".utf8), associatedData: [3]))
        #expect(sealed.count == 12 + 5 + 16)
        #expect(key.open(sealed[...], associatedData: [3]) == Array("hello".utf8))
        #expect(key.open(sealed[...], associatedData: [2]) == nil)
        #expect(key.open(sealed[...], associatedData: []) == nil)
        #expect(key.open(sealed.dropLast(), associatedData: [3]) == nil)
        let empty = try #require(key.seal([], associatedData: []))
        #expect(empty.count == 28)
        #expect(key.open(empty[...], associatedData: []) == [])
        #expect(key.open(empty[...], associatedData: [0]) == nil)
    }

    @Test("a code never verifies as a token")
    func notAToken() throws {
        let generated = try KeyGenerator.generate(algorithm: .hs256, keyID: "k1")
        let signer = try TokenSigner(privateJWKS: Array(generated.privateJWKS.utf8))
        let verifier = TokenVerifier(keys: try KeySet(jwks: Array(generated.publicJWKS.utf8)), policy: VerificationPolicy())
        let text = try #require(signer.tokenPageCodeKey.seal(Self.code()))
        guard case .invalid = verifier.verify(text, accept: .any, cutoffs: .empty, now: Self.now) else {
            Issue.record("a code verified as a token")
            return
        }
    }
}

extension TokenPageCodeKey {
    /// A redemption at the page the tests' codes come from (`/token`), with a minute of clock skew.
    fileprivate func redeem(_ text: String, app: String, verifier: String, now: Int64) -> Result<Redeemable, Refusal> {
        self.redeem(text, app: app, page: "/token", verifier: verifier, now: now, clockSkew: 60)
    }
}

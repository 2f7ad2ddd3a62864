//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

/// The token page's PKCE codes: `base64url(payload).base64url(HMAC-SHA256(codeKey, payload))`, with the code
/// key derived from the signing key (``TokenPageCodeKey``), and the S256 challenge (``CodeChallenge``).
struct TokenPageCodeTests {
    /// RFC 7636 Appendix B.
    static let rfcVerifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    static let rfcChallenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    static let now: Int64 = 1_760_000_000

    static func signer(_ algorithm: TokenAlgorithm = .hs256) throws -> (TokenSigner, String) {
        let generated = try KeyGenerator.generate(algorithm: algorithm, keyID: "k1")
        return (try TokenSigner(privateJWKS: Array(generated.privateJWKS.utf8)), generated.privateJWKS)
    }

    static func code(app: String = "ios", page: String = "/token", issuedAt: Int64 = now) -> TokenPageCode {
        TokenPageCode(
            subject: "alice", app: app, page: page, challenge: CodeChallenge(Self.rfcChallenge)!, issuedAt: issuedAt)
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
        let text = signer.tokenPageCodeKey.seal(Self.code())
        #expect(text.split(separator: ".").count == 2)
        // Another gateway instance with the same signing key.
        let other = try TokenSigner(privateJWKS: Array(jwks.utf8))
        let redeemed = other.tokenPageCodeKey.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now + 1)
        #expect(redeemed == .success(Self.code()))
        // Another signing key's code key refuses it.
        let (stranger, _) = try Self.signer(algorithm)
        #expect(
            stranger.tokenPageCodeKey.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now)
                == .failure(.badSignature)
        )
    }

    @Test("every byte of a code matters: changing any one is refused, and the payload is never trusted first")
    func tamperEachByte() throws {
        let key = try Self.signer().0.tokenPageCodeKey
        let text = Array(key.seal(Self.code()).utf8)
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
        // Cut short, extended, or with the parts swapped.
        let full = String(decoding: text, as: UTF8.self)
        for candidate in [String(full.dropLast()), full + "A", full + ".", "." + full, String(full.dropFirst()), ""] {
            #expect(
                (try? key.redeem(candidate, app: "ios", verifier: Self.rfcVerifier, now: Self.now).get()) == nil,
                "\(candidate.count) bytes"
            )
        }
    }

    @Test("a code lives 60 seconds")
    func expiry() throws {
        let key = try Self.signer().0.tokenPageCodeKey
        let text = key.seal(Self.code())
        #expect((try? key.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now + 59).get()) != nil)
        #expect(key.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now + 60) == .failure(.expired))
        #expect(key.redeem(text, app: "ios", verifier: Self.rfcVerifier, now: Self.now + 3600) == .failure(.expired))
    }

    /// A code is redeemed by the page that issued it only: another page may have a longer `token_lifetime` or
    /// none (a review redeemed a 30-day page's code at a page without `exp`). And one issued later than now
    /// (another instance's clock ahead by more than the skew) would outlive its 60 s.
    @Test("the page must be the one that issued the code, and its issue time not ahead of the clock")
    func pageAndClock() throws {
        let key = try Self.signer().0.tokenPageCodeKey
        let text = key.seal(Self.code())
        #expect(
            key.redeem(text, app: "ios", page: "/other-token", verifier: Self.rfcVerifier, now: Self.now, clockSkew: 60)
                == .failure(.wrongPage))
        #expect(
            (try? key.redeem(text, app: "ios", page: "/token", verifier: Self.rfcVerifier, now: Self.now, clockSkew: 60)
                .get()) == Self.code())
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
        let text = key.seal(Self.code())
        #expect(key.redeem(text, app: "android", verifier: Self.rfcVerifier, now: Self.now) == .failure(.wrongApp))
        let other = String(repeating: "a", count: 43)
        #expect(key.redeem(text, app: "ios", verifier: other, now: Self.now) == .failure(.wrongVerifier))
        #expect(key.redeem(text, app: "ios", verifier: "short", now: Self.now) == .failure(.wrongVerifier))
        // The plain method: the challenge itself sent as the verifier.
        #expect(key.redeem(text, app: "ios", verifier: Self.rfcChallenge, now: Self.now) == .failure(.wrongVerifier))
    }

    @Test("the code key is derived under its own label: a code MACed with the signing secret itself is refused")
    func domainSeparation() throws {
        let secret = [UInt8](repeating: 7, count: 32)
        let jwks = #"{"keys":[{"kty":"oct","k":"\#(Base64URL.encode(secret))","alg":"HS256"}]}"#
        let signer = try TokenSigner(privateJWKS: Array(jwks.utf8))
        let payload = Self.code().payload
        let raw = try #require(SignatureCheck(hmacBits: 256, secret: secret)?.hmacTag(payload))
        let forged = Base64URL.encode(payload) + "." + Base64URL.encode(raw)
        #expect(
            signer.tokenPageCodeKey.redeem(forged, app: "ios", verifier: Self.rfcVerifier, now: Self.now)
                == .failure(.badSignature)
        )
        #expect(signer.tokenPageCodeKey.seal(Self.code()) != forged)
    }

    @Test("a code never verifies as a token")
    func notAToken() throws {
        let generated = try KeyGenerator.generate(algorithm: .hs256, keyID: "k1")
        let signer = try TokenSigner(privateJWKS: Array(generated.privateJWKS.utf8))
        let verifier = TokenVerifier(keys: try KeySet(jwks: Array(generated.publicJWKS.utf8)), policy: VerificationPolicy())
        let text = signer.tokenPageCodeKey.seal(Self.code())
        guard case .invalid = verifier.verify(text, accept: .any, cutoffs: .empty, now: Self.now) else {
            Issue.record("a code verified as a token")
            return
        }
    }
}

extension TokenPageCodeKey {
    /// A redemption at the page the tests' codes come from (`/token`), with a minute of clock skew.
    fileprivate func redeem(_ text: String, app: String, verifier: String, now: Int64) -> Result<TokenPageCode, Refusal> {
        self.redeem(text, app: app, page: "/token", verifier: verifier, now: now, clockSkew: 60)
    }
}

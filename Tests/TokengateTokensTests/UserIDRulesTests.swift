//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Testing

@testable import TokengateTokens

/// A user id the cutoff store could not hold is refused by the verifier and the signer alike: a token for it
/// could never be revoked for its user.
@Suite struct UserIDRulesTests {
    @Test func theRules() {
        #expect(UserIDRules.problem("alice") == nil)
        #expect(UserIDRules.problem("jürgen müller") == nil, "inner spaces and non-ASCII are fine")
        #expect(UserIDRules.problem(String(repeating: "a", count: 256)) == nil)
        #expect(UserIDRules.problem(String(repeating: "é", count: 128)) == nil, "256 bytes of UTF-8")
        #expect(UserIDRules.problem("") == .empty)
        #expect(UserIDRules.problem(String(repeating: "a", count: 257)) == .tooLong)
        #expect(UserIDRules.problem(String(repeating: "é", count: 128) + "a") == .tooLong)
        #expect(UserIDRules.problem(" ivan") == .surroundingSpace)
        #expect(UserIDRules.problem("ivan ") == .surroundingSpace)
        #expect(UserIDRules.problem(" ") == .surroundingSpace)
        for edge in ["\u{A0}ivan", "ivan\u{A0}", "\u{FEFF}ivan", "ivan\u{200B}", "\u{3000}ivan", "ivan\u{2003}", "ivan\u{200D}"] {
            #expect(UserIDRules.problem(edge) == .surroundingSpace, "\(edge.unicodeScalars.map(\.value))")
        }
        for inner in ["i\u{A0}van", "jürgen", "ユーザー", "a😀b", "😀", "é"] {
            #expect(UserIDRules.problem(inner) == nil, "\(inner.unicodeScalars.map(\.value))")
        }
        #expect(UserIDRules.problem("a\u{2028}b") == .controlCharacter)
        #expect(UserIDRules.problem("a\u{2029}") == .controlCharacter)
        for control in ["a\u{0}b", "a\tb", "a\nb", "a\u{7F}b", "a\u{80}b", "a\u{9F}b", "\u{1B}[31m"] {
            #expect(UserIDRules.problem(control) == .controlCharacter, "\(control.unicodeScalars.map(\.value))")
        }
        #expect(UserIDRules.problem("a\u{A0}b") == nil, "U+00A0 (0xC2 0xA0) is not a C1 control")
        #expect(UserIDRules.problem("\u{100}\u{80}") == .controlCharacter)
    }

    @Test func theVerifierRefusesATokenForAnIDNoCutoffCouldBeStoredUnder() throws {
        let keys = try TestSupport.hmacKeys()
        let verifier = TokenVerifier(keys: keys)
        func reason(_ subject: String) -> String? {
            let payload = TestSupport.claims(sub: subject)
            return verifier.verify(TestSupport.hs256(header: TestSupport.header, payload: payload), accept: .any, cutoffs: .empty, now: TestSupport.now).reason
        }
        #expect(reason("alice") == nil)
        #expect(reason(String(repeating: "a", count: 256)) == nil)
        #expect(reason(String(repeating: "a", count: 257)) == "malformed")
        #expect(reason(" ivan ") == "malformed")
        #expect(reason("ivan ") == "malformed")
        #expect(reason(#"\u0020ivan"#) == "malformed", "an escaped space is a space")
        #expect(reason(#"a\u0085b"#) == "malformed", "a C1 control, escaped")
        #expect(reason(#"\u00a0ivan"#) == "malformed", "a no-break space first")
        #expect(reason(#"ivan\ufeff"#) == "malformed", "a BOM last")
    }

    /// Two ids that differ only in Unicode form are two users (no normalization): a cutoff for "jose" + U+0301
    /// does not revoke "jos" + U+00E9, which Swift's `String` equality would have matched.
    @Test func aCutoffIsForItsIDByteForByte() throws {
        let keys = try TestSupport.hmacKeys()
        let verifier = TokenVerifier(keys: keys)
        let composed = "jos\u{E9}"
        let decomposed = "jose\u{301}"
        try #require(composed == decomposed, "Swift's String equality is canonical equivalence")
        let cutoffs = CutoffSnapshot(users: [CutoffUserKey(decomposed): UserCutoffs(revokedBefore: TestSupport.now)])
        func reason(_ subject: String) -> String? {
            let payload = TestSupport.claims(sub: subject)
            return verifier.verify(TestSupport.hs256(header: TestSupport.header, payload: payload), accept: .any, cutoffs: cutoffs, now: TestSupport.now).reason
        }
        #expect(reason(decomposed) == "revoked")
        #expect(reason(composed) == nil, "the other spelling is another user")
        #expect(CutoffUserKey(composed) != CutoffUserKey(decomposed))
        #expect(CutoffUserKey("alice") == CutoffUserKey(String("ali" + "ce")))
        #expect(Set([CutoffUserKey(composed), CutoffUserKey(decomposed), CutoffUserKey("jos\u{E9}")]).count == 2)
    }

    @Test func theSignerWillNotMintOne() throws {
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only")
        let signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        for subject in ["", " ivan ", String(repeating: "a", count: 257), "a\u{85}b"] {
            #expect(throws: TokenSigningError.self, "\(subject.debugDescription)") {
                try signer.mint(TokenClaims(subject: subject, issuedAt: TestSupport.now, apiOnly: true))
            }
        }
        #expect((try? signer.mint(TokenClaims(subject: "ivan", issuedAt: TestSupport.now, apiOnly: true))) != nil)
    }
}

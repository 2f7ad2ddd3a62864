//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateTokens

/// How a token's `iss` picks its issuer, and what a named issuer's policy changes: the kind of tokens that do not
/// say, and the cutoff keys of its users.
@Suite struct IssuerChoiceTests {
    let now = TestSupport.now

    func choose(_ choice: IssuerChoice, _ payload: String) -> IssuerChoice.Choice {
        let token = TestSupport.hs256(header: TestSupport.header, payload: payload)
        return Array(token.utf8).withUnsafeBytes { choice.choose($0) }
    }

    @Test func theIssPicksByExactBytesAndTheDefaultTakesTokensWithoutIt() {
        let choice = IssuerChoice(issuers: ["https://page.example", "https://login.example/o"], defaultIndex: 0)
        #expect(self.choose(choice, #"{"iss":"https://login.example/o","sub":"a"}"#) == .issuer(1))
        #expect(self.choose(choice, #"{"sub":"a","iss":"https://page.example"}"#) == .issuer(0))
        #expect(self.choose(choice, #"{"sub":"a"}"#) == .issuer(0))
        // No normalization: a trailing slash, another case or an escape-decoded equal are compared as bytes.
        #expect(self.choose(choice, #"{"iss":"https://login.example/o/"}"#) == .unknownIssuer)
        #expect(self.choose(choice, #"{"iss":"HTTPS://login.example/o"}"#) == .unknownIssuer)
        #expect(self.choose(choice, #"{"iss":"https:\/\/login.example\/o"}"#) == .issuer(1))
        let noDefault = IssuerChoice(issuers: ["a"], defaultIndex: nil)
        #expect(self.choose(noDefault, #"{"sub":"a"}"#) == .missingIssuer)
    }

    @Test func anIssuerWithoutIssTakesOnlyTokensWithoutOne() {
        let choice = IssuerChoice(issuers: [nil, "idp"], defaultIndex: 0)
        #expect(self.choose(choice, #"{"sub":"a"}"#) == .issuer(0))
        #expect(self.choose(choice, #"{"iss":"","sub":"a"}"#) == .unknownIssuer)
        #expect(self.choose(choice, #"{"iss":"idp"}"#) == .issuer(1))
    }

    @Test func ambiguousOrMalformedPayloadsChooseNothing() {
        let choice = IssuerChoice(issuers: ["a", "b"], defaultIndex: 0)
        for payload in [
            #"{"iss":"a","iss":"b"}"#, #"{"iss":1}"#, #"{"iss":["a"]}"#, #"["iss","a"]"#, #"{"iss":"a""#,
            #"{"iss":"a"} x"#, "",
        ] {
            #expect(self.choose(choice, payload) == .malformed, "\(payload)")
        }
        for token in ["", "abc", "a.b", "a.!!!.c"] {
            #expect(Array(token.utf8).withUnsafeBytes { choice.choose($0) } == .malformed, "\(token)")
        }
    }

    @Test func aNamedIssuersKindAndCutoffs() throws {
        let keys = try TestSupport.hmacKeys()
        var policy = VerificationPolicy()
        policy.defaultKind = .api
        policy.readsKindClaim = false
        policy.cutoffIssuer = "idp"
        let verifier = TokenVerifier(keys: keys, policy: policy)
        func verify(_ payload: String, cutoffs: CutoffSnapshot = .empty) -> VerificationResult {
            verifier.verify(
                TestSupport.hs256(header: TestSupport.header, payload: payload), accept: .any, cutoffs: cutoffs,
                now: self.now)
        }
        // The kind claim is not read: every token is the issuer's kind.
        #expect(verify(#"{"sub":"alice","iat":\#(self.now - 5)}"#).token?.kind == .api)
        #expect(verify(#"{"sub":"alice","iat":\#(self.now - 5),"api_only":false}"#).token?.kind == .api)
        // The issuer's alice is not the token page's alice.
        let bare = CutoffSnapshot(users: ["alice": UserCutoffs(revokedBefore: self.now)])
        #expect(verify(#"{"sub":"alice","iat":\#(self.now - 5)}"#, cutoffs: bare).token != nil)
        let scoped = CutoffSnapshot(users: [CutoffUserKey(IssuerScopedUser.key(issuer: "idp", user: "alice")): UserCutoffs(revokedBefore: self.now)])
        #expect(verify(#"{"sub":"alice","iat":\#(self.now - 5)}"#, cutoffs: scoped).reason == "revoked")

        var overriding = policy
        overriding.readsKindClaim = true
        overriding.claimNames.apiOnly = "app"
        let second = TokenVerifier(keys: keys, policy: overriding)
        let session = second.verify(
            TestSupport.hs256(header: TestSupport.header, payload: #"{"sub":"a","iat":\#(self.now - 5),"app":false}"#),
            accept: .any, cutoffs: .empty, now: self.now)
        #expect(session.token?.kind == .session)
    }

    @Test func scopedKeysAreStorableAndNeverABareId() {
        #expect(IssuerScopedUser.key(issuer: nil, user: "alice") == "alice")
        let key = IssuerScopedUser.key(issuer: "idp", user: "alice")
        #expect(key == "idp\u{1F}alice")
        #expect(IssuerScopedUser.problem(key) == nil)
        #expect(UserIDRules.problem(key) == .controlCharacter)
        #expect(IssuerScopedUser.problem("bad name\u{1F}alice") != nil)
        #expect(IssuerScopedUser.problem("idp\u{1F}") == .empty)
        #expect(IssuerScopedUser.problem("idp\u{1F}a\u{1F}b") == .controlCharacter)
        #expect(IssuerScopedUser.problem("a\nb") == .controlCharacter)
    }
}

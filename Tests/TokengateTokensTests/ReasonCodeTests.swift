//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

/// One test per reason code, plus the claim rules around each.
@Suite struct ReasonCodeTests {
    let keys: KeySet
    let verifier: TokenVerifier
    let now = TestSupport.now

    init() throws {
        self.keys = try TestSupport.hmacKeys()
        self.verifier = TokenVerifier(keys: self.keys)
    }

    func check(
        _ payload: String,
        header: String = TestSupport.header,
        accept: AcceptedKinds = .any,
        cutoffs: CutoffSnapshot = .empty,
        verifier: TokenVerifier? = nil
    ) -> VerificationResult {
        let token = TestSupport.hs256(header: header, payload: payload)
        return (verifier ?? self.verifier).verify(token, accept: accept, cutoffs: cutoffs, now: self.now)
    }

    @Test func everyCodeIsStableAndDistinct() {
        #expect(
            RejectionReason.all.map(\.code) == [
                "malformed", "bad_signature", "unknown_key", "alg_not_allowed", "expired", "not_yet_valid",
                "issued_in_future", "revoked", "api_revoked", "wrong_kind", "missing_claim", "device_revoked",
                "insufficient_scope", "unforwardable_claim",
            ]
        )
        #expect(Set(RejectionReason.all.map(\.description)).count == RejectionReason.all.count)
        for reason in RejectionReason.all {
            #expect(!reason.description.isEmpty && !reason.description.contains("kid"))
        }
    }

    @Test func validApiToken() throws {
        let result = self.check(TestSupport.claims(sub: "alice", iat: self.now - 60))
        let token = try #require(result.token)
        #expect(
            token
                == VerifiedToken(
                    subject: "alice",
                    kind: .api,
                    issuedAt: self.now - 60,
                    keyID: "test-hmac",
                    expiresAt: nil
                )
        )
    }

    @Test func validSessionTokenCarriesItsExpiry() throws {
        let result = self.check(TestSupport.claims(iat: self.now - 60, apiOnly: false))
        let token = try #require(result.token)
        #expect(token.kind == .session)
        #expect(token.expiresAt == self.now - 60 + 14 * 86_400)
        let withExp = try #require(
            self.check(
                TestSupport.claims(
                    iat: self.now - 60,
                    apiOnly: false,
                    extra: #","exp":\#(self.now + 100)"#
                )
            ).token
        )
        #expect(withExp.expiresAt == self.now + 100, "the earlier of exp and iat + max-age")
    }

    @Test func malformed() {
        #expect(self.verifier.verify("not a token", accept: .any, cutoffs: .empty, now: self.now).reason == "malformed")
        #expect(self.check(#"{"sub":"alice","iat":"1759999940","api_only":true}"#).reason == "malformed")
    }

    @Test func badSignature() {
        let token = TestSupport.hs256(
            header: TestSupport.header,
            payload: TestSupport.claims(),
            secret: Array(repeating: 7, count: 32)
        )
        #expect(self.verifier.verify(token, accept: .any, cutoffs: .empty, now: self.now).reason == "bad_signature")
    }

    @Test func unknownKey() {
        let header = #"{"alg":"HS256","kid":"someone-else"}"#
        #expect(self.check(TestSupport.claims(), header: header).reason == "unknown_key")
    }

    @Test func algNotAllowed() {
        // HS384 with an HS256-bound key.
        #expect(
            self.check(TestSupport.claims(), header: #"{"alg":"HS384","kid":"test-hmac"}"#).reason
                == "alg_not_allowed"
        )
        // The policy can narrow what keys allow.
        let narrow = TokenVerifier(keys: self.keys, policy: VerificationPolicy(allowedAlgorithms: [.edDSA]))
        #expect(self.check(TestSupport.claims(), verifier: narrow).reason == "alg_not_allowed")
        // Unknown names and case variants.
        for alg in ["none", "None", "NONE", "hs256", "HS256 ", "ES256K", ""] {
            #expect(
                self.check(TestSupport.claims(), header: #"{"alg":"\#(alg)","kid":"test-hmac"}"#).reason
                    == "alg_not_allowed",
                "alg \(alg)"
            )
        }
    }

    @Test func expired() {
        // Session max-age: 14 days + skew.
        let old = self.now - 14 * 86_400 - 61
        #expect(self.check(TestSupport.claims(iat: old, apiOnly: false)).reason == "expired")
        #expect(self.check(TestSupport.claims(iat: old + 2, apiOnly: false)).token != nil, "within the skew")
        // Api tokens do not expire with sessions…
        #expect(self.check(TestSupport.claims(iat: self.now - 400 * 86_400)).token != nil)
        // …but do at their own exp (plus skew).
        #expect(self.check(TestSupport.claims(extra: #","exp":\#(self.now - 60)"#)).reason == "expired")
        #expect(self.check(TestSupport.claims(extra: #","exp":\#(self.now - 59)"#)).token != nil)
        // A configured max-age.
        let short = TokenVerifier(keys: self.keys, policy: VerificationPolicy(sessionMaxAge: 3600, clockSkew: 0))
        #expect(
            self.check(TestSupport.claims(iat: self.now - 3600, apiOnly: false), verifier: short).reason
                == "expired"
        )
        #expect(self.check(TestSupport.claims(iat: self.now - 3599, apiOnly: false), verifier: short).token != nil)
    }

    @Test func notYetValid() {
        #expect(self.check(TestSupport.claims(extra: #","nbf":\#(self.now + 61)"#)).reason == "not_yet_valid")
        #expect(self.check(TestSupport.claims(extra: #","nbf":\#(self.now + 60)"#)).token != nil)
    }

    @Test func issuedInFuture() {
        #expect(self.check(TestSupport.claims(iat: self.now + 61)).reason == "issued_in_future")
        #expect(self.check(TestSupport.claims(iat: self.now + 60)).token != nil, "exactly the skew is fine")
        let noSkew = TokenVerifier(keys: self.keys, policy: VerificationPolicy(clockSkew: 0))
        #expect(self.check(TestSupport.claims(iat: self.now + 1), verifier: noSkew).reason == "issued_in_future")
    }

    @Test func revokedByUserCutoffBoundary() {
        let iat = self.now - 1000
        let at = CutoffSnapshot(users: ["alice": UserCutoffs(revokedBefore: iat)])
        let after = CutoffSnapshot(users: ["alice": UserCutoffs(revokedBefore: iat + 1)])
        #expect(self.check(TestSupport.claims(iat: iat), cutoffs: at).token != nil, "iat == cutoff is accepted")
        #expect(self.check(TestSupport.claims(iat: iat), cutoffs: after).reason == "revoked", "iat < cutoff")
        #expect(self.check(TestSupport.claims(iat: iat, apiOnly: false), cutoffs: after).reason == "revoked")
        #expect(self.check(TestSupport.claims(sub: "bob", iat: iat), cutoffs: after).token != nil, "other users")
    }

    @Test func revokedByGlobalCutoff() {
        let iat = self.now - 1000
        #expect(
            self.check(TestSupport.claims(iat: iat), cutoffs: CutoffSnapshot(globalRevokedBefore: iat + 1)).reason
                == "revoked"
        )
        #expect(
            self.check(TestSupport.claims(iat: iat), cutoffs: CutoffSnapshot(globalRevokedBefore: iat)).token
                != nil
        )
    }

    @Test func apiRevokedOnlyHitsApiTokens() {
        let iat = self.now - 1000
        let cutoffs = CutoffSnapshot(users: ["alice": UserCutoffs(apiRevokedBefore: iat + 1)])
        #expect(self.check(TestSupport.claims(iat: iat), cutoffs: cutoffs).reason == "api_revoked")
        #expect(
            self.check(TestSupport.claims(iat: iat, apiOnly: false), cutoffs: cutoffs).token != nil,
            "the browser stays logged in"
        )
        #expect(self.check(TestSupport.claims(iat: iat + 1), cutoffs: cutoffs).token != nil)
    }

    @Test func wrongKind() {
        #expect(self.check(TestSupport.claims(apiOnly: true), accept: .session).reason == "wrong_kind")
        #expect(self.check(TestSupport.claims(apiOnly: false), accept: .api).reason == "wrong_kind")
        #expect(
            self.check(#"{"sub":"alice","iat":\#(self.now)}"#, accept: .api).reason == "wrong_kind",
            "no api_only claim means a session token"
        )
        #expect(self.check(TestSupport.claims(apiOnly: true), accept: .api).token != nil)
        #expect(self.check(TestSupport.claims(apiOnly: true), accept: []).reason == "wrong_kind")
    }

    @Test func revocationComesBeforeKind() {
        let cutoffs = CutoffSnapshot(globalRevokedBefore: self.now)
        #expect(self.check(TestSupport.claims(apiOnly: true), accept: .session, cutoffs: cutoffs).reason == "revoked")
    }

    @Test func missingClaim() {
        #expect(self.check(#"{"iat":\#(self.now),"api_only":true}"#).reason == "missing_claim")
        #expect(self.check(#"{"sub":"alice","api_only":true}"#).reason == "missing_claim")
        #expect(self.check(#"{"sub":"","iat":\#(self.now),"api_only":true}"#).reason == "missing_claim")
        #expect(self.check("{}").reason == "missing_claim")
    }

    @Test func issuerAndAudience() {
        let policy = VerificationPolicy(issuer: "https://rp.example", audiences: ["tokengate"])
        let strict = TokenVerifier(keys: self.keys, policy: policy)
        let good = #","iss":"https:\/\/rp.example","aud":["other","tokengate"]"#
        #expect(self.check(TestSupport.claims(extra: good), verifier: strict).token != nil)
        #expect(
            self.check(
                TestSupport.claims(extra: #","iss":"https://rp.example","aud":"tokengate""#),
                verifier: strict
            ).token != nil
        )
        #expect(
            self.check(TestSupport.claims(extra: #","aud":"tokengate""#), verifier: strict).reason
                == "missing_claim",
            "iss required"
        )
        #expect(
            self.check(
                TestSupport.claims(extra: #","iss":"https://evil.example","aud":"tokengate""#),
                verifier: strict
            ).reason == "missing_claim"
        )
        #expect(
            self.check(
                TestSupport.claims(extra: #","iss":"https://rp.example","aud":["other"]"#),
                verifier: strict
            ).reason == "missing_claim"
        )
        #expect(
            self.check(
                TestSupport.claims(extra: #","iss":"https://rp.example","aud":[]"#),
                verifier: strict
            ).reason == "missing_claim"
        )
        // Without a policy they are only type-checked.
        #expect(self.check(TestSupport.claims(extra: #","iss":"x","aud":["a","b"]"#)).token != nil)
        #expect(self.check(TestSupport.claims(extra: #","aud":[1]"#)).reason == "malformed")
        #expect(self.check(TestSupport.claims(extra: #","iss":5"#)).reason == "malformed")
    }

    /// `tokens.audience` as a list: `aud` (a string, or an array) must name any one of them.
    @Test func severalAudiences() {
        let verifier = TokenVerifier(keys: self.keys, policy: VerificationPolicy(audiences: ["web", "mobile"]))
        for accepted in [#""mobile""#, #""web""#, #"["other","mobile"]"#, #"["web"]"#, #"["mobile","web"]"#] {
            #expect(
                self.check(TestSupport.claims(extra: #","aud":"# + accepted), verifier: verifier).token != nil,
                "aud \(accepted)"
            )
        }
        for refused in [#""other""#, #"["other"]"#, #"[]"#, #""mobil""#, #""mobile2""#] {
            #expect(
                self.check(TestSupport.claims(extra: #","aud":"# + refused), verifier: verifier).reason
                    == "missing_claim",
                "aud \(refused)"
            )
        }
        #expect(self.check(TestSupport.claims(), verifier: verifier).reason == "missing_claim", "aud absent")
    }

    /// A route's `require_claims`: presence is demanded; the values are still checked as always.
    @Test func requiredClaims() {
        let exp = #","exp":\#(self.now + 60)"#
        let nbf = #","nbf":\#(self.now - 60)"#
        let needsExp = TokenVerifier(keys: self.keys, policy: VerificationPolicy(requiredClaims: .expiry))
        #expect(self.check(TestSupport.claims(), verifier: needsExp).reason == "missing_claim")
        #expect(self.check(TestSupport.claims(extra: nbf), verifier: needsExp).reason == "missing_claim")
        #expect(self.check(TestSupport.claims(extra: exp), verifier: needsExp).token != nil)
        let expired = #","exp":\#(self.now - 3600)"#
        #expect(self.check(TestSupport.claims(extra: expired), verifier: needsExp).reason == "expired")

        let needsNbf = TokenVerifier(keys: self.keys, policy: VerificationPolicy(requiredClaims: .notBefore))
        #expect(self.check(TestSupport.claims(extra: exp), verifier: needsNbf).reason == "missing_claim")
        #expect(self.check(TestSupport.claims(extra: nbf), verifier: needsNbf).token != nil)

        let both = TokenVerifier(keys: self.keys, policy: VerificationPolicy(requiredClaims: [.expiry, .notBefore]))
        #expect(self.check(TestSupport.claims(extra: exp), verifier: both).reason == "missing_claim")
        #expect(self.check(TestSupport.claims(extra: exp + nbf), verifier: both).token != nil)

        let issuerAndAudience = TokenVerifier(
            keys: self.keys,
            policy: VerificationPolicy(requiredClaims: [.issuer, .audience])
        )
        #expect(self.check(TestSupport.claims(extra: #","iss":"x""#), verifier: issuerAndAudience).reason == "missing_claim")
        #expect(self.check(TestSupport.claims(extra: #","aud":"y""#), verifier: issuerAndAudience).reason == "missing_claim")
        #expect(
            self.check(TestSupport.claims(extra: #","iss":"x","aud":"y""#), verifier: issuerAndAudience).token != nil
        )
        // Nothing required: the claims stay optional.
        #expect(self.check(TestSupport.claims()).token != nil)
    }

    @Test func configurableClaimNames() throws {
        let names = ClaimNames(user: "uid", issuedAt: "issued", apiOnly: "app")
        let custom = TokenVerifier(keys: self.keys, policy: VerificationPolicy(claimNames: names))
        let result = self.check(#"{"uid":"carol","issued":\#(self.now),"app":true,"sub":"ignored"}"#, verifier: custom)
        let token = try #require(result.token)
        #expect(token.subject == "carol" && token.kind == .api)
        #expect(self.check(TestSupport.claims(), verifier: custom).reason == "missing_claim")
    }

    @Test func numericDates() {
        #expect(self.check(#"{"sub":"a","iat":1.75999994e9,"api_only":true}"#).token?.issuedAt == 1_759_999_940)
        #expect(self.check(#"{"sub":"a","iat":1759999940.000,"api_only":true}"#).token?.issuedAt == 1_759_999_940)
        #expect(self.check(#"{"sub":"a","iat":17599999400E-1,"api_only":true}"#).token?.issuedAt == 1_759_999_940)
        for bad in [
            "1759999940.5", "-1", "1e300", "\"1759999940\"", "null", "true", "[1759999940]",
            "99999999999999999999999", "253402300800",
        ] {
            #expect(self.check(#"{"sub":"a","iat":\#(bad),"api_only":true}"#).reason == "malformed", "iat \(bad)")
        }
        for bad in ["01759999940", "+1759999940", "1759999940.", ".5", "1e", "0x10"] {
            #expect(self.check(#"{"sub":"a","iat":\#(bad),"api_only":true}"#).reason == "malformed", "JSON \(bad)")
        }
        #expect(self.check(TestSupport.claims(extra: #","exp":1.5e9"#)).reason == "expired")
        #expect(self.check(TestSupport.claims(extra: #","exp":"soon""#)).reason == "malformed")
    }

    @Test func subjectText() throws {
        let escaped = try #require(
            self.check(#"{"sub":"a\u00e9\ud83d\ude00\"b","iat":\#(self.now),"api_only":true}"#)
                .token
        )
        #expect(escaped.subject == "aé😀\"b")
        #expect(self.check(#"{"sub":"a\u0000b","iat":\#(self.now),"api_only":true}"#).reason == "malformed")
        #expect(
            self.check(#"{"sub":"a\ud800","iat":\#(self.now),"api_only":true}"#).reason == "malformed",
            "lone surrogate"
        )
        #expect(self.check(#"{"sub":5,"iat":\#(self.now),"api_only":true}"#).reason == "malformed")
        // As long as a cutoff's user id may be (``UserIDRules``), and no longer.
        let longest = String(repeating: "u", count: 256)
        #expect(self.check(TestSupport.claims(sub: longest)).token?.subject == longest)
        #expect(self.check(TestSupport.claims(sub: longest + "u")).reason == "malformed")
    }

    @Test func resultIsIndependentOfEntryPoint() throws {
        let token = TestSupport.hs256(header: TestSupport.header, payload: TestSupport.claims())
        let fromString = self.verifier.verify(token, accept: .any, cutoffs: .empty, now: self.now)
        let wrapped = "Bearer " + token + " "
        let slice = wrapped.dropFirst(7).dropLast()
        let fromSubstring = self.verifier.verify(slice, accept: .any, cutoffs: .empty, now: self.now)
        let fromBytes = Array(token.utf8).withUnsafeBytes {
            self.verifier.verify($0, accept: .any, cutoffs: .empty, now: self.now)
        }
        #expect(fromString.token != nil)
        #expect(fromString == fromSubstring)
        #expect(fromString == fromBytes)
    }
}

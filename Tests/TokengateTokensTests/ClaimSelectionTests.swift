//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateTokens

/// `require_scopes` and `forward_claims` as the verifier sees them: scopes from `scope` (a string) or `scp`
/// (an array), forwarded values as headers may carry them, each judged per route, and the same answers from a
/// verified-token cache hit.
@Suite struct ClaimSelectionTests {
    let now = TestSupport.now
    let selection = ClaimSelection(scopes: ["read", "write", "admin"], forwardedClaims: ["email", "groups", "age", "scope"])

    func verifier(requiredScopes: [String] = [], forwarded: [String] = [], keys: KeySet? = nil) throws -> TokenVerifier {
        let base = TokenVerifier(keys: try keys ?? TestSupport.hmacKeys(), policy: VerificationPolicy(selection: self.selection))
        var policy = base.policy
        policy.requiredScopes = requiredScopes
        policy.forwardedClaims = forwarded
        return base.narrowed(to: policy)
    }

    func check(_ extra: String, _ verifier: TokenVerifier) -> VerificationResult {
        verifier.verify(
            TestSupport.hs256(header: TestSupport.header, payload: TestSupport.claims(extra: extra)), accept: .any,
            cutoffs: .empty, now: self.now)
    }

    @Test func scopesComeFromAStringOrAnArray() throws {
        let verifier = try self.verifier(requiredScopes: ["read", "write"])
        #expect(self.check(#","scope":"openid read write""#, verifier).token != nil)
        #expect(self.check(#","scp":["write","read"]"#, verifier).token != nil)
        // The two claims add up.
        #expect(self.check(#","scope":"read","scp":["write"]"#, verifier).token != nil)
        // Escapes are decoded before the names are compared.
        #expect(self.check(#","scope":"re\u0061d  write""#, verifier).token != nil)
    }

    @Test func aMissingScopeIsA403NotA401() throws {
        let verifier = try self.verifier(requiredScopes: ["read", "write"])
        #expect(self.check(#","scope":"read""#, verifier).reason == "insufficient_scope")
        #expect(self.check("", verifier).reason == "insufficient_scope")
        // A name only matches whole: no prefixes, no case folding, no splitting an array element's neighbours.
        #expect(self.check(#","scope":"readwrite""#, verifier).reason == "insufficient_scope")
        #expect(self.check(#","scope":"Read Write""#, verifier).reason == "insufficient_scope")
        #expect(self.check(#","scp":"read,write""#, verifier).reason == "insufficient_scope")
        // Other types grant nothing, and do not make the token malformed.
        #expect(self.check(#","scope":{"read":true,"write":true}"#, verifier).reason == "insufficient_scope")
        #expect(self.check(#","scope":["read",1,"write"]"#, verifier).token != nil)
        // A dead token stays a 401 even when it also lacks the scope.
        let cutoffs = CutoffSnapshot(globalRevokedBefore: self.now)
        let revoked = verifier.verify(
            TestSupport.hs256(header: TestSupport.header, payload: TestSupport.claims()), accept: .any, cutoffs: cutoffs,
            now: self.now)
        #expect(revoked.reason == "revoked")
    }

    @Test func aScopeOutsideTheSelectionCanNeverBeGranted() throws {
        let verifier = try self.verifier(requiredScopes: ["delete"])
        #expect(self.check(#","scope":"delete read write admin""#, verifier).reason == "insufficient_scope")
    }

    @Test func aRouteWithoutScopesIgnoresThem() throws {
        let verifier = try self.verifier()
        #expect(self.check("", verifier).token != nil)
        #expect(self.check(#","scope":17"#, verifier).token != nil)
        // Broken JSON stays broken.
        #expect(self.check(#","scope":"read"#, verifier).reason == "malformed")
    }

    @Test func forwardedClaimsAreHeaderValues() throws {
        let verifier = try self.verifier(forwarded: ["email", "groups", "age", "missing"])
        let token = try #require(
            self.check(#","email":"al\u00efce@example.org","groups":["staff", "ops",7,true],"age":42.5"#, verifier).token)
        #expect(token.forwardedClaims == ["alïce@example.org", "staff ops 7 true", "42.5", nil])
        // null is absent; booleans and integers as JSON writes them.
        let other = try #require(self.check(#","email":null,"groups":false,"age":-3"#, verifier).token)
        #expect(other.forwardedClaims == [nil, "false", "-3", nil])
        let empty = try #require(self.check(#","groups":[]"#, verifier).token)
        #expect(empty.forwardedClaims == [nil, "", nil, nil])
    }

    @Test func aValueNoHeaderCanCarryIsRefusedNeverForwarded() throws {
        let verifier = try self.verifier(forwarded: ["email", "groups"])
        for extra in [
            #","email":"a@b\r\nX-Tokengate-User: root""#, #","email":"a\u0000b""#, #","email":"tab\there""#,
            #","email":"del\u007f""#, #","email":"nel\u0085""#, #","email":" padded""#, #","email":"padded ""#, #","groups":["a",["b"]]"#,
            #","groups":{"a":1}"#, #","groups":["a",null]"#, #","groups":["a",""]"#,
            #","email":""# + String(repeating: "x", count: ClaimSelection.maxForwardedValueBytes + 1) + #"""#,
            #","groups":["# + Array(repeating: #""abcdefghi""#, count: 103).joined(separator: ",") + "]",
        ] {
            #expect(self.check(extra, verifier).reason == "unforwardable_claim", "\(extra.prefix(60))")
        }
        // At the limit it goes.
        let atLimit = String(repeating: "x", count: ClaimSelection.maxForwardedValueBytes)
        #expect(self.check(#","email":""# + atLimit + #"""#, verifier).token?.forwardedClaims.first == atLimit)
    }

    @Test func onlyTheRouteThatForwardsAClaimRefusesItsBadValue() throws {
        let forwards = try self.verifier(forwarded: ["email"])
        let doesNot = try self.verifier(forwarded: ["groups"])
        let extra = #","email":"line\nbreak","groups":"ops""#
        #expect(self.check(extra, forwards).reason == "unforwardable_claim")
        #expect(self.check(extra, doesNot).token?.forwardedClaims == ["ops"])
    }

    @Test func aForwardedScopeStillGrants() throws {
        let verifier = try self.verifier(requiredScopes: ["admin"], forwarded: ["scope"])
        #expect(self.check(#","scope":"read admin""#, verifier).token?.forwardedClaims == ["read admin"])
        #expect(self.check(#","scope":"read""#, verifier).reason == "insufficient_scope")
    }

    @Test func reservedClaimsAndScopeNames() {
        let names = ClaimNames(user: "email")
        #expect(ClaimSelection.isReservedClaim("email", claimNames: names))
        #expect(ClaimSelection.isReservedClaim("exp", claimNames: names))
        #expect(!ClaimSelection.isReservedClaim("sub", claimNames: names))
        #expect(ClaimSelection.isScopeToken("api:read"))
        #expect(!ClaimSelection.isScopeToken("two words"))
        #expect(!ClaimSelection.isScopeToken(#"quo"te"#))
        #expect(!ClaimSelection.isScopeToken(#"back\slash"#))
        #expect(!ClaimSelection.isScopeToken(""))
    }

    @Test func aCacheHitJudgesScopesAndClaimsPerRoute() throws {
        let generated = try KeyGenerator.generate(algorithm: .es256, keyID: "selection")
        let signer = try TokenSigner(privateJWKS: Array(generated.privateJWKS.utf8))
        let keys = try KeySet(jwks: Array(generated.publicJWKS.utf8))
        let reader = try self.verifier(requiredScopes: ["read"], forwarded: ["email"], keys: keys)
        var adminPolicy = reader.policy
        adminPolicy.requiredScopes = ["admin"]
        adminPolicy.forwardedClaims = ["groups", "email"]
        let admin = reader.narrowed(to: adminPolicy)
        let header = #"{"alg":"ES256","typ":"JWT","kid":"selection"}"#
        let payload = TestSupport.claims(extra: #","scope":"read","email":"a@example.org","groups":["ops"]"#)
        let input = TestSupport.b64u(header) + "." + TestSupport.b64u(payload)
        let token = input + "." + Base64URL.encode(try signer.key.sign(Array(input.utf8)))
        let cache = VerifiedTokenCache(entries: 16)
        let first = reader.verify(token, accept: .any, cutoffs: .empty, now: self.now, cache: cache)
        #expect(first.token?.forwardedClaims == ["a@example.org"])
        #expect(cache.count == 1)
        let second = reader.verify(token, accept: .any, cutoffs: .empty, now: self.now, cache: cache)
        #expect(second == first)
        #expect(cache.hits == 1)
        // Another route, the same cached entry: its own scopes and its own claims, in its own order.
        #expect(admin.verify(token, accept: .any, cutoffs: .empty, now: self.now, cache: cache).reason == "insufficient_scope")
        var both = adminPolicy
        both.requiredScopes = []
        let picked = reader.narrowed(to: both).verify(token, accept: .any, cutoffs: .empty, now: self.now, cache: cache)
        #expect(picked.token?.forwardedClaims == ["ops", "a@example.org"])
        #expect(cache.hits == 3)
    }
}

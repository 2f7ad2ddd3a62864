//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

@Suite struct SignerTests {
    @Test(arguments: TokenAlgorithm.allCases)
    func generateMintVerify(_ algorithm: TokenAlgorithm) throws {
        let keys = try KeyGenerator.generate(algorithm: algorithm, keyID: nil)
        let publicSet = try JSONSerialization.jsonObject(with: Data(keys.publicJWKS.utf8)) as? [String: Any]
        let jwk = try #require((publicSet?["keys"] as? [[String: Any]])?.first)
        for member in ["kty", "kid", "alg", "use"] {
            #expect(jwk[member] is String, "\(member) present")
        }
        #expect(jwk["alg"] as? String == algorithm.rawValue && jwk["use"] as? String == "sig")
        if !algorithm.isHMAC {
            for member in ["d", "p", "q", "dp", "dq", "qi"] {
                #expect(jwk[member] == nil, "no private member \(member) in the public set")
            }
        } else {
            #expect(Base64URL.decode(jwk["k"] as! String)?.count == algorithm.hmacBits! / 8)
        }
        let signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        #expect(signer.algorithm == algorithm)
        #expect(signer.keyID == jwk["kid"] as? String)
        let verifier = TokenVerifier(keys: try KeySet(jwks: Array(keys.publicJWKS.utf8)))
        let now = TestSupport.now
        let api = try signer.mint(
            TokenClaims(
                subject: "alice",
                issuedAt: now,
                apiOnly: true,
                expiresAt: now + 100,
                issuer: "rp",
                audience: "tg"
            )
        )
        let verified = try #require(verifier.verify(api, accept: .api, cutoffs: .empty, now: now).token)
        #expect(
            verified
                == VerifiedToken(subject: "alice", kind: .api, issuedAt: now, keyID: signer.keyID, expiresAt: now + 100)
        )
        let session = try signer.mint(TokenClaims(subject: "alice", issuedAt: now, apiOnly: false))
        #expect(verifier.verify(session, accept: .session, cutoffs: .empty, now: now).token?.kind == .session)
        // Another key of the same algorithm does not verify it.
        let other = try KeyGenerator.generate(algorithm: algorithm, keyID: signer.keyID)
        #expect(
            TokenVerifier(keys: try KeySet(jwks: Array(other.publicJWKS.utf8)))
                .verify(api, accept: .any, cutoffs: .empty, now: now).reason == "bad_signature"
        )
    }

    @Test func signerRules() throws {
        let a = try KeyGenerator.generate(algorithm: .es256, keyID: "a")
        #expect(throws: KeyLoadingError.self, "a public key cannot mint") {
            try TokenSigner(privateJWKS: Array(a.publicJWKS.utf8))
        }
        #expect(throws: KeyLoadingError.self, "unknown kid") {
            try TokenSigner(privateJWKS: Array(a.privateJWKS.utf8), keyID: "zzz")
        }
        let signer = try TokenSigner(privateJWKS: Array(a.privateJWKS.utf8), keyID: "a")
        #expect(throws: TokenSigningError.self) {
            try signer.mint(TokenClaims(subject: "", issuedAt: 1, apiOnly: true))
        }
        #expect(throws: TokenSigningError.self) {
            try signer.mint(TokenClaims(subject: "a\nb", issuedAt: 1, apiOnly: true))
        }
        #expect(throws: TokenSigningError.self) {
            try signer.mint(TokenClaims(subject: "a", issuedAt: -1, apiOnly: true))
        }
        // A tampered private key (d not matching x/y) is refused.
        let tampered = a.privateJWKS.replacingOccurrences(of: #""d" : ""#, with: #""d" : "A"#)
        #expect(tampered != a.privateJWKS)
        #expect(throws: (any Error).self) { try TokenSigner(privateJWKS: Array(tampered.utf8)) }
    }

    /// The configuration's `alg` for the signing key binds a JWK that has none, and a JWK whose own `alg`
    /// differs is refused instead of one of the two silently winning (`signing_key.alg` was ignored).
    @Test func theConfiguredAlgorithmBindsOrConflicts() throws {
        let hmac = try KeyGenerator.generate(algorithm: .hs512, keyID: "h")
        let withoutAlg = hmac.privateJWKS.replacingOccurrences(of: #""alg" : "HS512","#, with: "")
        try #require(withoutAlg != hmac.privateJWKS)
        let bound = try TokenSigner(privateJWKS: Array(withoutAlg.utf8), algorithm: .hs384)
        #expect(bound.algorithm == .hs384)
        let token = try bound.mint(TokenClaims(subject: "a", issuedAt: 1, apiOnly: true))
        #expect(String(decoding: try #require(Base64URL.decode(String(token.split(separator: ".")[0]))), as: UTF8.self).contains("\"alg\":\"HS384\""))
        #expect(try TokenSigner(privateJWKS: Array(hmac.privateJWKS.utf8), algorithm: .hs512).algorithm == .hs512)
        let conflict = #expect(throws: KeyLoadingError.self) {
            try TokenSigner(privateJWKS: Array(hmac.privateJWKS.utf8), algorithm: .hs256)
        }
        #expect(conflict?.code == "alg_mismatch")
        #expect(throws: KeyLoadingError.self, "an algorithm that does not fit the key type") {
            try TokenSigner(privateJWKS: Array(withoutAlg.utf8), algorithm: .es256)
        }
    }

    @Test func customClaimNamesAndEscaping() throws {
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "h")
        let names = ClaimNames(user: "uid", issuedAt: "t", apiOnly: "app")
        let signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8), claimNames: names)
        let verifier = TokenVerifier(
            keys: try KeySet(jwks: Array(keys.publicJWKS.utf8)),
            policy: VerificationPolicy(claimNames: names)
        )
        // A control character is refused in a user id, so minting refuses it first.
        #expect(throws: TokenSigningError.self) {
            try signer.mint(TokenClaims(subject: "tab\there", issuedAt: TestSupport.now, apiOnly: true))
        }
        let clean = "quote\" back\\slash é 😀"
        let good = try signer.mint(TokenClaims(subject: clean, issuedAt: TestSupport.now, apiOnly: true))
        #expect(verifier.verify(good, accept: .any, cutoffs: .empty, now: TestSupport.now).token?.subject == clean)
    }

    /// Many tasks verify with the same verifier at once (the C objects are shared read-only).
    @Test func concurrentVerification() async throws {
        var tokens: [(TokenVerifier, String)] = []
        for algorithm in TokenAlgorithm.allCases {
            let keys = try KeyGenerator.generate(algorithm: algorithm, keyID: "c")
            let token = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
                .mint(TokenClaims(subject: "alice", issuedAt: TestSupport.now, apiOnly: true))
            tokens.append((TokenVerifier(keys: try KeySet(jwks: Array(keys.publicJWKS.utf8))), token))
        }
        let work = tokens
        let failures = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var failures = 0
                    for _ in 0..<25 {
                        for (verifier, token) in work
                        where verifier.verify(token, accept: .api, cutoffs: .empty, now: TestSupport.now).token == nil {
                            failures += 1
                        }
                    }
                    return failures
                }
            }
            return await group.reduce(0, +)
        }
        #expect(failures == 0)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateTokens

/// The verified-token cache: a hit gives the answer a full verification would, every check after the signature
/// still runs on it, the bounds hold against a flood, and nothing that failed is ever remembered.
@Suite struct VerifiedTokenCacheTests {
    let now: Int64 = 1_800_000_000

    /// One ES256 key pair per suite instance (a fresh key per test).
    let signer: TokenSigner
    let keys: KeySet

    init() throws {
        let generated = try KeyGenerator.generate(algorithm: .es256, keyID: "cache-test")
        self.signer = try TokenSigner(privateJWKS: Array(generated.privateJWKS.utf8))
        self.keys = try KeySet(jwks: Array(generated.publicJWKS.utf8))
    }

    func token(
        _ subject: String = "alice",
        issuedAt: Int64? = nil,
        apiOnly: Bool = true,
        expiresAt: Int64? = nil,
        notBefore: Int64? = nil
    ) throws -> String {
        try self.signer.mint(
            TokenClaims(
                subject: subject,
                issuedAt: issuedAt ?? self.now - 10,
                apiOnly: apiOnly,
                expiresAt: expiresAt,
                notBefore: notBefore
            )
        )
    }

    /// A token with any payload, well signed by the suite's key (for payloads ``TokenSigner/mint(_:)`` refuses).
    func signed(payload: String) throws -> String {
        let header = #"{"alg":"ES256","typ":"JWT","kid":"cache-test"}"#
        let input = TestSupport.b64u(header) + "." + TestSupport.b64u(payload)
        return input + "." + Base64URL.encode(try self.signer.key.sign(Array(input.utf8)))
    }

    @Test func aHitGivesTheSameIdentityWithoutVerifyingAgain() throws {
        let verifier = TokenVerifier(keys: self.keys)
        let cache = VerifiedTokenCache(entries: 16)
        let token = try self.token()
        let fresh = verifier.verify(token, accept: .api, cutoffs: .empty, now: self.now)
        guard case .valid(let identity) = fresh else {
            Issue.record("the token does not verify: \(fresh)")
            return
        }
        let first = verifier.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache)
        #expect(first == fresh)
        #expect(cache.count == 1 && cache.hits == 0 && cache.misses == 1)
        let second = verifier.verify(token, accept: .api, cutoffs: .empty, now: self.now + 5, cache: cache)
        #expect(second == .valid(identity))
        #expect(cache.hits == 1, "the second request is answered from the cache")
        #expect(identity.subject == "alice" && identity.keyID == "cache-test" && identity.kind == .api)
    }

    @Test func aRevokedUserIsRefusedOnTheNextRequest() throws {
        let verifier = TokenVerifier(keys: self.keys)
        let cache = VerifiedTokenCache(entries: 16)
        let token = try self.token("bob", apiOnly: true)
        #expect(verifier.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)

        let userCutoff = CutoffSnapshot(users: ["bob": UserCutoffs(revokedBefore: self.now)])
        #expect(verifier.verify(token, accept: .api, cutoffs: userCutoff, now: self.now, cache: cache) == .invalid(.revoked))
        let apiCutoff = CutoffSnapshot(users: ["bob": UserCutoffs(apiRevokedBefore: self.now)])
        #expect(
            verifier.verify(token, accept: .api, cutoffs: apiCutoff, now: self.now, cache: cache) == .invalid(.apiRevoked)
        )
        let global = CutoffSnapshot(globalRevokedBefore: self.now)
        #expect(verifier.verify(token, accept: .api, cutoffs: global, now: self.now, cache: cache) == .invalid(.revoked))
        #expect(cache.hits == 3, "every refusal came from the cached entry, not a fresh verification")
        // A cutoff for someone else leaves the token alone.
        let other = CutoffSnapshot(users: ["carol": UserCutoffs(revokedBefore: self.now)])
        #expect(verifier.verify(token, accept: .api, cutoffs: other, now: self.now, cache: cache).isValid)
    }

    @Test func aRevokedDeviceIsRefusedOnTheNextRequestFromTheCache() throws {
        let verifier = TokenVerifier(keys: self.keys)
        let cache = VerifiedTokenCache(entries: 16)
        let lost = try #require(DeviceID.random())
        let kept = try #require(DeviceID.random())
        func token(_ device: DeviceID) throws -> String {
            try self.signer.mint(TokenClaims(subject: "dora", issuedAt: self.now - 10, apiOnly: true, device: device))
        }
        let lostToken = try token(lost)
        let keptToken = try token(kept)
        #expect(verifier.verify(lostToken, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)
        #expect(verifier.verify(keptToken, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)

        let revoked = CutoffSnapshot(
            revokedDevices: [lost: RevokedDevice(user: "dora", revokedAt: self.now - 5, tokensExpireBy: nil)])
        #expect(
            verifier.verify(lostToken, accept: .api, cutoffs: revoked, now: self.now, cache: cache)
                == .invalid(.deviceRevoked)
        )
        let other = verifier.verify(keptToken, accept: .api, cutoffs: revoked, now: self.now, cache: cache)
        guard case .valid(let identity) = other else {
            Issue.record("the user's other device stays valid: \(other)")
            return
        }
        #expect(identity.device == kept)
        #expect(cache.hits == 2, "both answers came from the cached entries")
    }

    @Test func anExpiredCachedTokenIsRefused() throws {
        var policy = VerificationPolicy()
        policy.clockSkew = 30
        policy.sessionMaxAge = 3600
        let verifier = TokenVerifier(keys: self.keys, policy: policy)
        let cache = VerifiedTokenCache(entries: 16)

        let expiring = try self.token(expiresAt: self.now + 100)
        #expect(verifier.verify(expiring, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)
        #expect(verifier.verify(expiring, accept: .api, cutoffs: .empty, now: self.now + 129, cache: cache).isValid)
        let late = verifier.verify(expiring, accept: .api, cutoffs: .empty, now: self.now + 130, cache: cache)
        #expect(late == .invalid(.expired))

        // A session token without `exp` ends at `iat` + session max-age.
        let session = try self.token("dave", issuedAt: self.now, apiOnly: false)
        #expect(verifier.verify(session, accept: .session, cutoffs: .empty, now: self.now, cache: cache).isValid)
        let ended = verifier.verify(session, accept: .session, cutoffs: .empty, now: self.now + 3630, cache: cache)
        #expect(ended == .invalid(.expired))
        #expect(cache.hits == 3)
    }

    /// The route checks, on a token another route put in the cache: a route's `algorithms`, its `require_claims`
    /// and its kinds. Each answer is the one the same route gives without a cache.
    @Test func aRouteThatRefusesTheTokenStillRefusesItCached() throws {
        let gateway = TokenVerifier(keys: self.keys)
        var onlyEdDSA = gateway.policy
        onlyEdDSA.allowedAlgorithms = [.edDSA]
        var needsExpiry = gateway.policy
        needsExpiry.requiredClaims = [.expiry]
        let narrowAlgorithms = gateway.narrowed(to: onlyEdDSA)
        let narrowClaims = gateway.narrowed(to: needsExpiry)
        #expect(narrowAlgorithms.prepared.cacheScope == gateway.prepared.cacheScope)

        let cache = VerifiedTokenCache(entries: 16)
        let token = try self.token()
        #expect(gateway.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)
        #expect(cache.count == 1)

        let cases: [(TokenVerifier, AcceptedKinds, VerificationResult)] = [
            (narrowAlgorithms, .api, .invalid(.algNotAllowed)),
            (narrowClaims, .api, .invalid(.missingClaim)),
            (gateway, .session, .invalid(.wrongKind)),
        ]
        for (verifier, accept, expected) in cases {
            let uncached = verifier.verify(token, accept: accept, cutoffs: .empty, now: self.now)
            let cached = verifier.verify(token, accept: accept, cutoffs: .empty, now: self.now, cache: cache)
            #expect(uncached == expected)
            #expect(cached == expected)
        }
        #expect(cache.hits == 3, "the refusals were judged on the cached entry")
    }

    @Test func aNotYetValidTokenIsNeverCachedAndATimeTravellingCacheStillChecksNbf() throws {
        let verifier = TokenVerifier(keys: self.keys)
        let cache = VerifiedTokenCache(entries: 16)
        let token = try self.token(notBefore: self.now + 1000)
        #expect(verifier.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache) == .invalid(.notYetValid))
        #expect(cache.count == 0)
        #expect(verifier.verify(token, accept: .api, cutoffs: .empty, now: self.now + 1000, cache: cache).isValid)
        #expect(cache.count == 1)
        // Judged against the moment passed in: an earlier `now` (a clock stepped back) refuses it again.
        let earlier = verifier.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache)
        #expect(earlier == .invalid(.notYetValid))
    }

    @Test func aNewKeySetOrConfigurationEmptiesTheCache() throws {
        let old = TokenVerifier(keys: self.keys)
        let cache = VerifiedTokenCache(entries: 16)
        let token = try self.token()
        #expect(old.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)
        #expect(cache.count == 1)

        // A narrowed route of the same configuration shares the entries.
        var narrowed = old.policy
        narrowed.requiredClaims = [.issuer]
        narrowed.allowedAlgorithms = [.es256]
        _ = old.narrowed(to: narrowed).verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache)
        #expect(cache.count == 1 && cache.hits == 1)

        // A reload builds new verifiers, even over the same keys: the first one to use the cache empties it.
        let rotated = try KeyGenerator.generate(algorithm: .es256, keyID: "cache-test")
        let reloaded = TokenVerifier(keys: try KeySet(jwks: Array(rotated.publicJWKS.utf8)))
        let refused = reloaded.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache)
        #expect(refused == .invalid(.badSignature), "the old key's token is checked against the new key")
        #expect(cache.count == 0, "the change emptied the cache")

        // A request still running under the old configuration neither reads nor fills the cache.
        #expect(old.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)
        #expect(cache.count == 0)
        let newToken = try TokenSigner(privateJWKS: Array(rotated.privateJWKS.utf8))
            .mint(TokenClaims(subject: "erin", issuedAt: self.now - 10, apiOnly: true))
        #expect(reloaded.verify(newToken, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)
        #expect(cache.count == 1)

        // A policy that reads payloads differently (another issuer) is a new scope, not a narrowing.
        var otherIssuer = reloaded.policy
        otherIssuer.issuer = "https://issuer.example"
        let other = reloaded.narrowed(to: otherIssuer)
        #expect(other.prepared.cacheScope > reloaded.prepared.cacheScope)
        #expect(other.verify(newToken, accept: .api, cutoffs: .empty, now: self.now, cache: cache) == .invalid(.missingClaim))
        #expect(cache.count == 0)
    }

    /// Distinct valid tokens, one after the other, never push the cache past its bound, and a token in use
    /// between them keeps its entry (second chance): the flood costs each of its own tokens a verification,
    /// and the token in use none.
    @Test func aFloodOfDistinctValidTokensStaysWithinTheBound() throws {
        let verifier = TokenVerifier(keys: self.keys)
        let cache = VerifiedTokenCache(entries: 64)
        #expect(cache.capacity == 64)
        let hot = try self.token("hot-user")
        #expect(verifier.verify(hot, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)
        let flood = 600
        var largest = 0
        for index in 0..<flood {
            let token = try self.token("flood-\(index)")
            #expect(verifier.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)
            #expect(verifier.verify(hot, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)
            largest = max(largest, cache.count)
        }
        #expect(largest == 64, "full, and never more than the bound")
        #expect(cache.hits == flood, "every request of the token in use was a hit")
        #expect(cache.misses == flood + 1)

        // Sizes that are not a multiple of the set size round down; below it, one set.
        #expect(VerifiedTokenCache(entries: 10).capacity == 8)
        #expect(VerifiedTokenCache(entries: 3).capacity == 3)
        #expect(VerifiedTokenCache(entries: 0).capacity == 0)
    }

    @Test func aDisabledCacheVerifiesEveryToken() throws {
        let verifier = TokenVerifier(keys: self.keys)
        let cache = VerifiedTokenCache(entries: 0)
        let token = try self.token()
        #expect(verifier.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)
        #expect(verifier.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache).isValid)
        #expect(cache.count == 0 && cache.hits == 0 && cache.misses == 0)
    }

    /// Garbage, a forged or truncated signature, and signed tokens refused for their claims or times: none is
    /// remembered, so none can displace an entry, and each is refused again, for the same reason, next time.
    @Test func nothingThatFailsIsCached() throws {
        let verifier = TokenVerifier(keys: self.keys)
        let cache = VerifiedTokenCache(entries: 16)
        let good = try self.token()
        let parts = good.split(separator: ".").map(String.init)
        var flipped = Array(parts[2].utf8)
        flipped[5] = flipped[5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let refused: [(String, RejectionReason)] = [
            ("", .malformed),
            ("not a token", .malformed),
            ("a.b.c", .malformed),
            (parts[0] + "." + parts[1], .malformed),
            (good + ".", .malformed),
            (parts[0] + "." + parts[1] + "." + String(decoding: flipped, as: UTF8.self), .badSignature),
            (parts[0] + "." + TestSupport.b64u(#"{"sub":"mallory","iat":1,"api_only":true}"#) + "." + parts[2], .badSignature),
            (try self.token(expiresAt: self.now - 3600), .expired),
            (try self.token(issuedAt: self.now + 3600), .issuedInFuture),
            (try self.signed(payload: #"{"sub":"x","sub":"y","iat":\#(self.now),"api_only":true}"#), .malformed),
            (try self.signed(payload: #"{"sub":"x","api_only":true}"#), .missingClaim),
            (try self.signed(payload: #"{"sub":"","iat":\#(self.now),"api_only":true}"#), .missingClaim),
            (try self.signed(payload: "hello"), .malformed),
            (String(repeating: "x", count: TokenVerifier.maxTokenLength + 1), .malformed),
        ]
        for _ in 0..<2 {
            for (token, reason) in refused {
                let result = verifier.verify(token, accept: .api, cutoffs: .empty, now: self.now, cache: cache)
                #expect(result == .invalid(reason), "\(token.prefix(40))")
            }
        }
        #expect(verifier.verify(try self.token(apiOnly: false), accept: .api, cutoffs: .empty, now: self.now, cache: cache) == .invalid(.wrongKind))
        let revoked = CutoffSnapshot(globalRevokedBefore: self.now)
        #expect(verifier.verify(good, accept: .api, cutoffs: revoked, now: self.now, cache: cache) == .invalid(.revoked))
        #expect(cache.count == 0 && cache.hits == 0)
    }

    @Test func hmacKeySetsBypassTheCache() throws {
        let verifier = TokenVerifier(keys: try TestSupport.hmacKeys())
        let cache = VerifiedTokenCache(entries: 16)
        let token = TestSupport.hs256(header: TestSupport.header, payload: TestSupport.claims())
        let plain = verifier.verify(token, accept: .api, cutoffs: .empty, now: TestSupport.now)
        #expect(plain.isValid)
        #expect(verifier.verify(token, accept: .api, cutoffs: .empty, now: TestSupport.now, cache: cache) == plain)
        #expect(cache.count == 0 && cache.misses == 0, "no digest taken, no lookup made")
    }

    /// The digest is keyed per cache: two caches file the same token under unrelated digests, and a digest
    /// matches only itself in all 256 bits.
    @Test func digestsAreKeyedAndComparedInFull() throws {
        let token = Array(try self.token().utf8)
        let a = VerifiedTokenCache(entries: 4)
        let b = VerifiedTokenCache(entries: 4)
        let (da, db, again) = token.withUnsafeBytes { (a.digest($0), b.digest($0), a.digest($0)) }
        #expect(da.matches(again))
        #expect(!da.matches(db))
        for word in 0..<4 {
            var other = da
            switch word {
            case 0: other.w0 ^= 1 << 63
            case 1: other.w1 ^= 1
            case 2: other.w2 ^= 1 << 17
            default: other.w3 ^= 1 << 40
            }
            #expect(!da.matches(other), "word \(word)")
        }
    }
}

extension VerificationResult {
    var isValid: Bool {
        if case .valid = self { return true }
        return false
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// MARK: Verification through an event loop's cache of verified tokens.

extension TokenVerifier {
    /// Verifies a token, skipping the JWS layer and the payload parsing when `cache` remembers it.
    ///
    /// The answer is always the one ``verify(_:accept:cutoffs:now:)-(UnsafeRawBufferPointer,_,_,_)`` would give:
    /// on a hit, the algorithm binding (which a route's `algorithms` narrows) and the checks after the claim
    /// types (``judge(_:accept:cutoffs:now:)``: `iss`, `aud`, required claims, times, cutoffs, kind) run
    /// again on the remembered claims; only the decoding, the parsing and the signature check are skipped.
    ///
    /// The cache is bypassed when it is nil or disabled, for an HMAC key set (its check costs about what the
    /// cache's keyed digest does), and for a verifier of an older scope than the cache's entries. Only a
    /// `.valid` result is remembered.
    public func verify(
        _ token: UnsafeRawBufferPointer,
        accept: AcceptedKinds,
        cutoffs: CutoffSnapshot,
        now: Int64,
        cache: VerifiedTokenCache?
    ) -> VerificationResult {
        guard let cache, cache.capacity > 0, self.prepared.usesCache, token.count > 0,
            token.count <= Self.maxTokenLength, cache.admit(scope: self.prepared.cacheScope)
        else {
            return self.verify(token, accept: accept, cutoffs: cutoffs, now: now)
        }
        let digest = cache.digest(token)
        if let claims = cache.lookup(digest) {
            let bit = claims.algorithm.bit
            guard self.prepared.keys.keys[claims.keyIndex].algorithmMask & bit != 0,
                self.prepared.algorithmMask & bit != 0
            else { return .invalid(.algNotAllowed) }
            return self.judge(claims, accept: accept, cutoffs: cutoffs, now: now)
        }
        var read: SignedClaims?
        let result = self.run(token) { scanner, payload, keyIndex, algorithm in
            self.checkClaims(
                scanner: &scanner,
                payload: payload,
                keyIndex: keyIndex,
                algorithm: algorithm,
                accept: accept,
                cutoffs: cutoffs,
                now: now,
                read: { read = $0 }
            )
        }
        if case .valid = result, let read {
            cache.insert(digest, read)
        }
        return result
    }

    /// Verifies a token held in a String through `cache` (tests and tools; the gateway passes bytes).
    public func verify(
        _ token: String,
        accept: AcceptedKinds,
        cutoffs: CutoffSnapshot,
        now: Int64,
        cache: VerifiedTokenCache?
    ) -> VerificationResult {
        var copy = token
        return copy.withUTF8 {
            self.verify(UnsafeRawBufferPointer($0), accept: accept, cutoffs: cutoffs, now: now, cache: cache)
        }
    }

    /// Whether ``verify(_:accept:cutoffs:now:cache:)`` would use a cache at all: false for an HMAC key set.
    public var usesVerifiedTokenCache: Bool { self.prepared.usesCache }

    /// This verifier with another policy over the same key set: a route's narrowing (`algorithms`,
    /// `require_claims`, `require_scopes`, `forward_claims`). When the policy reads payloads the same way (the
    /// same claim names, issuer, audiences and ``ClaimSelection``) the result shares this verifier's cache scope, so the routes of one configuration share an
    /// event loop's cached tokens and each judges them by its own policy.
    public func narrowed(to policy: VerificationPolicy) -> TokenVerifier {
        let current = self.policy
        let readsAlike =
            policy.claimNames == current.claimNames && policy.issuer == current.issuer
            && policy.audiences == current.audiences && policy.selection == current.selection
        return TokenVerifier(
            prepared: Prepared(
                keys: self.keys,
                policy: policy,
                cacheScope: readsAlike ? self.prepared.cacheScope : nil
            )
        )
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// MARK: The JWT layer: claims, times, cutoffs and kind (steps 7–10 of the overview).

extension TokenVerifier {
    /// The claims read from a payload, as values and spans of the decoded payload.
    struct Claims {
        var subject: ByteSpan?
        var issuedAt: Int64?
        /// Nil when the kind claim is absent (the policy's default kind then).
        var apiOnly: Bool?
        var expiresAt: Int64?
        var notBefore: Int64?
        /// Nil when `iss` is absent; otherwise whether it equals the policy's issuer (true without one).
        var issuerMatches: Bool?
        /// Nil when `aud` is absent; otherwise whether it is or contains one of the policy's audiences (true
        /// without any).
        var audienceMatches: Bool?
        /// The `did` claim: a device id of the one spelling the gateway writes (a string of anything else, or
        /// not a string, is malformed).
        var device: DeviceID?
        /// The ``ClaimSelection`` part: granted scopes as bits, forwarded values, unforwardable claims as bits.
        var selected = SelectedClaims()
    }

    /// What a payload held of the policy's ``ClaimSelection``. All zero and empty (no allocation) when the
    /// selection is empty.
    struct SelectedClaims {
        /// Bit `i`: the token grants ``ClaimSelection/scopes`` `i`.
        var scopes: UInt64 = 0
        /// The value of ``ClaimSelection/forwardedClaims`` `i` at `i`, sized on the first one found.
        var forwarded: [String?] = []
        /// Bit `i`: forwarded claim `i` is present but no header may carry it.
        var unforwardable: UInt32 = 0
    }

    /// What a well-signed token's payload says: every fact the checks after the signature need, and nothing
    /// that depends on the moment, on a route's narrowing or on the cutoffs. It is what a
    /// ``VerifiedTokenCache`` entry holds, so that a cached token is judged by exactly the code that judges a
    /// fresh one (``judge(_:accept:cutoffs:now:)``).
    struct SignedClaims {
        /// The user claim, already checked against ``UserIDRules`` (so at most 256 bytes).
        var subject: String
        var issuedAt: Int64
        var apiOnly: Bool
        /// `exp` as signed; the session max-age is applied when judging, since a reload may change it.
        var expiresAt: Int64?
        var notBefore: Int64?
        /// As in ``Claims``: nil when absent, else whether it matches the policy.
        var issuerMatches: Bool?
        var audienceMatches: Bool?
        /// The key that verified the signature, in ``KeySet/keys``, and the algorithm it verified with.
        var keyIndex: Int
        var algorithm: TokenAlgorithm
        /// The `did` claim (``Claims/device``): checked against the revoked devices on every request.
        var device: DeviceID?
        /// Scopes and forwarded claims (``ClaimSelection``): a route checks its own bits and picks its values.
        var selected: SelectedClaims
    }

    /// The claim types, the claims every token needs, and then ``judge(_:accept:cutoffs:now:)``, for a token
    /// whose signature is good.
    func checkClaims(
        scanner: inout JSONScanner,
        payload: ByteSpan,
        keyIndex: Int,
        algorithm: TokenAlgorithm,
        accept: AcceptedKinds,
        cutoffs: CutoffSnapshot,
        now: Int64,
        read: (SignedClaims) -> Void = { _ in }
    ) -> VerificationResult {
        let parsed: Claims
        switch self.parseClaims(&scanner) {
        case .some(let claims): parsed = claims
        case .none: return .invalid(.malformed)
        }
        guard let subjectSpan = parsed.subject, subjectSpan.count > 0, let issuedAt = parsed.issuedAt else {
            return .invalid(.missingClaim)
        }
        // The user id is forwarded in a header and is the key cutoffs are stored under: an id no cutoff could be
        // stored under (or that HTTP would trim into another) could never be revoked.
        let subjectBytes = UnsafeBufferPointer(start: scanner.base + subjectSpan.start, count: subjectSpan.count)
        if UserIDRules.problem(subjectBytes) != nil {
            return .invalid(.malformed)
        }
        let claims = SignedClaims(
            subject: String(decoding: subjectBytes, as: UTF8.self),
            issuedAt: issuedAt,
            apiOnly: parsed.apiOnly ?? self.prepared.defaultAPIOnly,
            expiresAt: parsed.expiresAt,
            notBefore: parsed.notBefore,
            issuerMatches: parsed.issuerMatches,
            audienceMatches: parsed.audienceMatches,
            keyIndex: keyIndex,
            algorithm: algorithm,
            device: parsed.device,
            selected: parsed.selected
        )
        read(claims)
        return self.judge(claims, accept: accept, cutoffs: cutoffs, now: now)
    }

    /// The checks that run on every request, cached or not: the policy's `iss`, `aud` and required claims,
    /// the times against `now`, the cutoffs, and the kind the route accepts (everything after the claim types).
    @inline(__always)
    func judge(_ claims: SignedClaims, accept: AcceptedKinds, cutoffs: CutoffSnapshot, now: Int64)
        -> VerificationResult
    {
        if self.prepared.issuer != nil && claims.issuerMatches != true { return .invalid(.missingClaim) }
        if !self.prepared.audiences.isEmpty && claims.audienceMatches != true { return .invalid(.missingClaim) }
        // A route's `require_claims`: presence only; the values are checked below (times) or above (iss, aud).
        let required = self.prepared.requiredClaims
        if !required.isEmpty {
            if (required.contains(.expiry) && claims.expiresAt == nil)
                || (required.contains(.notBefore) && claims.notBefore == nil)
                || (required.contains(.issuer) && claims.issuerMatches == nil)
                || (required.contains(.audience) && claims.audienceMatches == nil)
            {
                return .invalid(.missingClaim)
            }
        }
        // A claim this route forwards that no header may carry: refused, never forwarded in part.
        if claims.selected.unforwardable & self.prepared.forwardedMask != 0 { return .invalid(.unforwardableClaim) }

        let issuedAt = claims.issuedAt
        let kind: TokenKind = claims.apiOnly ? .api : .session
        let skew = self.prepared.clockSkew
        // now is arbitrary; everything else is bounded (NumericDates ≤ year 9999, skew and max-age ≤ 100 years).
        let latestAcceptable = now.addingReportingOverflow(skew)
        let nowPlusSkew = latestAcceptable.overflow ? Int64.max : latestAcceptable.partialValue
        if issuedAt > nowPlusSkew { return .invalid(.issuedInFuture) }
        if let notBefore = claims.notBefore, notBefore > nowPlusSkew { return .invalid(.notYetValid) }
        var expiry = claims.expiresAt
        if kind == .session {
            let sessionEnd = issuedAt + self.prepared.sessionMaxAge
            expiry = min(expiry ?? sessionEnd, sessionEnd)
        }
        if let expiry {
            let earliest = now.subtractingReportingOverflow(skew)
            let nowMinusSkew = earliest.overflow ? Int64.min : earliest.partialValue
            if nowMinusSkew >= expiry { return .invalid(.expired) }
        }

        // A named issuer's users are kept apart from the token page's and from each other's; the key is built
        // only when some user has a cutoff at all.
        var cutoffSubject = claims.subject
        if let prefix = self.prepared.cutoffPrefix, !cutoffs.users.isEmpty { cutoffSubject = prefix + claims.subject }
        if let revocation = cutoffs.revocation(
            subject: cutoffSubject, issuedAt: issuedAt, kind: kind, device: claims.device
        ) {
            return .invalid(revocation)
        }
        guard accept.accepts(kind) else { return .invalid(.wrongKind) }
        // After revocation and kind, like the kind: a live token that lacks a scope gets a 403, a dead one a 401.
        let requiredScopes = self.prepared.requiredScopeMask
        if self.prepared.scopesUnsatisfiable || claims.selected.scopes & requiredScopes != requiredScopes {
            return .invalid(.insufficientScope)
        }
        var forwarded: [String?] = []
        if !self.prepared.forwardedIndices.isEmpty {
            let values = claims.selected.forwarded
            forwarded = self.prepared.forwardedIndices.map { index in
                guard let index, index < values.count else { return nil }
                return values[index]
            }
        }
        return .valid(
            VerifiedToken(
                subject: claims.subject,
                kind: kind,
                issuedAt: issuedAt,
                keyID: self.prepared.keys.keys[claims.keyIndex].keyID,
                expiresAt: expiry,
                device: claims.device,
                forwardedClaims: forwarded
            )
        )
    }

    /// Reads the payload object. Nil for anything malformed (see the payload checks in the overview).
    func parseClaims(_ scanner: inout JSONScanner) -> Claims? {
        guard scanner.consume(UInt8(ascii: "{")) else { return nil }
        return withUnsafeTemporaryAllocation(of: ByteSpan.self, capacity: JOSEHeader.maxMembers) { names -> Claims? in
            var claims = Claims()
            var count = 0
            var first = true
            while true {
                switch scanner.nextMember(first: &first) {
                case .error:
                    return nil
                case .end:
                    return scanner.atEnd() ? claims : nil
                case .member(let name):
                    guard count < JOSEHeader.maxMembers else { return nil }
                    for i in 0..<count where scanner.equals(names[i], name) { return nil }
                    names[count] = name
                    count += 1
                    guard self.readClaim(name, into: &claims, scanner: &scanner) else { return nil }
                }
            }
        }
    }

    @inline(__always)
    private func readClaim(_ name: ByteSpan, into claims: inout Claims, scanner: inout JSONScanner) -> Bool {
        @inline(__always) func matches(_ bytes: [UInt8]) -> Bool {
            bytes.withUnsafeBufferPointer { scanner.equals(name, $0) }
        }
        @inline(__always) func matches(_ literal: StaticString) -> Bool {
            literal.withUTF8Buffer { scanner.equals(name, $0) }
        }
        @inline(__always) func numericDate() -> Int64? {
            guard case .value(let value) = scanner.parseNumericDate() else { return nil }
            return value
        }
        // Claims a route forwards are never the ones read below (``ClaimSelection/isReservedClaim(_:claimNames:)``).
        if !self.prepared.forwardedNames.isEmpty, let index = self.forwardedIndex(name, scanner: scanner) {
            return self.readForwarded(index, name: name, into: &claims.selected, scanner: &scanner)
        }
        if matches(self.prepared.userClaim) {
            guard let value = scanner.parseString() else { return false }
            claims.subject = value
        } else if matches(self.prepared.issuedAtClaim) {
            guard let value = numericDate() else { return false }
            claims.issuedAt = value
        } else if matches(self.prepared.apiOnlyClaim) {
            guard let value = scanner.parseBool() else { return false }
            claims.apiOnly = value
        } else if matches("exp") {
            guard let value = numericDate() else { return false }
            claims.expiresAt = value
        } else if matches("nbf") {
            guard let value = numericDate() else { return false }
            claims.notBefore = value
        } else if matches("iss") {
            guard let value = scanner.parseString() else { return false }
            claims.issuerMatches =
                self.prepared.issuer.map { issuer in
                    issuer.withUnsafeBufferPointer { scanner.equals(value, $0) }
                } ?? true
        } else if matches("aud") {
            guard let matched = self.readAudience(&scanner) else { return false }
            claims.audienceMatches = matched
        } else if matches("did") {
            // Bounded before it is read: only the 22 characters the gateway writes parse, so a forged or
            // oversized claim is malformed, and a token cannot name a device in a second spelling.
            guard let value = scanner.parseString(),
                let device = DeviceID(bytes: UnsafeRawBufferPointer(start: scanner.base + value.start, count: value.count))
            else { return false }
            claims.device = device
        } else if !self.prepared.scopeNames.isEmpty, Self.isScopeClaim(name, scanner: scanner) {
            return self.readScopes(into: &claims.selected, scanner: &scanner)
        } else {
            return scanner.skipValue(depth: 1)
        }
        return true
    }

    /// `aud`: a string or an array of strings (RFC 7519 §4.1.3). Returns whether it names one of the policy's
    /// audiences (true when the policy has none), or nil when malformed.
    private func readAudience(_ scanner: inout JSONScanner) -> Bool? {
        let audiences = self.prepared.audiences
        @inline(__always) func isOurs(_ span: ByteSpan) -> Bool {
            for audience in audiences where audience.withUnsafeBufferPointer({ scanner.equals(span, $0) }) {
                return true
            }
            return false
        }
        if scanner.peek() == UInt8(ascii: "\"") {
            guard let value = scanner.parseString() else { return nil }
            return audiences.isEmpty || isOurs(value)
        }
        guard scanner.consume(UInt8(ascii: "[")) else { return nil }
        var matched = audiences.isEmpty
        if scanner.consume(UInt8(ascii: "]")) { return matched }
        while true {
            guard let value = scanner.parseString() else { return nil }
            if !matched && isOurs(value) { matched = true }
            if scanner.consume(UInt8(ascii: "]")) { break }
            guard scanner.consume(UInt8(ascii: ",")) else { return nil }
        }
        return matched
    }
}

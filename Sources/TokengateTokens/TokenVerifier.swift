//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Verifies JWS compact JWTs against a key set, a policy and a cutoff snapshot. Pure: no I/O, no locks,
/// no allocation for HS* tokens whose user claim fits a small string (≤ 15 UTF-8 bytes).
///
/// ### Overview
/// Checks run in this order, and the first failure is the answer:
/// 1. size (≤ ``maxTokenLength``), exactly three parts, strict base64url in each → `malformed`;
/// 2. header: a JSON object without duplicate names, `alg` a string, `kid` a string if present, no `crit`
///    → `malformed`;
/// 3. `alg` is one of ``TokenAlgorithm`` (so never `none`) → `alg_not_allowed`;
/// 4. `kid` selects a key → `unknown_key`;
/// 5. the key and the policy allow `alg` → `alg_not_allowed` (this is what defeats key confusion: an HS256
///    token can never be checked with an RSA or EC key's bytes as an HMAC secret);
/// 6. the signature → `bad_signature`;
/// 7. payload: a JSON object without duplicate names; claim types (`iat`, `exp`, `nbf` integral NumericDates,
///    user claim a string, `api_only` a boolean, `iss` a string, `aud` a string or array of strings)
///    → `malformed`; user claim and `iat` present, `iss`/`aud` as the policy requires, the policy's
///    ``RequiredClaims`` present → `missing_claim`;
/// 8. `iat` > now + skew → `issued_in_future`; `nbf` > now + skew → `not_yet_valid`;
///    now ≥ expiry + skew → `expired`;
/// 9. `iat` < global or user `revoked_before` → `revoked`; an api token with `iat` < `api_revoked_before`
///    → `api_revoked`;
/// 10. the kind is accepted → `wrong_kind`;
/// 11. the policy's required scopes are granted (`scope` or `scp`, ``ClaimSelection``) → `insufficient_scope`.
///
/// A claim the policy forwards whose value no header can carry is `unforwardable_claim`, after the payload's
/// presence checks. Revocation is checked before the kind and the scopes so that a dead token always gets a 401
/// (start over), never a 403.
///
/// ### Implementation
/// The three parts are decoded into one stack buffer (`withUnsafeTemporaryAllocation`; Swift keeps it on the
/// stack up to 1 KiB of decoded bytes, which covers ordinary tokens). JSON is read by ``JSONScanner`` in place.
/// The HMAC runs in C with per-key precomputed pad states. The user's cutoffs are found by hashing a small
/// String built from the claim bytes.
public struct TokenVerifier: Sendable {
    /// Tokens longer than this are rejected unread.
    public static let maxTokenLength = 8192

    public var keys: KeySet { self.prepared.keys }
    public var policy: VerificationPolicy { self.prepared.policy }

    /// Everything precomputed, behind one reference so that copying a verifier (or capturing it in the
    /// hot path's closures) costs one retain.
    let prepared: Prepared

    public init(keys: KeySet, policy: VerificationPolicy = VerificationPolicy()) {
        self.prepared = Prepared(keys: keys, policy: policy)
    }

    init(prepared: Prepared) {
        self.prepared = prepared
    }

    // MARK: Entry points

    /// Verifies a token held in a String.
    public func verify(_ token: String, accept: AcceptedKinds, cutoffs: CutoffSnapshot, now: Int64)
        -> VerificationResult
    {
        guard token.utf8.count <= Self.maxTokenLength else { return .invalid(.malformed) }
        if let result = token.utf8.withContiguousStorageIfAvailable({
            self.verify(UnsafeRawBufferPointer($0), accept: accept, cutoffs: cutoffs, now: now)
        }) {
            return result
        }
        var copy = token
        return copy.withUTF8 { self.verify(UnsafeRawBufferPointer($0), accept: accept, cutoffs: cutoffs, now: now) }
    }

    /// Verifies a token held in a Substring (e.g. a slice of a header value).
    public func verify(_ token: Substring, accept: AcceptedKinds, cutoffs: CutoffSnapshot, now: Int64)
        -> VerificationResult
    {
        guard token.utf8.count <= Self.maxTokenLength else { return .invalid(.malformed) }
        if let result = token.utf8.withContiguousStorageIfAvailable({
            self.verify(UnsafeRawBufferPointer($0), accept: accept, cutoffs: cutoffs, now: now)
        }) {
            return result
        }
        return self.verify(String(token), accept: accept, cutoffs: cutoffs, now: now)
    }

    /// Verifies a token given as raw bytes (the core; e.g. straight out of a NIO buffer).
    public func verify(_ token: UnsafeRawBufferPointer, accept: AcceptedKinds, cutoffs: CutoffSnapshot, now: Int64)
        -> VerificationResult
    {
        self.run(token) { scanner, payload, keyIndex, algorithm in
            self.checkClaims(
                scanner: &scanner,
                payload: payload,
                keyIndex: keyIndex,
                algorithm: algorithm,
                accept: accept,
                cutoffs: cutoffs,
                now: now
            )
        }
    }

    /// Checks only the JWS layer: encoding, header, key selection, algorithm binding and signature; the payload
    /// must be canonical base64url but need not be JSON. For test vectors whose payloads are not JWT claim
    /// sets (RFC 8037 A.4, Wycheproof). Nil means the signature is good.
    func checkSignature(_ token: String) -> RejectionReason? {
        var copy = token
        guard copy.utf8.count <= Self.maxTokenLength else { return .malformed }
        let result = copy.withUTF8 { bytes in
            self.run(UnsafeRawBufferPointer(bytes)) { _, _, _, _ in
                .valid(VerifiedToken(subject: "", kind: .api, issuedAt: 0, keyID: nil, expiresAt: nil))
            }
        }
        switch result {
        case .valid: return nil
        case .invalid(let reason): return reason
        }
    }

    // MARK: The JWS layer

    /// The JWS layer (size, segments, header, key and algorithm binding, signature), then hands the decoded
    /// payload, the key's index and the algorithm to `claims`.
    @inline(__always)
    func run(
        _ token: UnsafeRawBufferPointer,
        claims: (inout JSONScanner, ByteSpan, Int, TokenAlgorithm) -> VerificationResult
    ) -> VerificationResult {
        let length = token.count
        guard length > 0, length <= Self.maxTokenLength, let base = token.baseAddress else {
            return .invalid(.malformed)
        }
        // Find the two dots; a third one is malformed (JWE has five parts, JSON serialization none).
        var firstDot = -1
        var secondDot = -1
        var index = 0
        while index < length {
            if token[index] == UInt8(ascii: ".") {
                if firstDot < 0 {
                    firstDot = index
                } else if secondDot < 0 {
                    secondDot = index
                } else {
                    return .invalid(.malformed)
                }
            }
            index += 1
        }
        guard secondDot > 0 else { return .invalid(.malformed) }
        let headerText = UnsafeRawBufferPointer(start: base, count: firstDot)
        let payloadText = UnsafeRawBufferPointer(start: base + firstDot + 1, count: secondDot - firstDot - 1)
        let signatureText = UnsafeRawBufferPointer(start: base + secondDot + 1, count: length - secondDot - 1)
        guard let headerCapacity = Base64URL.decodedLength(headerText.count),
            let payloadCapacity = Base64URL.decodedLength(payloadText.count),
            let signatureCapacity = Base64URL.decodedLength(signatureText.count)
        else { return .invalid(.malformed) }

        let total = headerCapacity + payloadCapacity + signatureCapacity
        return withUnsafeTemporaryAllocation(byteCount: max(total, 1), alignment: 8) { scratch in
            let scratchBase = scratch.baseAddress!
            guard let headerLength = Base64URL.decode(headerText, into: scratchBase),
                let payloadLength = Base64URL.decode(payloadText, into: scratchBase + headerCapacity),
                let signatureLength = Base64URL.decode(
                    signatureText,
                    into: scratchBase + headerCapacity + payloadCapacity
                )
            else { return .invalid(.malformed) }
            let bytes = scratchBase.assumingMemoryBound(to: UInt8.self)

            // Header.
            var headerScanner = JSONScanner(base: bytes, count: headerLength)
            let header: JOSEHeader
            switch JOSEHeader.parse(&headerScanner) {
            case .some(let parsed): header = parsed
            case .none: return .invalid(.malformed)
            }
            guard let algorithm = TokenAlgorithm.match(headerScanner.bytes(header.algorithm)) else {
                return .invalid(.algNotAllowed)
            }
            let kid = header.keyID.map { headerScanner.bytes($0) }
            guard let keyIndex = self.prepared.keys.keyIndex(for: kid) else { return .invalid(.unknownKey) }
            let key = self.prepared.keys.keys[keyIndex]
            guard key.algorithmMask & algorithm.bit != 0, self.prepared.algorithmMask & algorithm.bit != 0,
                let check = key.checks[algorithm.index]
            else { return .invalid(.algNotAllowed) }

            // Signature over the ASCII bytes of "header.payload" exactly as received.
            let signingInput = UnsafeRawBufferPointer(start: base, count: secondDot)
            let signature = UnsafeRawBufferPointer(
                start: scratchBase + headerCapacity + payloadCapacity,
                count: signatureLength
            )
            guard check.verify(data: signingInput, signature: signature) else { return .invalid(.badSignature) }

            var payloadScanner = JSONScanner(base: bytes + headerCapacity, count: payloadLength)
            return claims(&payloadScanner, ByteSpan(start: 0, count: payloadLength), keyIndex, algorithm)
        }
    }
}

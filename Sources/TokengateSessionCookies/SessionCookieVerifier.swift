//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import TokengateTokens

/// Verifies a web framework's own login cookie as a token: the format's authenticity check with the site's
/// secret, then the configured fields, then every check a JWT gets (login time not in the future, the format's
/// own expiry, the session max-age from the login time, the cutoffs, the kind).
///
/// ### Overview
/// Keys are derived once, in `init` (Rails' PBKDF2 included): a request never pays for a derivation. Every cookie
/// is read within fixed bounds whatever it holds: at most ``SessionCookieLimits/maxCookieLength`` bytes, one
/// scratch allocation proportional to it, an inflate capped at ``SessionCookieLimits/maxInflatedLength``, JSON
/// nesting capped at 32, and a specific ``SessionCookieRejection`` for each kind of fault. The MAC or AEAD tag is
/// checked before anything the cookie says is parsed (Rails' encrypted cookies must be base64-decoded first, and
/// nothing else), and MACs are compared in constant time.
///
/// ### Checks, in order (the first failure is the answer)
/// 1. length, shape and encoding → `oversize`, `truncated`, `bad_encoding`, `missing_signature_cookie`;
/// 2. signature or AEAD tag with each configured secret → `bad_signature`;
/// 3. content: inflate, serialization (Marshal is refused unread), JSON, Rails' envelope and purpose → …;
/// 4. fields: user id (a string or integer meeting ``UserIDRules``), login time (a number), api flag (a boolean);
/// 5. login time or signing time more than the skew ahead → `login_in_future`, `signed_in_future`;
/// 6. the format's own expiry, then the session max-age for `session` logins → `format_expired`,
///    `session_expired`;
/// 7. cutoffs on the login time → `revoked`, `api_revoked`; 8. the kind → `wrong_kind`.
public struct SessionCookieVerifier: Sendable {
    public let format: SessionCookieFormat
    public let fields: SessionCookieFields
    public let policy: SessionCookiePolicy
    let codec: SessionCookieCodec

    /// Derives the keys. `secrets[0]` is the site's current secret; the others are older ones still accepted
    /// (Rails' rotations, Flask's and Django's `SECRET_KEY_FALLBACKS`, keygrip's key list).
    public init(
        format: SessionCookieFormat, secrets: [SessionCookieSecret], fields: SessionCookieFields,
        policy: SessionCookiePolicy = SessionCookiePolicy()
    ) throws(SessionCookieKeyError) {
        guard policy.sessionMaxAge > 0, policy.clockSkew >= 0 else {
            throw SessionCookieKeyError("invalid_option", "the session max-age must be positive and the skew not negative")
        }
        self.format = format
        self.fields = fields
        self.policy = policy
        self.codec = try SessionCookieCodec(format: format, secrets: secrets, fields: fields)
    }

    /// Verifies a cookie's value (as it appears in the `Cookie` header) and, for cookie-session, its signature
    /// cookie's value.
    public func verify(
        _ value: UnsafeRawBufferPointer, signature: UnsafeRawBufferPointer? = nil, accept: AcceptedKinds,
        cutoffs: CutoffSnapshot, now: Int64
    ) -> SessionCookieResult {
        guard value.count <= SessionCookieLimits.maxCookieLength else { return .invalid(.oversize) }
        switch self.codec.read(value, signature: signature) {
        case .rejected(let rejection):
            return .invalid(rejection)
        case .claims(let claims):
            return self.check(claims, accept: accept, cutoffs: cutoffs, now: now)
        }
    }

    /// The same, for values held in Strings.
    public func verify(
        _ value: String, signature: String? = nil, accept: AcceptedKinds, cutoffs: CutoffSnapshot, now: Int64
    ) -> SessionCookieResult {
        guard value.utf8.count <= SessionCookieLimits.maxCookieLength else { return .invalid(.oversize) }
        var value = value
        return value.withUTF8 { valueBytes in
            guard var signature else {
                return self.verify(UnsafeRawBufferPointer(valueBytes), accept: accept, cutoffs: cutoffs, now: now)
            }
            return signature.withUTF8 {
                self.verify(
                    UnsafeRawBufferPointer(valueBytes), signature: UnsafeRawBufferPointer($0), accept: accept,
                    cutoffs: cutoffs, now: now)
            }
        }
    }

    /// The claim, time, cutoff and kind checks a JWT gets, on the login time in place of `iat`.
    private func check(_ claims: SessionClaims, accept: AcceptedKinds, cutoffs: CutoffSnapshot, now: Int64)
        -> SessionCookieResult
    {
        let skew = self.policy.clockSkew
        // `now` may be anything; every other time is at most year 9999, and skew and max-ages are bounded.
        let (latest, lateOverflow) = now.addingReportingOverflow(skew)
        let (earliest, earlyOverflow) = now.subtractingReportingOverflow(skew)
        if !lateOverflow, claims.loginTime > latest { return .invalid(.loginInFuture) }
        if !lateOverflow, let signedAt = claims.signedAt, signedAt > latest { return .invalid(.signedInFuture) }
        let kind: TokenKind = claims.apiOnly ? .api : .session
        if let formatEnd = claims.formatExpiresAt, earlyOverflow || earliest >= formatEnd {
            return .invalid(.formatExpired)
        }
        var expiresAt = claims.formatExpiresAt
        if kind == .session {
            let sessionEnd = claims.loginTime + self.policy.sessionMaxAge
            if earlyOverflow || earliest >= sessionEnd { return .invalid(.sessionExpired) }
            expiresAt = min(expiresAt ?? sessionEnd, sessionEnd)
        }
        if let revocation = cutoffs.revocation(subject: claims.userID, issuedAt: claims.loginTime, kind: kind) {
            return .invalid(revocation == .apiRevoked ? .apiRevoked : .revoked)
        }
        guard accept.accepts(kind) else { return .invalid(.wrongKind) }
        return .valid(
            VerifiedToken(subject: claims.userID, kind: kind, issuedAt: claims.loginTime, keyID: nil, expiresAt: expiresAt))
    }
}

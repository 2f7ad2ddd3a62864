//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

// MARK: PKCE code redemption: `POST` to the token page (RFC 7636 §4.5).

extension TokenPageResponder {
    /// The refusal of a redemption before its body is read: anything but a form body, or one announced larger
    /// than ``TokenPageRedemptionRequest/maximumBody``. Nil when the body should be read.
    static func redemptionHeadProblem(contentType: String?, contentLength: Int?) -> TokenPageAnswer? {
        guard contentType == "application/x-www-form-urlencoded" else {
            return Self.redemptionError(
                .badRequest,
                "invalid_request",
                "the body must be application/x-www-form-urlencoded",
                reason: "token_page_redeem_bad_request"
            )
        }
        if let contentLength, contentLength > TokenPageRedemptionRequest.maximumBody {
            return Self.redemptionTooLarge
        }
        return nil
    }

    /// A redemption body over ``TokenPageRedemptionRequest/maximumBody``, announced or found while reading it
    /// (chunked): the same answer, with the page's headers, either way.
    static let redemptionTooLarge = Self.redemptionError(
        .payloadTooLarge,
        "invalid_request",
        "the body is larger than \(TokenPageRedemptionRequest.maximumBody) bytes",
        reason: "token_page_redeem_too_large"
    )

    /// Redeems a code: `200 {"access_token":…,"token_type":"bearer"[,"expires_in":…]}`, or `400` with an RFC 6749
    /// §5.2 error (`503` when the memory of redeemed codes is full, ``redemptionBusy``).
    ///
    /// Needs no cookie and no login: the code is the proof that the user logged in, and only the app holding
    /// the verifier can use it. The code's issue time is checked against the user's cutoffs as a token minted by
    /// the page at that moment would be, and it is the minted token's `iat` (its `exp` counts from now): a
    /// password change or "disable mobile apps" after the code was issued kills the code, and the token too once
    /// the gateway has the cutoff, if the redemption came first.
    ///
    /// A code is redeemed once per gateway process (``RedeemedCodeMemory``): a second redemption is refused
    /// (`invalid_grant`, reason `token_page_redeem_reused`), after a reload too.
    ///
    /// Neither the code, the verifier nor the token goes into the answer's reason code or a log.
    func redeem(body: [UInt8], cutoffs: CutoffSnapshot, now: Int64) -> TokenPageAnswer {
        let request: TokenPageRedemptionRequest
        switch TokenPageRedemptionRequest.parse(body) {
        case .success(let parsed):
            request = parsed
        case .failure(.invalidRequest(let description)):
            return Self.redemptionError(
                .badRequest,
                "invalid_request",
                description,
                reason: "token_page_redeem_bad_request"
            )
        case .failure(.unsupportedGrantType):
            return Self.redemptionError(
                .badRequest,
                "unsupported_grant_type",
                "grant_type must be authorization_code or refresh_token",
                reason: "token_page_redeem_bad_request"
            )
        }
        guard let app = self.configuration.apps.first(where: { $0.name == request.app }) else {
            // An app removed from the configuration since the code was issued gets no more tokens.
            return Self.redemptionError(
                .badRequest,
                "invalid_client",
                "unknown app",
                reason: "token_page_redeem_unknown_app"
            )
        }
        let redeemable: TokenPageCodeKey.Redeemable
        switch self.codeKey.redeem(
            request.code, app: request.app, page: self.page, verifier: request.verifier, now: now,
            clockSkew: self.policy.clockSkew)
        {
        case .success(let redeemed):
            redeemable = redeemed
        case .failure(let refusal):
            return Self.redemptionError(
                .badRequest,
                "invalid_grant",
                Self.description(of: refusal),
                reason: "token_page_redeem_" + refusal.rawValue
            )
        }
        let code = redeemable.code
        if cutoffs.revocation(subject: code.subject, issuedAt: code.issuedAt, kind: .api) != nil {
            return Self.redemptionError(
                .badRequest,
                "invalid_grant",
                "the user's tokens were revoked after the code was issued",
                reason: "token_page_redeem_revoked"
            )
        }
        // Last, once the code passed every check: an app that intercepted the callback, without the verifier,
        // cannot use the code up before the real app redeems it. Remembered before the token is minted, so two
        // redemptions at once get one token between them (and a failed mint uses the code up: fail closed).
        // Kept for the clock skew past `exp`: a wall clock stepped back after the memory dropped the code would
        // otherwise find it unexpired and unknown, and redeem it again.
        switch self.redeemedCodes.admit(
            redeemable.nonce, keepUntil: code.expiresAt + self.policy.clockSkew, now: now)
        {
        case .first:
            break
        case .reused:
            return Self.redemptionError(
                .badRequest,
                "invalid_grant",
                "the code was already redeemed",
                reason: "token_page_redeem_reused"
            )
        case .full:
            return Self.redemptionBusy
        }
        // Its `iat` is the code's issue time, so a cutoff after the code was issued kills the token even when this
        // snapshot does not have the cutoff yet (the gateway learns of it within a poll).
        if let refresh = self.refreshSettings(app) {
            return self.redeemWithRefresh(code, settings: refresh, now: now)
        }
        guard let minted = self.mint(
                for: code.subject, app: code.app, now: now, issuedAt: code.issuedAt, siteValues: code.siteValues) else {
            return Self.mintFailed
        }
        var json = "{\"access_token\":" + JSONString.quote(minted.token)
        for (name, value) in minted.deliveryParameters(encode: JSONString.quote) { json += ",\"\(name)\":\(value)" }
        if let lifetime = self.tokenLifetime { json += ",\"expires_in\":\(lifetime)" }
        json += "}"
        var answer = TokenPageAnswer.json(.ok, json, reasonCode: "token_page_code_redeemed", user: code.subject)
        answer.device = minted.device
        return answer
    }

    /// The memory of redeemed codes is full of codes that have not expired (``RedeemedCodes``): the redemption is
    /// refused rather than let through unremembered. The code is not used up; within its 60 seconds a retry may
    /// pass.
    static let redemptionBusy = Self.redemptionError(
        .serviceUnavailable,
        "temporarily_unavailable",
        "too many codes were redeemed in the last minute; try again shortly",
        reason: "token_page_redeem_busy"
    )

    /// Which check failed, in words that hold nothing of the code or the verifier.
    static func description(of refusal: TokenPageCodeKey.Refusal) -> String {
        switch refusal {
        case .malformed: "the code is malformed"
        case .badSignature: "the code was not issued by this site"
        case .expired: "the code has expired"
        case .issuedInFuture: "the code was issued later than now"
        case .wrongApp: "the code was issued to another app"
        case .wrongPage: "the code was issued by another token page"
        case .wrongVerifier: "the code_verifier does not match the code_challenge"
        }
    }

    static func redemptionError(
        _ status: HTTPResponseStatus,
        _ error: String,
        _ description: String,
        reason: String
    ) -> TokenPageAnswer {
        .error(status, error: error, description: description, reasonCode: reason)
    }
}

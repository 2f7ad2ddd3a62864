//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengateHTTP
import TokengateTokens

// MARK: Refresh tokens (RFC 6749 §6), for the apps with `refresh_tokens`.

/// What a `grant_type=refresh_token` body comes to before the store is asked: a refusal, or the rotation to run.
enum TokenPageRefreshStep: Sendable, Equatable {
    case answer(TokenPageAnswer)
    case rotate(RefreshRotation)
}

extension TokenPageResponder {
    /// The app's refresh settings, when the page can give it refresh tokens: the app opted in and the store keeps
    /// devices (a refresh token is a device's). Otherwise the app gets what it always got.
    func refreshSettings(_ app: TokenPageApp) -> TokenPageRefreshTokens? {
        guard self.mintsDevices, self.refreshes, let settings = app.refreshTokens else { return nil }
        return settings
    }

    /// The code redemption of an app with refresh tokens: `200 {"access_token":…,"token_type":"bearer",
    /// "expires_in":<access lifetime>,"refresh_token":…}` (RFC 6749 §5.1), for a new device whose record, with
    /// refresh generation 0, the gateway stores before the answer goes out.
    func redeemWithRefresh(_ code: TokenPageCode, settings: TokenPageRefreshTokens, now: Int64) -> TokenPageAnswer {
        let accessLifetime = settings.accessTokenLifetime.components.seconds
        guard let id = DeviceID.random() else { return Self.mintFailed }
        let device = DeviceRecord(
            device: id, user: code.subject, app: code.app, createdAt: now, tokensExpireBy: now + accessLifetime,
            refreshGeneration: 0, refreshExpiresAt: now + settings.refreshTokenLifetime.components.seconds)
        guard let access = self.mintAccess(user: code.subject, device: id, issuedAt: code.issuedAt, expiresAt: now + accessLifetime)
        else { return Self.mintFailed }
        var answer = Self.tokenResponse(
            access: access, lifetime: accessLifetime, refresh: self.refreshKey.issue(device: id, generation: 0),
            reason: "token_page_code_redeemed", user: code.subject)
        answer.device = device
        return answer
    }

    /// The first step of a refresh: the request read, the app and the token checked without the store.
    func refreshStep(body: [UInt8], now: Int64) -> TokenPageRefreshStep {
        let request: TokenPageRefreshRequest
        switch TokenPageRefreshRequest.parse(body) {
        case .success(let parsed):
            request = parsed
        case .failure(.invalidRequest(let description)):
            return .answer(Self.redemptionError(.badRequest, "invalid_request", description, reason: "token_page_refresh_bad_request"))
        case .failure(.unsupportedGrantType):
            return .answer(
                Self.redemptionError(
                    .badRequest, "unsupported_grant_type", "grant_type must be refresh_token",
                    reason: "token_page_refresh_bad_request"))
        }
        guard let app = self.configuration.apps.first(where: { $0.name == request.app }),
            let settings = self.refreshSettings(app)
        else {
            return .answer(
                Self.redemptionError(
                    .badRequest, "invalid_client", "unknown app, or an app without refresh tokens",
                    reason: "token_page_refresh_unknown_app"))
        }
        // Bounded before it is decoded; a value this page did not make is refused without asking the store.
        guard request.refreshToken.utf8.count <= RefreshTokenKey.textLength,
            let (device, generation) = self.refreshKey.open(request.refreshToken)
        else {
            return .answer(Self.refreshRefused("the refresh token is not valid", reason: "token_page_refresh_invalid"))
        }
        return .rotate(
            RefreshRotation(
                device: device, generation: generation, app: app.name, now: now,
                refreshExpiresAt: now + settings.refreshTokenLifetime.components.seconds,
                accessExpiresAt: now + settings.accessTokenLifetime.components.seconds))
    }

    /// The second step, with what the store did: a new access token and the next refresh token, or `invalid_grant`.
    ///
    /// The access token's `iat` is the device's creation (the login), not now: a password change or "disable mobile
    /// apps" after the login kills it as soon as the gateway has the cutoff, even when this refresh was checked
    /// against a snapshot that did not have it yet. Its `exp` is now plus the app's access token lifetime.
    func refreshed(_ outcome: RefreshOutcome, rotation: RefreshRotation, cutoffs: CutoffSnapshot, now: Int64) -> TokenPageAnswer {
        switch outcome {
        case .reused:
            return Self.refreshRefused(
                "the refresh token was used before; this device is signed out", reason: "token_page_refresh_reused")
        case .refused(let refusal):
            return Self.refreshRefused("the refresh token is not valid (\(refusal.rawValue))", reason: "token_page_refresh_refused")
        case .rotated(let record):
            guard let generation = record.refreshGeneration else {
                return Self.refreshRefused("the refresh token is not valid", reason: "token_page_refresh_refused")
            }
            if cutoffs.revocation(subject: record.user, issuedAt: record.createdAt, kind: .api, device: record.device) != nil {
                return Self.refreshRefused(
                    "the user's tokens were revoked after this login", reason: "token_page_refresh_revoked")
            }
            guard let access = self.mintAccess(
                user: record.user, device: record.device, issuedAt: record.createdAt, expiresAt: rotation.accessExpiresAt)
            else { return Self.mintFailed }
            return Self.tokenResponse(
                access: access, lifetime: rotation.accessExpiresAt - now,
                refresh: self.refreshKey.issue(device: record.device, generation: generation),
                reason: "token_page_refreshed", user: record.user)
        }
    }

    private func mintAccess(user: String, device: DeviceID, issuedAt: Int64, expiresAt: Int64) -> String? {
        let claims = TokenClaims(
            subject: user, issuedAt: issuedAt, apiOnly: true, expiresAt: expiresAt, issuer: self.policy.issuer,
            audience: self.policy.audiences.first, device: device)
        return try? self.signer.mint(claims)
    }

    /// RFC 6749 §5.1. Never logged: only the reason code and the user are (``TokenPageAnswer``).
    static func tokenResponse(access: String, lifetime: Int64, refresh: String, reason: String, user: String) -> TokenPageAnswer {
        var json = "{\"access_token\":" + JSONString.quote(access) + ",\"token_type\":\"bearer\""
        json += ",\"expires_in\":\(lifetime),\"refresh_token\":" + JSONString.quote(refresh) + "}"
        return .json(.ok, json, reasonCode: reason, user: user)
    }

    static func refreshRefused(_ description: String, reason: String) -> TokenPageAnswer {
        Self.redemptionError(.badRequest, "invalid_grant", description, reason: reason)
    }

    /// The store could not be asked: `503`, and the refresh token stays as it was (nothing rotated).
    static let refreshUnavailable = Self.redemptionError(
        .serviceUnavailable, "temporarily_unavailable", "cannot refresh right now; try again shortly",
        reason: "token_page_refresh_unavailable")
}

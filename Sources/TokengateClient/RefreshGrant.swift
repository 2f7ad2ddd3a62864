//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengatePercentEncoding

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The token endpoint's answers as an app with refresh tokens reads them (RFC 6749 §5.1, §5.2, §6).
public enum RefreshGrant {
    /// `POST` to the token page: `grant_type=refresh_token`, `refresh_token`, `app`; never cached, no cookies.
    public static func request(site: URL, path: String = "/token", app: String, refreshToken: RefreshToken) throws -> URLRequest {
        let page = try TokenPageURL(site: site, path: path)
        try TokenPageURL.checkApp(app)
        var request = URLRequest(url: page.url, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData)
        request.httpMethod = "POST"
        request.httpShouldHandleCookies = false
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken.value), ("app", app)]
        request.httpBody = Data(fields.map { $0.0 + "=" + PercentEncoding.encode($0.1) }.joined(separator: "&").utf8)
        return request
    }

    /// The grant in a `200` answer to a redemption or a refresh: the access token, and the refresh token when the
    /// answer has one.
    /// - Throws: ``TokengateClientError``: `loginRequired` for `400`/`401` `invalid_grant` or `invalid_client`
    ///   (the refresh token is dead: log in again); `redemptionRefused` for another `4xx` error; `malformedResponse`
    ///   for anything else (a `5xx` included: try again later, the refresh token is unchanged).
    public static func grant(status: Int, body: Data, now: Date = Date()) throws -> TokenGrant {
        let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        if status != 200, (400...401).contains(status), let error = object?["error"] as? String,
            error == "invalid_grant" || error == "invalid_client"
        {
            throw TokengateClientError(
                .loginRequired, "the site refused the refresh token (\(TokenCapture.printable(error)))",
                serverMessage: (object?["error_description"] as? String).map(TokenCapture.printable))
        }
        let access = try CodeRedemption.token(status: status, body: body, now: now)
        var refresh: RefreshToken?
        if let value = object?["refresh_token"] {
            guard let text = value as? String, RefreshToken.isValid(text) else {
                throw TokengateClientError(.malformedResponse, "the answer's refresh_token is not a refresh token")
            }
            refresh = RefreshToken(value: text)
        }
        return TokenGrant(access: access, refresh: refresh)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengatePercentEncoding

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Redeems a PKCE code from the callback for the token (RFC 7636 §4.5): `POST` to the token page with the
/// code and the verifier, from the app's own code (no web view, no cookies).
///
/// ```swift
/// let pkce = PKCEVerifier.random()
/// let page = try TokenPageURL(site: site, app: "android", state: state, pkce: pkce)
/// // … the web view reaches the callback …
/// if let code = try TokenCapture.codeFromCallback(url, callback: callback, expectedState: state) {
///     let (data, response) = try await URLSession.shared.data(
///         for: CodeRedemption.request(site: site, app: "android", code: code, verifier: pkce))
///     let token = try CodeRedemption.token(status: (response as! HTTPURLResponse).statusCode, body: data)
/// }
/// ```
public enum CodeRedemption {
    /// The `POST` request: `application/x-www-form-urlencoded` with `grant_type=authorization_code`, `code`,
    /// `code_verifier` and `app`; never cached, no cookies.
    ///
    /// - Parameters: `site` and `path` as for ``TokenPageURL``; `app` the registered app the page was opened
    ///   for.
    /// - Throws: ``TokengateClientError`` `insecureURL` or `invalidURL`, as ``TokenPageURL`` does.
    public static func request(
        site: URL,
        path: String = "/token",
        app: String,
        code: AuthorizationCode,
        verifier: PKCEVerifier
    ) throws -> URLRequest {
        // The app name is held to the page URL's rules; the URL itself has no query.
        let page = try TokenPageURL(site: site, path: path)
        try TokenPageURL.checkApp(app)
        var request = URLRequest(url: page.url, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData)
        request.httpMethod = "POST"
        request.httpShouldHandleCookies = false
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let fields = [
            ("grant_type", "authorization_code"), ("code", code.value), ("code_verifier", verifier.verifier),
            ("app", app),
        ]
        request.httpBody = Data(fields.map { $0.0 + "=" + PercentEncoding.encode($0.1) }.joined(separator: "&").utf8)
        return request
    }

    /// The token from the page's answer: `200 {"access_token":…,"token_type":"bearer"[,"expires_in":…]}`.
    ///
    /// - Parameters: `now`: the time the answer arrived, for `expires_in`.
    /// - Throws: ``TokengateClientError``:
    ///   - `redemptionRefused` for a `4xx` JSON error (`invalid_grant`: expired, wrong verifier, revoked …),
    ///     with the site's description in `serverMessage`; start over at the token page;
    ///   - `malformedResponse` for any other status, or a `200` that is not that JSON with a bearer token.
    public static func token(status: Int, body: Data, now: Date = Date()) throws -> StoredToken {
        let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        guard status == 200 else {
            if (400...499).contains(status), let object, let error = object["error"] as? String {
                let message = (object["error_description"] as? String) ?? error
                throw TokengateClientError(
                    .redemptionRefused,
                    "the site did not redeem the code (\(TokenCapture.printable(error)))",
                    serverMessage: TokenCapture.printable(message)
                )
            }
            throw TokengateClientError(.malformedResponse, "the site answered the redemption with HTTP \(status)")
        }
        guard let object, let token = object["access_token"] as? String else {
            throw TokengateClientError(.malformedResponse, "the redemption's answer holds no token")
        }
        var cookie: StoredToken.CookieDelivery?
        if (object["token_type"] as? String)?.lowercased() == "cookie" {
            // The site's own login cookie (a page minting in the site's format): sent as `Cookie:`, not Bearer.
            var parameters: [String: String] = [:]
            for key in ["cookie_name", "cookie_signature_name", "cookie_signature"] {
                guard let value = object[key] else { continue }
                guard let text = value as? String else {
                    throw TokengateClientError(.malformedResponse, "the redemption's \(key) is not a string")
                }
                parameters[key] = text
            }
            cookie = try TokenCapture.cookieDelivery(token: token, parameters: parameters, malformed: .malformedResponse)
        } else {
            guard BearerTokenSyntax.isValid(token) else {
                throw TokengateClientError(.malformedResponse, "the redemption's answer holds no bearer token")
            }
            guard (object["token_type"] as? String)?.lowercased() == "bearer" else {
                throw TokengateClientError(.malformedResponse, "the redemption's token_type is not bearer")
            }
        }
        var expiry: Date?
        if let expiresIn = object["expires_in"] {
            expiry = try ExpiresIn.expiry(after: ExpiresIn.seconds(inJSON: expiresIn), from: now, malformed: .malformedResponse)
        }
        return .captured(token, deliveredExpiry: expiry, cookie: cookie)
    }
}

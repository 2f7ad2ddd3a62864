//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// Finds the token the token page handed over, in each of the ways it hands it over (a web view's
/// cookie and page title, or an OAuth-style callback): the cookie, the page title, or the app's callback URL.
///
/// Every path is strict: a candidate must be token-shaped (RFC 6750 `b64token`, at most 8192 bytes), and
/// anything ambiguous or broken is refused rather than guessed at. The expiry kept is the earliest of what the
/// delivery says and the token's own `exp`.
public enum TokenCapture {
    /// The cookie tokengate sets by default (`cookie_name` in its configuration).
    public static let defaultCookieName = "auth_token"
    /// The page title is this prefix and the token (tokengate's token page writes exactly this).
    public static let titlePrefix = "tokengate-token:"

    /// From a page title (`WKWebView.title`, Android's `WebView.getTitle()`): `tokengate-token:<token>`.
    /// Surrounding whitespace is ignored; anything else around the token is not.
    public static func fromTitle(_ title: String?) -> StoredToken? {
        guard let title else { return nil }
        let trimmed = title.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix(Self.titlePrefix) else { return nil }
        let candidate = trimmed.dropFirst(Self.titlePrefix.count)
        guard BearerTokenSyntax.isValid(candidate) else { return nil }
        return .captured(String(candidate), deliveredExpiry: nil)
    }
}

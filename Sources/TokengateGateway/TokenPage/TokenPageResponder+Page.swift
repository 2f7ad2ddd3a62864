//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengateHTTP

// MARK: The page that shows the token: in a cookie, in its title and in its body.

extension TokenPageResponder {
    /// The `200` page: the token in a `Set-Cookie`, in the `<title>` and in the body.
    ///
    /// The page has no script, no style, no form, no link and no image, so the CSP can be
    /// `default-src 'none'` and nothing on it can send the token anywhere; the app is expected to close the
    /// web view as soon as it has the token, and a person can still copy it by hand.
    func page(token: String, user: String, lifetime: Int64?) -> TokenPageAnswer {
        let escaped = HTMLEscaping.escape(token)
        let content = """
            <h1>Your app token</h1>
            <p>Your app should have closed this page by itself. If it did not, copy this token into the app:</p>
            <pre id="token">\(escaped)</pre>
            <p>Anyone who has this token can use your account from an app. Do not share it.</p>

            """
        let html = TokenPageHTML.document(title: Self.titlePrefix + escaped, referrer: "no-referrer", body: content)
        let body = Array(html.utf8)
        var headers = TokenPageAnswer.securityHeaders()
        headers.add(name: "content-type", value: "text/html; charset=utf-8")
        headers.add(name: "content-length", value: String(body.count))
        headers.add(name: "set-cookie", value: self.cookie(token: token, lifetime: lifetime))
        return TokenPageAnswer(
            status: .ok,
            headers: headers,
            body: body,
            reasonCode: "token_page_issued",
            user: user
        )
    }

    /// The answer to a logged-in `HEAD`: the page's status and fields, no token (nothing is minted), so no
    /// `Set-Cookie`, and no `Content-Length`, which the token's length decides (RFC 9110 §9.3.2 lets a `HEAD`
    /// leave out fields only the content would determine).
    func pageFieldsWithoutToken() -> TokenPageAnswer {
        var headers = TokenPageAnswer.securityHeaders()
        headers.add(name: "content-type", value: "text/html; charset=utf-8")
        return TokenPageAnswer(status: .ok, headers: headers, body: [], reasonCode: "token_page_head")
    }

    /// `<name>=<token>; HttpOnly; Secure; SameSite=Strict; Path=<path>[; Max-Age=<lifetime>]`.
    ///
    /// HttpOnly keeps the token from page scripts (an XSS elsewhere on the site cannot read it), Secure keeps it
    /// off plain HTTP, SameSite=Strict keeps other sites from making the browser send it. A JWT is base64url
    /// and dots only, so it needs no quoting in a cookie value.
    func cookie(token: String, lifetime: Int64?) -> String {
        var cookie = self.configuration.cookieName + "=" + token + "; HttpOnly; Secure; SameSite=Strict; Path="
        cookie += self.configuration.cookiePath
        if let lifetime { cookie += "; Max-Age=\(lifetime)" }
        return cookie
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateSessionCookies
import TokengateTokens

/// A token page's `mint: ISSUER`: the writer of the site's login cookie and the names the app must send it under.
///
/// A site-format token is a cookie, not a bearer token: the site's own code reads it from its cookie (Rails'
/// value is percent-encoded, Django's holds `:`, neither of which RFC 6750's b64token allows), so the page's
/// answer says `token_type=cookie` with the cookie's name, and for Express `cookie-session` the `NAME.sig`
/// cookie that must go with the value.
struct SiteMint: Sendable {
    let minter: SessionCookieMinter
    /// The issuer's `cookie_name`: where the site reads its login.
    let cookieName: String
    /// `NAME.sig` for `cookie_session`; nil for the formats whose cookie is one value.
    let signatureCookieName: String?
}

/// A token the page minted: a JWT (bearer), or the site's cookie with its delivery.
struct MintedToken: Sendable {
    var token: String
    var device: DeviceRecord?
    /// Set for a site-format token: the cookie names, and the signature cookie's value when the format has one.
    var cookie: (name: String, signatureName: String?, signature: String?)?

    /// The callback fragment's or the redemption answer's words for how the token is sent, after `access_token`.
    /// `encode` percent-encodes a value for a fragment, or quotes it for JSON.
    func deliveryParameters(encode: (String) -> String) -> [(String, String)] {
        guard let cookie = self.cookie else { return [("token_type", encode("bearer"))] }
        var parameters = [("token_type", encode("cookie")), ("cookie_name", encode(cookie.name))]
        if let name = cookie.signatureName, let signature = cookie.signature {
            parameters += [("cookie_signature_name", encode(name)), ("cookie_signature", encode(signature))]
        }
        return parameters
    }
}

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
    /// Whether the answer says `token_type=cookie`. Not for Flask: its value is a bearer token's characters, and
    /// the page has handed it out as one (the site reads it from the header its route names) since before.
    var deliversAsCookie = true
    /// `mint_whoami`: where each value only the site knows goes, and the whoami header that carries it.
    var whoamiHeaders: [(pointer: SessionJSONPointer, header: String)] = []
    /// `mint_set`: members that are the same for every user.
    var constants: [(pointer: SessionJSONPointer, value: String)] = []

    /// The longest site value taken from a whoami header (a session auth hash is 64 hex digits, Devise's salt 29).
    static let maximumValueLength = 1024

    /// The `mint_whoami` values from a whoami answer, keyed by JSON pointer; the header at fault when one is
    /// missing, repeated, empty, too long or holds a control character (the page then refuses: a cookie without
    /// it would be a login the site's own check refuses, handed out as if it worked).
    func values(from headers: [String: [String]]) -> Result<[String: String], SiteValueProblem> {
        var values: [String: String] = [:]
        for (pointer, header) in self.whoamiHeaders {
            let found = headers[header] ?? []
            guard found.count == 1, let value = found.first, !value.isEmpty, value.utf8.count <= Self.maximumValueLength,
                value.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F })
            else { return .failure(SiteValueProblem(header: header, count: found.count)) }
            values[pointer.description] = value
        }
        return .success(values)
    }

    /// The members the minter adds: the constants and the site values at their pointers; nil when a value the
    /// page needs is not there (a code issued before the configuration asked for it).
    func extras(siteValues: [String: String]) -> [(SessionJSONPointer, SessionJSONValue)]? {
        var extras = self.constants.map { ($0.pointer, SessionJSONValue.string($0.value)) }
        for (pointer, _) in self.whoamiHeaders {
            guard let value = siteValues[pointer.description] else { return nil }
            extras.append((pointer, .string(value)))
        }
        return extras
    }
}

/// A `mint_whoami` header the whoami answer did not carry exactly once, usable.
struct SiteValueProblem: Error, Sendable {
    var header: String
    var count: Int
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

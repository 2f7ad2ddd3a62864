//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengatePercentEncoding

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where a request carries the token: the `Authorization` header (the default, RFC 6750 §2.1) or a field of
/// an `application/x-www-form-urlencoded` body (§2.2). Never the URL (§2.3: URLs end up in
/// logs, histories and `Referer` headers); there is no way to ask for that.
public struct TokenAttachment: Sendable, Hashable {
    enum Place: Sendable, Hashable {
        case authorization
        case formField(String)
    }

    let place: Place

    /// `Authorization: Bearer <token>`.
    public static let authorizationHeader = TokenAttachment(place: .authorization)

    /// A form field (tokengate's `sources: ["form:access_token"]`), for POST, PUT and PATCH requests.
    public static func formField(_ name: String = "access_token") -> TokenAttachment {
        TokenAttachment(place: .formField(name))
    }

    @available(*, unavailable, message: "tokens never go in URLs (RFC 6750 §2.3); use authorizationHeader or formField")
    public static func queryParameter(_ name: String) -> TokenAttachment {
        preconditionFailure("unavailable")
    }
}

extension URLRequest {
    /// Adds the token to this request.
    ///
    /// - Throws: ``TokengateClientError``:
    ///   - `tokenExpired` when the stored expiry has passed (start over at the token page);
    ///   - `insecureURL` unless the URL is `https` (or `http` to a loopback host, for development);
    ///   - `tokenInURL` when the URL already holds the token, raw or percent-encoded;
    ///   - `alreadyAttached` when the request already has an `Authorization` header or the form field;
    ///   - `cannotAttach` for a form field on a method without a body, a body that is not form-encoded, or a
    ///     body stream.
    public mutating func attach(
        _ token: StoredToken,
        as attachment: TokenAttachment = .authorizationHeader,
        now: Date = Date()
    ) throws {
        guard !token.isExpired(now: now) else {
            throw TokengateClientError(.tokenExpired, "the token has expired; open the token page again")
        }
        guard let url = self.url, let scheme = url.scheme?.lowercased(), let host = url.host else {
            throw TokengateClientError(.invalidURL, "the request has no URL")
        }
        guard scheme == "https" || (scheme == "http" && TokenPageURL.isLoopback(host)) else {
            throw TokengateClientError(.insecureURL, "tokens are only sent over https")
        }
        let urlText = url.absoluteString
        if urlText.contains(token.value) || urlText.contains(PercentEncoding.encode(token.value)) {
            throw TokengateClientError(.tokenInURL, "the request URL holds the token; tokens never go in URLs")
        }
        if let cookie = token.cookie {
            // The site's own login cookie: it goes where the site reads it, whatever `attachment` says.
            guard attachment.place == .authorization else {
                throw TokengateClientError(.cannotAttach, "a cookie token is sent as a cookie, not as a form field")
            }
            try self.attachCookie(token.value, cookie)
            return
        }
        switch attachment.place {
        case .authorization:
            guard self.value(forHTTPHeaderField: "Authorization") == nil else {
                throw TokengateClientError(.alreadyAttached, "the request already has an Authorization header")
            }
            self.setValue("Bearer " + token.value, forHTTPHeaderField: "Authorization")
        case .formField(let name):
            let method = (self.httpMethod ?? "GET").uppercased()
            guard ["POST", "PUT", "PATCH"].contains(method) else {
                throw TokengateClientError(.cannotAttach, "a form field needs a POST, PUT or PATCH request")
            }
            guard self.httpBodyStream == nil else {
                throw TokengateClientError(.cannotAttach, "cannot add a form field to a body stream")
            }
            let formType = "application/x-www-form-urlencoded"
            if let type = self.value(forHTTPHeaderField: "Content-Type") {
                let media = type.split(separator: ";", maxSplits: 1)[0].trimmingCharacters(in: .whitespaces)
                guard media.lowercased() == formType else {
                    throw TokengateClientError(.cannotAttach, "the body is not application/x-www-form-urlencoded")
                }
            } else {
                self.setValue(formType, forHTTPHeaderField: "Content-Type")
            }
            var body = self.httpBody ?? Data()
            let existing = PercentEncoding.utf8String(Array(body)).flatMap { URLEncoding.pairs($0[...]) }
            guard let existing else {
                throw TokengateClientError(.cannotAttach, "the body is not valid form encoding")
            }
            guard !existing.contains(where: { $0.name == name }) else {
                throw TokengateClientError(.alreadyAttached, "the body already has that field")
            }
            if !body.isEmpty { body.append(UInt8(ascii: "&")) }
            body.append(contentsOf: Array((PercentEncoding.encode(name) + "=" + PercentEncoding.encode(token.value)).utf8))
            self.httpBody = body
        }
    }

    /// `Cookie: NAME=VALUE[; SIGNATURE_NAME=SIGNATURE]`, after the request's own cookies if it has any, with the
    /// exact value (a cookie is never percent-encoded by the sender: the site reads the octets it set). Checked
    /// again here, for a ``StoredToken`` made by hand or decoded from storage: an attached `;` would add a cookie.
    private mutating func attachCookie(_ value: String, _ cookie: StoredToken.CookieDelivery) throws {
        var pairs = [(cookie.name, value)]
        if let name = cookie.signatureName, let signature = cookie.signature { pairs.append((name, signature)) }
        guard (cookie.signatureName == nil) == (cookie.signature == nil),
            pairs.allSatisfy({ CookieValueSyntax.isValidName($0.0) && CookieValueSyntax.isValidValue($0.1) })
        else {
            throw TokengateClientError(.cannotAttach, "the stored cookie is not a valid cookie name and value")
        }
        let existing = self.value(forHTTPHeaderField: "Cookie")
        let existingNames = (existing ?? "").split(separator: ";").map {
            $0.split(separator: "=", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        }
        guard !pairs.contains(where: { existingNames.contains($0.0) }) else {
            throw TokengateClientError(.alreadyAttached, "the request already has that cookie")
        }
        let added = pairs.map { $0.0 + "=" + $0.1 }.joined(separator: "; ")
        self.setValue(existing.map { $0 + "; " + added } ?? added, forHTTPHeaderField: "Cookie")
    }
}

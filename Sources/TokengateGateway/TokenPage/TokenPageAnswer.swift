//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateHTTP
import TokengateTokens

/// What the token page answers: a complete response for the gateway to write as it is.
///
/// Every answer carries the headers that keep a token out of caches, frames and referrers (`no-store`, a
/// strict CSP, `X-Frame-Options: DENY`, `Referrer-Policy: no-referrer`, `nosniff`), whether or not it holds
/// a token, so no branch can forget them. ``headers`` already holds `Content-Length` for ``body``.
///
/// The answer may hold a token (in `Set-Cookie`, `Location` or the body): the gateway must never log its
/// headers or body. ``reasonCode`` and ``user`` are what may be logged.
struct TokenPageAnswer: Sendable, Equatable {
    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    /// Empty for redirects and for the fields-only answer to a logged-in `HEAD` (for any answer to `HEAD`, the
    /// response writers send no body).
    var body: [UInt8]
    /// For logs and metrics, e.g. `token_page_issued`, `token_page_login_required`. Never holds a token.
    var reasonCode: String
    /// The user a token was minted for, when one was.
    var user: String?
    /// Why the RP's login check could not be used, for the operator's log (never sent, never a value from the
    /// RP's answer): the status it gave, or the rule its user header broke.
    var diagnostic: String?
    /// The device of the token in this answer, when the page mints with devices: the gateway stores the record
    /// (``TokenPageExchange/Action/recordDevice(_:)``) before it writes the answer, so that no token goes out of
    /// a device the store does not know (and could not list or revoke). A failed write answers
    /// ``deviceNotRecorded`` instead.
    var device: DeviceRecord?

    /// The answer when the device record could not be stored: no token leaves.
    static let deviceNotRecorded = TokenPageAnswer.error(
        .serviceUnavailable,
        error: "temporarily_unavailable",
        description: "cannot issue a token right now; try again shortly",
        reasonCode: "token_page_device_not_recorded"
    )

    func responseHead(version: HTTPVersion) -> HTTPResponseHead {
        HTTPResponseHead(version: version, status: self.status, headers: self.headers)
    }

    /// The security headers of every token page answer (DESIGN §8).
    static let contentSecurityPolicy = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

    static func securityHeaders() -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.reserveCapacity(10)
        headers.add(name: "cache-control", value: "no-store")
        headers.add(name: "pragma", value: "no-cache")
        headers.add(name: "content-security-policy", value: Self.contentSecurityPolicy)
        headers.add(name: "x-frame-options", value: "DENY")
        headers.add(name: "referrer-policy", value: "no-referrer")
        headers.add(name: "x-content-type-options", value: "nosniff")
        return headers
    }

    /// A redirect (`302` after `GET`/`HEAD`). `location` must already be safe for a header: the callers
    /// build it from configuration and percent-encoded values only.
    static func redirect(to location: String, reasonCode: String, user: String? = nil) -> Self {
        var headers = Self.securityHeaders()
        headers.add(name: "location", value: location)
        headers.add(name: "content-length", value: "0")
        return TokenPageAnswer(status: .found, headers: headers, body: [], reasonCode: reasonCode, user: user)
    }

    /// A JSON answer (the redemption's token). `json` must be a complete JSON text built from fixed parts and
    /// quoted values.
    static func json(_ status: HTTPResponseStatus, _ json: String, reasonCode: String, user: String? = nil) -> Self {
        var headers = Self.securityHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: String(json.utf8.count))
        return TokenPageAnswer(
            status: status,
            headers: headers,
            body: Array(json.utf8),
            reasonCode: reasonCode,
            user: user
        )
    }

    /// A small HTML page for a person in a browser (the confirmation page's refusals): a title and paragraphs,
    /// escaped here, with the strict headers and no form, script or link.
    static func page(_ status: HTTPResponseStatus, title: String, paragraphs: [String], reasonCode: String) -> Self {
        var body = "<h1>" + HTMLEscaping.escape(title) + "</h1>\n"
        for paragraph in paragraphs {
            body += "<p>" + HTMLEscaping.escape(paragraph) + "</p>\n"
        }
        let html = TokenPageHTML.document(title: HTMLEscaping.escape(title), referrer: nil, body: body)
        var headers = Self.securityHeaders()
        headers.add(name: "content-type", value: "text/html; charset=utf-8")
        headers.add(name: "content-length", value: String(html.utf8.count))
        return TokenPageAnswer(status: status, headers: headers, body: Array(html.utf8), reasonCode: reasonCode)
    }

    /// A JSON error in the gateway's usual shape: `{"error":"…","error_description":"…"}`. The description is
    /// always a fixed text chosen here, never text from the request.
    static func error(
        _ status: HTTPResponseStatus,
        error: String,
        description: String,
        reasonCode: String,
        extraHeaders: [(String, String)] = []
    ) -> Self {
        let json = "{\"error\":\(JSONString.quote(error)),\"error_description\":\(JSONString.quote(description))}"
        var headers = Self.securityHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: String(json.utf8.count))
        for (name, value) in extraHeaders {
            headers.add(name: name, value: value)
        }
        return TokenPageAnswer(status: status, headers: headers, body: Array(json.utf8), reasonCode: reasonCode)
    }
}

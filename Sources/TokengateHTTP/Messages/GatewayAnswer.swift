//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// An answer the gateway gives itself, without the backend: every refusal and every backend failure.
///
/// The words follow RFC 6750 §3 exactly (DESIGN §3): the `WWW-Authenticate` header and the JSON body
/// carry the same `error` and `error_description`, and neither ever carries internals — no key id, no
/// library message, no token, no stack trace. Descriptions are fixed strings chosen here or the
/// ``RejectionReason`` text, never text that came from the request.
package struct GatewayAnswer: Sendable, Hashable {
    package var status: HTTPResponseStatus
    /// The `error` member of the JSON body (and of the `WWW-Authenticate` challenge when there is one).
    package var error: String
    package var description: String
    /// The full `WWW-Authenticate` value, when the answer carries a challenge.
    package var challenge: String?
    /// The answer ends the connection: the request could not be framed safely, or its body was not read.
    package var closeConnection: Bool
    /// The reason code for logs and metrics (`malformed`, `revoked`, `no_route`, …).
    package var reasonCode: String
    /// Fields added to the head (`Retry-After`, a route's CORS fields).
    package var addedFields: [ResponseField] = []

    /// A `204` answer has no body at all (a CORS preflight's): no JSON and no `Content-Length` (RFC 9110 §8.6).
    package var hasBody: Bool { self.status != .noContent }

    package init(
        status: HTTPResponseStatus,
        error: String,
        description: String,
        challenge: String? = nil,
        closeConnection: Bool = false,
        reasonCode: String
    ) {
        self.status = status
        self.error = error
        self.description = description
        self.challenge = challenge
        self.closeConnection = closeConnection
        self.reasonCode = reasonCode
    }

    /// The JSON body: `{"error":"…","error_description":"…"}`.
    package var jsonBody: String {
        guard self.hasBody else { return "" }
        return "{\"error\":\(JSONString.quote(self.error)),\"error_description\":\(JSONString.quote(self.description))}"
    }

    /// The whole answer as HTTP/1.x bytes, for the handlers that answer plain HTTP on a bare connection and then
    /// close it: without `Strict-Transport-Security`, which a client ignores over plain HTTP (RFC 6797 §8.1).
    package func http1Response(version: HTTPVersion, requestMethod: HTTPMethod, allocator: ByteBufferAllocator) -> ByteBuffer {
        var serializer = HTTP1ResponseSerializer()
        var buffer = allocator.buffer(capacity: 512)
        let body = self.jsonBody
        serializer.writeHead(
            self.responseHead(version: version, contentLength: body.utf8.count, hsts: nil),
            requestMethod: requestMethod,
            into: &buffer
        )
        serializer.writeBody(ByteBuffer(string: body), into: &buffer)
        serializer.writeEnd(nil, into: &buffer)
        return buffer
    }

    /// The response head for this answer, with the security headers every gateway answer carries.
    /// - Parameter hsts: the configured `Strict-Transport-Security` (``GatewayRuntime/hsts``) for an answer over
    ///   TLS, whichever codec writes it; `nil` when turned off or over plain HTTP.
    package func responseHead(version: HTTPVersion, contentLength: Int, hsts: String?) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        headers.reserveCapacity(8 + self.addedFields.count)
        if self.hasBody {
            headers.add(name: "content-type", value: "application/json")
            headers.add(name: "content-length", value: String(contentLength))
        }
        headers.add(name: "cache-control", value: "no-store")
        headers.add(name: "x-content-type-options", value: "nosniff")
        if let challenge = self.challenge {
            headers.add(name: "www-authenticate", value: challenge)
        }
        if self.status == .upgradeRequired {
            // RFC 9110 §15.5.22: a 426 names the protocol to switch to, and `Upgrade` is listed in `Connection`
            // (§7.8). The client switches by reconnecting with https: this listener offers no in-band upgrade.
            headers.add(name: "upgrade", value: "TLS/1.2, HTTP/1.1")
            headers.add(name: "connection", value: self.closeConnection ? "upgrade, close" : "upgrade")
        } else if self.closeConnection {
            headers.add(name: "connection", value: "close")
        }
        if let hsts {
            headers.add(name: "strict-transport-security", value: hsts)
        }
        for field in self.addedFields {
            headers.add(name: field.name, value: field.value)
        }
        return HTTPResponseHead(version: version, status: self.status, headers: headers)
    }
}

// MARK: The answers, one constructor each.

extension GatewayAnswer {
    /// 400 `invalid_request`: the request is malformed in a way RFC 6750 names (a token in the URL, two
    /// tokens, a broken `Authorization` header).
    package static func invalidRequest(_ description: String, realm: String, reason: String, close: Bool = false) -> Self {
        GatewayAnswer(
            status: .badRequest,
            error: "invalid_request",
            description: description,
            challenge: Self.bearerChallenge(realm: realm, error: "invalid_request", description: description),
            closeConnection: close,
            reasonCode: reason
        )
    }

    /// 401 with a bare challenge: no token was sent at all (RFC 6750 §3.1: no error code then).
    package static func tokenRequired(realm: String) -> Self {
        GatewayAnswer(
            status: .unauthorized,
            error: "unauthorized",
            description: "this resource requires a token",
            challenge: "Bearer realm=\(Self.quotedParameter(realm))",
            reasonCode: "no_token"
        )
    }

    /// 401 `invalid_token`: a bad, expired or revoked token.
    package static func invalidToken(realm: String, reasonCode: String, description: String) -> Self {
        GatewayAnswer(
            status: .unauthorized,
            error: "invalid_token",
            description: description,
            challenge: Self.bearerChallenge(realm: realm, error: "invalid_token", description: description),
            reasonCode: reasonCode
        )
    }

    /// 403 `insufficient_scope`: a valid token of a kind the route does not accept.
    package static func insufficientScope(realm: String, description: String) -> Self {
        GatewayAnswer(
            status: .forbidden,
            error: "insufficient_scope",
            description: description,
            challenge: Self.bearerChallenge(realm: realm, error: "insufficient_scope", description: description),
            reasonCode: "wrong_kind"
        )
    }

    /// 403 `insufficient_scope` with the `scope` attribute RFC 6750 §3 defines: a valid token that does not
    /// grant every scope the route requires. `scope` is the route's `require_scopes`, space-separated (scope
    /// tokens, checked at load: nothing to escape).
    package static func insufficientScope(realm: String, description: String, scope: String, reasonCode: String) -> Self {
        GatewayAnswer(
            status: .forbidden,
            error: "insufficient_scope",
            description: description,
            challenge: Self.bearerChallenge(realm: realm, error: "insufficient_scope", description: description)
                + ", scope=\(Self.quotedParameter(scope))",
            reasonCode: reasonCode
        )
    }

    /// 403 for a cookie-borne token on an unsafe method from another site (DESIGN §2: the browser sent
    /// the cookie on its own; counting it would be cross-site request forgery).
    package static func crossSiteCookie(realm: String) -> Self {
        let description = "a cookie token is not accepted on a cross-site request"
        return GatewayAnswer(
            status: .forbidden,
            error: "invalid_request",
            description: description,
            challenge: Self.bearerChallenge(realm: realm, error: "invalid_request", description: description),
            reasonCode: "cross_site_cookie"
        )
    }

    package static func methodNotAllowed() -> Self {
        GatewayAnswer(
            status: .methodNotAllowed,
            error: "method_not_allowed",
            description: "this method is not accepted",
            reasonCode: "method_not_allowed"
        )
    }

    /// 421: the request's host is not one its connection's certificate covers (RFC 9110 §15.5.20). The client
    /// may send it again on a connection of its own for that host. The connection stays open: the request
    /// was read whole or its body is dropped as after any answer.
    package static func misdirectedRequest() -> Self {
        GatewayAnswer(
            status: .misdirectedRequest,
            error: "misdirected_request",
            description: "this connection's certificate does not cover the requested host; send the request on a connection for that host",
            reasonCode: "misdirected_request"
        )
    }

    package static func noRoute() -> Self {
        GatewayAnswer(status: .notFound, error: "not_found", description: "no route for this path", reasonCode: "no_route")
    }

    /// What a client whose HTTP/1.1 bytes broke the parser is told: 431 or 414 for a head over its limits,
    /// otherwise 400 naming the rule (the failure's texts never quote the client's bytes).
    package static func parseFailure(_ failure: HTTP1ParseFailure) -> Self {
        switch failure {
        case .tooLarge: .headersTooLarge()
        case .uriTooLong: .uriTooLong()
        case .malformed(let what): .malformedHTTP("the request is not valid HTTP/1.1: \(what)")
        case .unsolicited, .truncated: .malformedHTTP("the request is not valid HTTP/1.1")
        }
    }

    /// A request body whose framing broke after its head was taken (a bad chunk line, chunk data longer than
    /// its size, oversized trailers): always 400, naming the rule. The head was fine, so 431 and 414 do not
    /// apply even where the rule broken is a size.
    package static func bodyParseFailure(_ failure: HTTP1ParseFailure) -> Self {
        switch failure {
        case .malformed(let what), .tooLarge(let what):
            .malformedHTTP("the request body is not valid HTTP/1.1: \(what)")
        case .uriTooLong, .unsolicited, .truncated:
            .malformedHTTP("the request body is not valid HTTP/1.1")
        }
    }

    package static func malformedHTTP(_ description: String) -> Self {
        GatewayAnswer(
            status: .badRequest,
            error: "bad_request",
            description: description,
            closeConnection: true,
            reasonCode: "malformed_http"
        )
    }

    /// A path whose segments end in dots or spaces that, trimmed as some backends trim them, is another route's
    /// (``RequestTargetCheck/withSegmentTailsTrimmed(_:)``).
    package static func ambiguousPath() -> Self {
        GatewayAnswer(
            status: .badRequest,
            error: "bad_request",
            description: "the request target has a segment ending in dots or spaces, which some backends trim into "
                + "another route's path",
            reasonCode: "ambiguous_path"
        )
    }

    package static func headersTooLarge() -> Self {
        GatewayAnswer(
            status: .requestHeaderFieldsTooLarge,
            error: "request_header_fields_too_large",
            description: "the request headers are too large",
            closeConnection: true,
            reasonCode: "headers_too_large"
        )
    }

    package static func uriTooLong() -> Self {
        GatewayAnswer(
            status: .uriTooLong,
            error: "uri_too_long",
            description: "the request URI is too long",
            closeConnection: true,
            reasonCode: "uri_too_long"
        )
    }

    package static func payloadTooLarge() -> Self {
        GatewayAnswer(
            status: .payloadTooLarge,
            error: "payload_too_large",
            description: "the request body is too large",
            closeConnection: true,
            reasonCode: "body_too_large"
        )
    }

    /// The request body fell behind `limits.request_body_min_rate` (``ProxyExchange``'s body deadline).
    package static func requestBodyTooSlow() -> Self {
        GatewayAnswer(
            status: .requestTimeout,
            error: "request_timeout",
            description: "the request body arrived too slowly",
            closeConnection: true,
            reasonCode: "body_too_slow"
        )
    }

    /// Every byte of `limits.token_body_memory` is held by bodies being read for a token (``TokenBodyMemory``).
    package static func tokenBodyMemoryFull() -> Self {
        GatewayAnswer(
            status: .serviceUnavailable,
            error: "temporarily_unavailable",
            description: "too many request bodies are being read at once; try again",
            closeConnection: true,
            reasonCode: "token_body_memory_full"
        )
    }

    package static func tlsRequired() -> Self {
        GatewayAnswer(
            status: .upgradeRequired,
            error: "tls_required",
            description: "this service is only available over HTTPS",
            closeConnection: true,
            reasonCode: "tls_required"
        )
    }

    /// A cross-site request for the token page that is not a top-level navigation (``TokenExtractor/isCrossSiteSubresource(_:)``).
    package static func crossSiteTokenPage() -> Self {
        GatewayAnswer(
            status: .forbidden,
            error: "cross_site_request",
            description: "the token page opens only as a page, not from another site's script, image or frame",
            reasonCode: "cross_site_token_page"
        )
    }

    /// Plain HTTP sent to a TLS port (`http://host:443/`): `400`, not the plain listener's `426`, since this
    /// port offers no upgrade to name in the `Upgrade` field a `426` must carry.
    package static func plainHTTPOnTLSPort() -> Self {
        GatewayAnswer(
            status: .badRequest,
            error: "tls_required",
            description: "this port speaks HTTPS: the request was sent as plain HTTP",
            closeConnection: true,
            reasonCode: "plain_http_on_tls_port"
        )
    }

    /// 503 `temporarily_unavailable` with a challenge like the 401s': the token's keys come from an identity
    /// provider's key set that cannot be had at the moment (not fetched yet, its provider down past `max_stale`,
    /// or being fetched again for the token's new `kid`). Not a 401: the token may be good, and a client told
    /// 401 would throw it away and send its user through a login again.
    package static func keysUnavailable(realm: String) -> Self {
        let description = "the keys to check this token cannot be had at the moment; try again shortly"
        return GatewayAnswer(
            status: .serviceUnavailable,
            error: "temporarily_unavailable",
            description: description,
            challenge: Self.bearerChallenge(realm: realm, error: "temporarily_unavailable", description: description),
            reasonCode: "keys_unavailable"
        )
    }

    package static func badGateway(_ description: String, reason: String) -> Self {
        GatewayAnswer(status: .badGateway, error: "bad_gateway", description: description, reasonCode: reason)
    }

    package static func serviceUnavailable(_ description: String, reason: String) -> Self {
        GatewayAnswer(
            status: .serviceUnavailable,
            error: "service_unavailable",
            description: description,
            reasonCode: reason
        )
    }

    package static func gatewayTimeout() -> Self {
        GatewayAnswer(
            status: .gatewayTimeout,
            error: "gateway_timeout",
            description: "the backend did not answer in time",
            reasonCode: "upstream_timeout"
        )
    }

    /// A request still under way when the drain ended (``ProxyExchange/drainEnded()``).
    package static func drainEnded() -> Self {
        GatewayAnswer(
            status: .serviceUnavailable,
            error: "service_unavailable",
            description: "the gateway shut down before the request was done; it may be sent again",
            closeConnection: true,
            reasonCode: "drain_timeout"
        )
    }

    package static func shuttingDown() -> Self {
        GatewayAnswer(
            status: .serviceUnavailable,
            error: "service_unavailable",
            description: "the gateway is shutting down",
            closeConnection: true,
            reasonCode: "shutting_down"
        )
    }
}

// MARK: Challenge formatting

extension GatewayAnswer {
    package static func bearerChallenge(realm: String, error: String, description: String) -> String {
        "Bearer realm=\(Self.quotedParameter(realm)), error=\(Self.quotedParameter(error)), "
            + "error_description=\(Self.quotedParameter(description))"
    }

    /// An RFC 7230 quoted-string. RFC 6750 limits `error_description` to printable ASCII without `"` and
    /// `\`; the descriptions are ours, but the realm is configuration, so anything else is dropped.
    package static func quotedParameter(_ value: String) -> String {
        var result = "\""
        for scalar in value.unicodeScalars where scalar.value >= 0x20 && scalar.value < 0x7F {
            if scalar == "\"" || scalar == "\\" { continue }
            result.unicodeScalars.append(scalar)
        }
        result += "\""
        return result
    }
}

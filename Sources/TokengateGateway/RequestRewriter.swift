//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengateTokens

/// Turns the client's request head into the one the backend sees (DESIGN §5).
///
/// Order matters: first every header the client must not be able to send (hop-by-hop headers, and the
/// whole `X-Tokengate-*` family in any case, any number of times) is removed; then the token is taken
/// out of where it was; only then are the gateway's own identity and forwarding headers added, so no
/// client value can survive next to them.
enum RequestRewriter {
    static let identityHeaderPrefix = "x-tokengate-"

    /// Hop-by-hop headers (RFC 9110 §7.6.1) that describe the client's connection, not the request.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "proxy-authorization",
        "proxy-authenticate", "http2-settings",
    ]

    struct Forwarding {
        var clientAddress: String?
        var requestID: String
        /// The scheme the client used: always `https` on the TLS listener.
        var scheme: String
    }

    /// The head to send upstream. `newBodyLength` is set when the token was removed from the body.
    ///
    /// Starts from the client's headers and removes what must not pass (no re-adding of every field, which
    /// would validate and copy each one again): this runs for every forwarded request.
    ///
    /// Body framing is never left to chance (request smuggling): the client's `Content-Length` and
    /// `Transfer-Encoding` are removed and the gateway states the framing of what it will send itself —
    /// the new length, the client's validated length, or lowercase `chunked` for a body of unknown length —
    /// so the backend can only ever read the body the gateway writes, as the body.
    static func upstreamHead(
        from head: HTTPRequestHead,
        identity: VerifiedToken?,
        strip: TokenSource?,
        newBodyLength: Int?,
        forwarding: Forwarding
    ) -> HTTPRequestHead {
        var headers = head.headers
        let host = headers.first(name: "host")
        let clientLength = headers.first(name: "content-length")
        let chunked = headers.contains(name: "transfer-encoding")
        // Names the client listed in `Connection` are hop-by-hop too (rare: parsed only when present) — but
        // never the framing or the Host, which the gateway decides.
        if headers.contains(name: "connection") {
            for value in headers[canonicalForm: "connection"] where !value.isEmpty {
                let name = String(value)
                if Self.protectedNames.contains(where: { HTTPHeaders.equalsIgnoringCase($0, name) }) { continue }
                headers.remove(name: name)
            }
        }
        for name in Self.hopByHopNames {
            headers.remove(name: name)
        }
        for name in Self.forwardingNames {
            headers.remove(name: name)
        }
        // Header names with `_` are dropped (as nginx does by default): CGI-style backends map `X_Tokengate_User`
        // and `X-Tokengate-User` to the same variable, so they could smuggle an identity past the check below.
        if headers.containsName(withPrefix: Self.identityHeaderPrefix) || headers.contains(where: { $0.name.utf8.contains(UInt8(ascii: "_")) }) {
            var dropped: [String] = []
            for (name, _) in headers
            where HTTPHeaders.hasPrefixIgnoringCase(name, Self.identityHeaderPrefix) || name.utf8.contains(UInt8(ascii: "_")) {
                dropped.append(name)
            }
            for name in dropped { headers.remove(name: name) }
        }
        switch strip {
        case .authorization:
            headers.remove(name: "authorization")
        case .header(let tokenHeader):
            headers.remove(name: tokenHeader)
        case .cookie(let name):
            let cookieValues = headers["cookie"]
            headers.remove(name: "cookie")
            if let remaining = CookieHeader.removing(name, from: cookieValues) {
                headers.add(name: "cookie", value: remaining)
            }
        case .form, .json, nil:
            break
        }
        headers.remove(name: "content-length")
        headers.remove(name: "transfer-encoding")
        if let newBodyLength {
            headers.add(name: "content-length", value: String(newBodyLength))
        } else if let clientLength {
            headers.add(name: "content-length", value: clientLength)
        } else if chunked {
            headers.add(name: "transfer-encoding", value: "chunked")
        }
        if let identity {
            headers.add(name: "x-tokengate-user", value: identity.subject)
            headers.add(name: "x-tokengate-token-kind", value: identity.kind.rawValue)
            headers.add(name: "x-tokengate-issued-at", value: String(identity.issuedAt))
            if let keyID = identity.keyID {
                headers.add(name: "x-tokengate-key-id", value: keyID)
            }
        }
        // At the edge the client's own X-Forwarded-* values are not trusted (they were dropped above): the
        // backend learns the address the gateway saw.
        if let address = forwarding.clientAddress {
            headers.add(name: "x-forwarded-for", value: address)
        }
        headers.add(name: "x-forwarded-proto", value: forwarding.scheme)
        if let host {
            headers.add(name: "x-forwarded-host", value: host)
        }
        headers.add(name: "x-request-id", value: forwarding.requestID)
        return HTTPRequestHead(version: .http1_1, method: head.method, uri: head.uri, headers: headers)
    }

    /// What a client's `Connection` header may never name: the gateway sets these itself.
    static let protectedNames = ["content-length", "transfer-encoding", "host"]

    static let hopByHopNames = Array(Self.hopByHop)
    /// Headers that tell a backend where the request came from or which path it "really" is: only the
    /// gateway may say that (path overrides like X-Original-URL bypass routing on some servers).
    static let forwardingNames = [
        "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "x-forwarded-prefix",
        "x-forwarded-server", "forwarded", "x-request-id", "x-real-ip", "true-client-ip", "x-client-ip",
        "x-original-url", "x-rewrite-url",
    ]

    /// The client's request id when it is a sane one (printable, short), so that traces join up.
    static func requestID(from head: HTTPRequestHead, generate: () -> String) -> String {
        if let given = head.headers.first(name: "x-request-id"), !given.isEmpty, given.utf8.count <= 128,
            given.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        {
            return given
        }
        return generate()
    }

    /// The response head sent to the client: hop-by-hop headers removed (the encoder frames the body
    /// itself), HSTS added because the client reached us over TLS.
    static func clientResponseHead(from head: HTTPResponseHead, version: HTTPVersion, close: Bool) -> HTTPResponseHead {
        var headers = head.headers
        if headers.contains(name: "connection") {
            for value in headers[canonicalForm: "connection"] where !value.isEmpty {
                headers.remove(name: String(value))
            }
        }
        for name in Self.hopByHopNames {
            headers.remove(name: name)
        }
        headers.remove(name: "transfer-encoding")
        if !headers.contains(name: "strict-transport-security") {
            headers.add(name: "strict-transport-security", value: "max-age=31536000")
        }
        if close {
            headers.add(name: "connection", value: "close")
        }
        return HTTPResponseHead(version: version, status: head.status, headers: headers)
    }
}

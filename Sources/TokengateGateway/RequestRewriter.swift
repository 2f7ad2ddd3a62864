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
    /// One pass over the client's fields into a new block sized for what the gateway adds: this runs for
    /// every forwarded request, and removing names one by one from a copy (a scan and a possible
    /// reallocation per name) cost more than the rest of the rewrite.
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
        let client = head.headers
        var host: String?
        var clientLength: String?
        var chunked = false
        // Names the client listed in `Connection` are hop-by-hop too (rare: parsed only when present) — but
        // never the framing or the Host, which the gateway decides.
        var connectionListed: [String] = []
        if Self.connectionListsNames(client) {
            for value in client[canonicalForm: "connection"] where !value.isEmpty {
                let name = String(value)
                if Self.protectedNames.contains(where: { HTTPHeaders.equalsIgnoringCase($0, name) }) { continue }
                connectionListed.append(name)
            }
        }
        var cookies: [String] = []
        var fields: [(String, String)] = []
        fields.reserveCapacity(client.count + 10)
        for (name, value) in client {
            if host == nil, HTTPHeaders.equalsIgnoringCase(name, "host") {
                host = value
            } else if HTTPHeaders.equalsIgnoringCase(name, "content-length") {
                clientLength = clientLength ?? value
                continue
            } else if HTTPHeaders.equalsIgnoringCase(name, "transfer-encoding") {
                chunked = true
                continue
            }
            if Self.isDroppedFromRequest(name) { continue }
            if !connectionListed.isEmpty, connectionListed.contains(where: { HTTPHeaders.equalsIgnoringCase($0, name) }) {
                continue
            }
            switch strip {
            case .authorization where HTTPHeaders.equalsIgnoringCase(name, "authorization"):
                continue
            case .header(let tokenHeader) where HTTPHeaders.equalsIgnoringCase(name, tokenHeader):
                continue
            case .cookie where HTTPHeaders.equalsIgnoringCase(name, "cookie"):
                cookies.append(value)
                continue
            case .authorization, .header, .cookie, .form, .json, nil:
                break
            }
            fields.append((name, value))
        }
        if case .cookie(let name) = strip, let remaining = CookieHeader.removing(name, from: cookies) {
            fields.append(("cookie", remaining))
        }
        if let newBodyLength {
            fields.append(("content-length", String(newBodyLength)))
        } else if let clientLength {
            fields.append(("content-length", clientLength))
        } else if chunked {
            fields.append(("transfer-encoding", "chunked"))
        }
        if let identity {
            fields.append(("x-tokengate-user", identity.subject))
            fields.append(("x-tokengate-token-kind", identity.kind.rawValue))
            fields.append(("x-tokengate-issued-at", String(identity.issuedAt)))
            if let keyID = identity.keyID {
                fields.append(("x-tokengate-key-id", keyID))
            }
        }
        // At the edge the client's own X-Forwarded-* values are not trusted (they were dropped above): the
        // backend learns the address the gateway saw.
        if let address = forwarding.clientAddress {
            fields.append(("x-forwarded-for", address))
        }
        fields.append(("x-forwarded-proto", forwarding.scheme))
        if let host {
            fields.append(("x-forwarded-host", host))
        }
        fields.append(("x-request-id", forwarding.requestID))
        return HTTPRequestHead(version: .http1_1, method: head.method, uri: head.uri, headers: HTTPHeaders(fields))
    }

    /// Whether a client's field never reaches the backend whatever the route: hop-by-hop fields, `Expect`, the
    /// forwarding fields only the gateway may set, identity fields (`x-tokengate-*`), and names with `_`
    /// (dropped as nginx does by default: CGI-style backends map `X_Tokengate_User` and `X-Tokengate-User` to
    /// the same variable, so they could smuggle an identity past the gateway).
    static func isDroppedFromRequest(_ name: String) -> Bool {
        let length = name.utf8.count
        if length < Self.droppedByLength.count {
            for dropped in Self.droppedByLength[length] where HTTPHeaders.equalsIgnoringCase(name, dropped) {
                return true
            }
        }
        return HTTPHeaders.hasPrefixIgnoringCase(name, Self.identityHeaderPrefix) || name.utf8.contains(UInt8(ascii: "_"))
    }

    /// ``hopByHopNames``, ``forwardingNames`` and `expect` (the gateway answers `100-continue` itself) by length,
    /// so a field is compared with only a few of them.
    private static let droppedByLength: [[String]] = {
        let names = Self.hopByHopNames + Self.forwardingNames + ["expect"]
        var table = Array(repeating: [String](), count: (names.map(\.utf8.count).max() ?? 0) + 1)
        for name in names { table[name.utf8.count].append(name) }
        return table
    }()

    /// Whether a `Connection` field may name other fields. The common values (`keep-alive`, `close`) name only
    /// themselves, and both are dropped as hop-by-hop anyway: only other values need the (allocating)
    /// comma-split of `canonicalForm`.
    static func connectionListsNames(_ headers: HTTPHeaders) -> Bool {
        for (name, value) in headers where HTTPHeaders.equalsIgnoringCase(name, "connection") {
            if !HTTPHeaders.equalsIgnoringCase(value, "keep-alive"), !HTTPHeaders.equalsIgnoringCase(value, "close") {
                return true
            }
        }
        return false
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

    /// The response head sent to the client over HTTP/2 (HTTP/1.1 writes the same fields straight into its
    /// output, ``HTTP1ResponseSerializer``): the fields of ``forEachClientResponseField(of:close:_:)``.
    static func clientResponseHead(from head: HTTPResponseHead, version: HTTPVersion, close: Bool) -> HTTPResponseHead {
        var fields: [(String, String)] = []
        fields.reserveCapacity(head.headers.count + 2)
        Self.forEachClientResponseField(of: head.headers, close: close) { name, value in
            fields.append((name, value))
        }
        return HTTPResponseHead(version: version, status: head.status, headers: HTTPHeaders(fields))
    }

    /// The backend's response fields as the client gets them, in order, in one pass: hop-by-hop fields, the
    /// ones its `Connection` names and `Transfer-Encoding` removed (the client side frames the body itself),
    /// then HSTS added when the backend did not set it (the client reached us over TLS) and `connection:
    /// close` when the connection ends after this response.
    static func forEachClientResponseField(of upstream: HTTPHeaders, close: Bool, _ body: (String, String) -> Void) {
        var connectionListed: [String] = []
        if Self.connectionListsNames(upstream) {
            for value in upstream[canonicalForm: "connection"] where !value.isEmpty {
                connectionListed.append(String(value))
            }
        }
        var hasHSTS = false
        for (name, value) in upstream {
            let length = name.utf8.count
            if length < Self.hopByHopByLength.count,
                Self.hopByHopByLength[length].contains(where: { HTTPHeaders.equalsIgnoringCase(name, $0) })
            {
                continue
            }
            if HTTPHeaders.equalsIgnoringCase(name, "transfer-encoding") { continue }
            if !connectionListed.isEmpty, connectionListed.contains(where: { HTTPHeaders.equalsIgnoringCase($0, name) }) {
                continue
            }
            if !hasHSTS, HTTPHeaders.equalsIgnoringCase(name, "strict-transport-security") {
                hasHSTS = true
            }
            body(name, value)
        }
        if !hasHSTS {
            body("strict-transport-security", "max-age=31536000")
        }
        if close {
            body("connection", "close")
        }
    }

    /// ``hopByHopNames`` by length.
    private static let hopByHopByLength: [[String]] = {
        var table = Array(repeating: [String](), count: (Self.hopByHopNames.map(\.utf8.count).max() ?? 0) + 1)
        for name in Self.hopByHopNames { table[name.utf8.count].append(name) }
        return table
    }()
}

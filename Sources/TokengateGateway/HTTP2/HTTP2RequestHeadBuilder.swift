//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1

/// Collects one request's decoded header fields (as nghttp2 reports them, one at a time) into the
/// HTTP/1-shaped ``HTTPRequestHead`` the request logic shares with HTTP/1.1, and counts their size.
///
/// nghttp2's HTTP messaging validation has already run on every field that reaches ``add(name:value:)``:
/// names are lowercase tokens, values carry no CR/LF/NUL, pseudo-headers come first and are neither
/// repeated nor unknown, `:method`/`:scheme`/`:path` are present (except for CONNECT), connection-specific
/// fields (`connection`, `transfer-encoding`, `upgrade`, `keep-alive`, `proxy-connection`, `te` other than
/// `trailers`) were refused. What is left here is the mapping and the gateway's own rules.
struct HTTP2RequestHeadBuilder: Sendable {
    enum Outcome: Sendable {
        case head(HTTPRequestHead)
        /// The request cannot be handed on; answer it with this.
        case reject(GatewayAnswer)
    }

    /// The cap on ``listSize``.
    let limit: Int
    /// The decoded header list size so far: name + value + 32 per field (RFC 9113 §6.5.2).
    private(set) var listSize = 0
    /// The list went past ``limit``; fields after that are not kept.
    private(set) var oversized = false
    private var method: String?
    private var path: String?
    private var authority: String?
    private var headers: [(String, String)] = []
    private var cookies: [String] = []

    init(limit: Int) {
        self.limit = limit
    }

    /// Adds one decoded field.
    mutating func add(name: String, value: String) {
        self.listSize += name.utf8.count + value.utf8.count + 32
        if self.listSize > self.limit {
            self.oversized = true
            self.headers = []  // Nothing more is kept, and what was kept is released now.
            self.cookies = []
            return
        }
        switch name {
        case ":method": self.method = value
        case ":path": self.path = value
        case ":authority": self.authority = value
        case ":scheme", ":protocol": break  // Always https here; extended CONNECT is not enabled.
        case "cookie": self.cookies.append(value)
        default:
            // Room for a typical request's fields and the host put in front of them (``build()``) at once,
            // instead of regrowing at 1, 2 and 4 of them.
            if self.headers.capacity == 0 { self.headers.reserveCapacity(9) }
            self.headers.append((name, value))
        }
    }

    /// The finished request head, or the answer to give instead. The collected fields move into the head:
    /// the list they were gathered in becomes its `HTTPHeaders` (with the host first), where copying them
    /// into a new one cost an allocation per request.
    mutating func build() -> Outcome {
        if self.oversized {
            return .reject(.headersTooLarge())
        }
        guard let method = self.method, let path = self.path else {
            // Only CONNECT may lack `:path` past nghttp2's checks; the gateway does not tunnel.
            return .reject(.malformedHTTP("CONNECT is not supported"))
        }
        var fields = self.headers
        self.headers = []  // `fields` is the only reference now: the edits below happen in place.
        // `:authority` is the target's authority (RFC 9113 §8.3.1); a `Host` that names another would let
        // routing and the backend disagree on the target, so such a request is malformed.
        let hosts = fields.filter { $0.0 == "host" }.map(\.1)
        if let authority = self.authority {
            if hosts.contains(where: { $0.lowercased() != authority.lowercased() }) || hosts.count > 1 {
                return .reject(.malformedHTTP("the Host header does not match :authority"))
            }
            if !hosts.isEmpty { fields.removeAll { $0.0 == "host" } }
            fields.insert(("host", authority), at: 0)
        } else if hosts.count == 1 {
            fields.removeAll { $0.0 == "host" }
            fields.insert(("host", hosts[0]), at: 0)
        } else {
            return .reject(.malformedHTTP("a request needs exactly one :authority or Host"))
        }
        // HTTP/2 lets a client split `cookie` into one field per pair for better compression; HTTP/1 and
        // every backend expect one field joined with "; " (RFC 9113 §8.2.3).
        if !self.cookies.isEmpty {
            fields.append(("cookie", self.cookies.joined(separator: "; ")))
        }
        return .head(
            HTTPRequestHead(
                version: HTTPVersion(major: 2, minor: 0),
                method: HTTPMethod(rawValue: method),
                uri: path,
                headers: HTTPHeaders(fields)
            )
        )
    }
}

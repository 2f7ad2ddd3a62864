//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1

/// Collects one request's decoded header fields (as nghttp2 reports them, one at a time) into the
/// HTTP/1-shaped ``ClientRequestHead`` the request logic shares with HTTP/1.1, and counts their size.
///
/// nghttp2's HTTP messaging validation has already run on every field that reaches ``add(name:value:)``:
/// names are lowercase tokens, values carry no CR/LF/NUL, pseudo-headers come first and are neither
/// repeated nor unknown, `:method`/`:scheme`/`:path` are present (except for CONNECT), connection-specific
/// fields (`connection`, `transfer-encoding`, `upgrade`, `keep-alive`, `proxy-connection`, `te` other than
/// `trailers`) were refused. What is left here is the mapping and the gateway's own rules. The regular fields
/// are written straight from nghttp2's bytes into the head's field lines (``RequestFields``): no `String` per
/// name or value.
package struct HTTP2RequestHeadBuilder: Sendable {
    package enum Outcome: Sendable {
        case head(ClientRequestHead)
        /// The request cannot be handed on; answer it with this.
        case reject(GatewayAnswer)
    }

    /// The cap on ``listSize``.
    package let limit: Int
    /// The cap on the number of regular fields, as HTTP/1.1 counts them: every field but the pseudo-headers,
    /// the `cookie` fields (joined into one) counting once.
    package let maxFields: Int
    /// Past this many decoded bytes (twice ``limit``) ``add(name:value:)`` asks for no more fields.
    ///
    /// Between ``limit`` and this the fields are only counted, so a client whose headers grew a little too
    /// large gets its `431`. Beyond it the list is an attack rather than a mistake (an HPACK bomb: a few bytes
    /// that reference a large dynamic table entry thousands of times), and every further field would still cost
    /// nghttp2 a decode and a validation of its whole value: the stream is reset instead, and nghttp2 skips
    /// the rest of the block without validating or reporting it.
    package var resetLimit: Int { 2 * self.limit }
    /// The decoded header list size so far: name + value + 32 per field (RFC 9113 §6.5.2).
    package private(set) var listSize = 0
    /// The list went past ``limit``; fields after that are not kept.
    package private(set) var oversized = false
    private var method: String?
    /// The request is a `HEAD` (as far as its `:method` has come): its response has no content.
    package var isHeadRequest: Bool { self.method == "HEAD" }
    private var path: String?
    private var authority: String?
    /// `host` fields, kept apart: the head's host goes first (``build()``), and must agree with `:authority`.
    private var hosts: [String] = []
    private var fields = RequestFields()
    /// The `cookie` fields joined with "; " as they come.
    private var cookie: [UInt8] = []
    /// A `content-length` that nghttp2 took (digits only) but HTTP/1.1's parser would refuse: more than 18 digits
    /// (leading zeros included). The length is forwarded as the number it is read as, so it must be one.
    private var lengthUnreadable = false

    /// - Parameter maxFields: HTTP/1.1's limit by default (``HTTP2ServerConfiguration/maxHeaderFields``).
    package init(limit: Int, maxFields: Int = 256) {
        self.limit = limit
        self.maxFields = maxFields
    }

    /// Adds one decoded field. Returns false once the list is past ``resetLimit``: then no more fields are to
    /// be taken for this request (the codec resets the stream).
    package mutating func add(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        self.listSize += name.count + value.count + 32
        if self.listSize > self.limit {
            if !self.oversized {
                self.oversized = true
                // Nothing more is kept, and what was kept is released now (once: no new storage per field).
                self.fields = RequestFields()
                self.hosts = []
                self.cookie = []
            }
            return self.listSize <= self.resetLimit
        }
        if name.first == UInt8(ascii: ":") {
            if FieldBytes.equalsIgnoringCase(name, ":method") {
                self.method = String(decoding: value, as: UTF8.self)
            } else if FieldBytes.equalsIgnoringCase(name, ":path") {
                self.path = String(decoding: value, as: UTF8.self)
            } else if FieldBytes.equalsIgnoringCase(name, ":authority") {
                self.authority = String(decoding: value, as: UTF8.self)
            }
            // `:scheme` is always https here; `:protocol` cannot come (extended CONNECT is not enabled).
            return true
        }
        if FieldBytes.equalsIgnoringCase(name, "host") {
            self.hosts.append(String(decoding: value, as: UTF8.self))
        } else if FieldBytes.equalsIgnoringCase(name, "cookie") {
            // HTTP/2 lets a client split `cookie` into one field per pair for better compression; HTTP/1 and
            // every backend expect one field joined with "; " (RFC 9113 §8.2.3).
            if !self.cookie.isEmpty { self.cookie += "; ".utf8 }
            self.cookie.append(contentsOf: value)
        } else {
            // Room for a typical request's lines (a token in `authorization`, `user-agent`, `accept`) and the
            // host put in front of them at once, instead of regrowing field by field.
            if self.fields.count == 0 { self.fields.reserveCapacity(512) }
            if FieldBytes.equalsIgnoringCase(name, "content-length"), FieldBytes.decimal(value) == nil {
                self.lengthUnreadable = true
            }
            self.fields.add(name: name, value: value)
        }
        return true
    }

    /// The finished request head, or the answer to give instead. The collected lines move into the head, the
    /// host in front of them.
    ///
    /// Besides nghttp2's checks, the ones HTTP/1.1's parser makes, with the same answers: a method NIO's
    /// `HTTPMethod` does not know (but `QUERY`) is 400 "an unknown method" (nghttp2 takes any token, `get`
    /// and `FOO` included); more than ``maxFields`` fields is 431; a `content-length` of more than 18 digits is 400
    /// "Content-Length is not a number".
    package mutating func build() -> Outcome {
        if self.oversized {
            return .reject(.headersTooLarge())
        }
        guard let methodName = self.method, let path = self.path else {
            // Only CONNECT may lack `:path` past nghttp2's checks; the gateway does not tunnel.
            return .reject(.malformedHTTP("CONNECT is not supported"))
        }
        let method = HTTPMethod(rawValue: methodName)
        if case .RAW(let name) = method, name != "QUERY" {
            return .reject(.malformedHTTP("an unknown method"))
        }
        if self.fields.count + self.hosts.count + (self.cookie.isEmpty ? 0 : 1) > self.maxFields {
            return .reject(.headersTooLarge())
        }
        if self.lengthUnreadable {
            return .reject(.malformedHTTP("Content-Length is not a number"))
        }
        // RFC 9113 §8.3.1: `:authority` must not include the userinfo subcomponent (nor may `Host`, whose
        // grammar has none: RFC 9110 §7.2). Passed on, `user@host` would reach routing and the backend as a host.
        if self.authority?.utf8.contains(UInt8(ascii: "@")) == true {
            return .reject(.malformedHTTP(":authority must not contain userinfo"))
        }
        if self.hosts.contains(where: { $0.utf8.contains(UInt8(ascii: "@")) }) {
            return .reject(.malformedHTTP("the Host header must not contain userinfo"))
        }
        // `:authority` is the target's authority (RFC 9113 §8.3.1); a `Host` that names another would let
        // routing and the backend disagree on the target, so such a request is malformed.
        let host: String
        if let authority = self.authority {
            if self.hosts.contains(where: { $0.lowercased() != authority.lowercased() }) || self.hosts.count > 1 {
                return .reject(.malformedHTTP("the Host header does not match :authority"))
            }
            host = authority
        } else if self.hosts.count == 1 {
            host = self.hosts[0]
        } else {
            return .reject(.malformedHTTP("a request needs exactly one :authority or Host"))
        }
        var fields = self.fields
        self.fields = RequestFields()  // `fields` is the only reference now: the edits below happen in place.
        fields.prepend(name: "host", value: host)
        if !self.cookie.isEmpty {
            self.cookie.withUnsafeBytes { cookie in
                fields.add(name: UnsafeRawBufferPointer(start: ("cookie" as StaticString).utf8Start, count: 6), value: cookie)
            }
        }
        return .head(
            ClientRequestHead(version: HTTPVersion(major: 2, minor: 0), method: method, uri: path, fields: fields)
        )
    }
}

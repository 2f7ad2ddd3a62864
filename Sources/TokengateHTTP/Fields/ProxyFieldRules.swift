//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// Which fields a proxy must not pass between its client and its backend, and the rules that apply them to
/// responses: the one definition of these lists, read by the request rewriter, both protocols' response
/// writers and the configuration (which refuses `forward_token: keep` for a header the gateway removes).
package enum ProxyFieldRules {
    /// Hop-by-hop headers (RFC 9110 §7.6.1) that describe the client's connection, not the request.
    package static let hopByHopFieldNames: [StaticString] = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "proxy-authorization",
        "proxy-authenticate", "http2-settings",
    ]

    /// No CR, LF or NUL: what NIO's outbound header validation refused, so a value cannot end its line.
    package static func isSafeFieldValue(_ value: String) -> Bool {
        let contiguous = value.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes where byte == 0x0D || byte == 0x0A || byte == 0 {
                return false
            }
            return true
        }
        return contiguous ?? !value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }
    }

    /// What a client's `Connection` header may never name: the gateway sets these itself.
    package static let protectedNames: [StaticString] = ["content-length", "transfer-encoding", "host"]

    /// Whether a `Connection` field of a head the gateway made (an answer over HTTP/2) may name other fields.
    /// The common values (`keep-alive`, `close`) name only themselves, and both are dropped as hop-by-hop
    /// anyway: only other values need the (allocating) comma-split of `canonicalForm`.
    package static func connectionListsNames(_ headers: HTTPHeaders) -> Bool {
        for (name, value) in headers where HTTPHeaders.equalsIgnoringCase(name, "connection") {
            if !HTTPHeaders.equalsIgnoringCase(value, "keep-alive"), !HTTPHeaders.equalsIgnoringCase(value, "close") {
                return true
            }
        }
        return false
    }

    package static let hopByHopNames = Self.hopByHopFieldNames.map(\.description)

    /// Headers that tell a backend where the request came from or which path it "really" is: only the
    /// gateway may say that (path overrides like X-Original-URL bypass routing on some servers).
    package static let forwardingFieldNames: [StaticString] = [
        "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "x-forwarded-prefix",
        "x-forwarded-server", "forwarded", "x-request-id", "x-real-ip", "true-client-ip", "x-client-ip",
        "x-original-url", "x-rewrite-url",
    ]

    /// The backend's response fields as the client gets them, in order, in one pass over the bytes they came
    /// in: hop-by-hop fields, the ones its `Connection` names, `Transfer-Encoding` (the client side frames the
    /// body itself) and a bodiless status's `Content-Length` removed, then `hsts` (the configured
    /// `Strict-Transport-Security`, `nil` when turned off) added when the backend did not set it (the client
    /// reached us over TLS) and `connection: close` when the connection ends after this response. Both protocols' heads are written from this
    /// (``HTTP1ResponseSerializer``, ``HTTP2HeaderBlock``).
    package static func forEachClientResponseField(
        of upstream: UpstreamResponseHead,
        close: Bool,
        hsts: String?,
        added: [ResponseField] = [],
        _ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Void
    ) {
        // Known from the parse pass: the rare head whose `Connection` names fields is walked once more for them.
        let connectionListed = upstream.connectionNamesFields ? Self.namesListedInConnection(upstream) : []
        var hasHSTS = false
        // A status without a body (204, 304) carries no `Content-Length` to the client (RFC 9110 §8.6; an HTTP/2
        // client's nghttp2 resets a 204 stream that has one), whichever protocol it speaks.
        let dropsLength = !upstream.status.mayHaveResponseBody
        // The first letters (folded to 5 bits) of the added names a backend's field gives way to: a field whose
        // first letter is not among them is never compared with the names themselves.
        var replacedFirstLetters: UInt32 = 0
        for field in added where field.replacesBackendField {
            replacedFirstLetters |= 1 << UInt32(field.name.utf8.first.map { $0 & 0x1F } ?? 0)
        }
        upstream.forEachField { name, value in
            if Self.hopByHop.contains(name) { return }
            if FieldBytes.equalsIgnoringCase(name, "transfer-encoding") { return }
            if dropsLength, FieldBytes.equalsIgnoringCase(name, "content-length") { return }
            if !connectionListed.isEmpty,
                connectionListed.contains(where: { listed in listed.withUnsafeBytes { FieldBytes.equalsIgnoringCase($0, name) } })
            {
                return
            }
            if !hasHSTS, FieldBytes.equalsIgnoringCase(name, "strict-transport-security") {
                hasHSTS = true
            }
            if replacedFirstLetters != 0, let first = name.first, replacedFirstLetters & (1 << UInt32(first & 0x1F)) != 0,
                added.contains(where: { field in
                var fieldName = field.name
                return field.replacesBackendField
                    && fieldName.withUTF8 { FieldBytes.equalsIgnoringCase(name, UnsafeRawBufferPointer($0)) }
            }) {
                return  // The gateway's own value follows.
            }
            body(name, value)
        }
        for field in added {
            var name = field.name
            var value = field.value
            name.withUTF8 { name in value.withUTF8 { value in body(UnsafeRawBufferPointer(name), UnsafeRawBufferPointer(value)) } }
        }
        func add(_ name: StaticString, _ value: StaticString) {
            body(
                UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount),
                UnsafeRawBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount)
            )
        }
        if !hasHSTS, var hsts {
            // A native string's bytes are contiguous: no copy.
            hsts.withUTF8 { value in
                let name: StaticString = "strict-transport-security"
                body(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), UnsafeRawBufferPointer(value))
            }
        }
        if close {
            add("connection", "close")
        }
    }

    /// Fields that must not travel as trailers (RFC 9110 §6.5.1): framing and connection management. Dropped
    /// from a backend's trailers for clients of both protocols (``HTTP1ResponseSerializer``,
    /// ``HTTP2HeaderBlock``); the values were checked by the parser that read them.
    package static func isForbiddenTrailer(_ name: String) -> Bool {
        HTTPHeaders.equalsIgnoringCase(name, "content-length") || HTTPHeaders.equalsIgnoringCase(name, "transfer-encoding")
            || HTTPHeaders.equalsIgnoringCase(name, "host")
            || Self.hopByHopNames.contains { HTTPHeaders.equalsIgnoringCase(name, $0) }
    }

    /// The names a backend's `Connection` fields list (`keep-alive` and `close` among them: hop-by-hop anyway).
    private static func namesListedInConnection(_ upstream: UpstreamResponseHead) -> [[UInt8]] {
        var listed: [[UInt8]] = []
        upstream.forEachField { name, value in
            if FieldBytes.equalsIgnoringCase(name, "connection") {
                listed += FieldBytes.listElements(value)
            }
        }
        return listed
    }

    /// ``hopByHopFieldNames``, for the look-up per response field.
    private static let hopByHop = FieldNameSet(Self.hopByHopFieldNames)

    /// Every request field name the gateway removes before forwarding, whatever the route: ``hopByHopFieldNames``,
    /// ``forwardingFieldNames`` and `expect` (the gateway answers `100-continue` itself). Besides these, every
    /// `X-Tokengate-*` field and every name holding `_` is removed.
    package static let removedBeforeForwarding: Set<String> = Set(
        (Self.hopByHopFieldNames + Self.forwardingFieldNames).map(\.description) + ["expect"]
    )
}

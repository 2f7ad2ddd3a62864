//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

/// Turns the client's request head into the one the backend sees (DESIGN §5).
///
/// Order matters: first every header the client must not be able to send (hop-by-hop headers, and the
/// whole `X-Tokengate-*` family in any case, any number of times) is removed; then the token is taken
/// out of where it was; only then are the gateway's own identity and forwarding headers added, so no
/// client value can survive next to them.
enum RequestRewriter {
    static let identityHeaderPrefix: StaticString = "x-tokengate-"


    struct Forwarding {
        var clientAddress: String?
        var requestID: String
        /// The scheme the client used: always `https` on the TLS listener.
        var scheme: String
    }

    /// The head to send upstream, checked: `newBodyLength` is set when the token was removed from the body, and
    /// `closeConnection` for an upstream that does not keep connections (`keep_alive: false`).
    /// `nil` when a value the gateway adds would carry a CR, LF or NUL byte (the client's values were checked
    /// by the HTTP/1.1 parser or nghttp2, but an identity comes from the token), or when the client's
    /// `Content-Length` is not a number both client parsers accept (never reached: they refuse it): such a
    /// head is never sent. The bytes are written when the request goes out, into its upstream connection's buffer
    /// (``UpstreamRequestHead/write(into:)``).
    static func upstreamHead(
        from head: ClientRequestHead,
        identity: VerifiedToken?,
        strip: TokenSource?,
        withheldCookies: [String],
        newBodyLength: Int?,
        closeConnection: Bool = false,
        forwardedClaimHeaders: [String] = [],
        secretHeader: UpstreamSecretHeader? = nil,
        forwarding: Forwarding
    ) -> UpstreamRequestHead? {
        func isSafe(_ value: String?) -> Bool { value.map(ProxyFieldRules.isSafeFieldValue) ?? true }
        guard isSafe(identity?.subject), isSafe(identity?.keyID), isSafe(forwarding.clientAddress), isSafe(forwarding.scheme),
            isSafe(forwarding.requestID)
        else { return nil }
        // The verifier refused any claim value with a control byte; checked again here, where it is written.
        if let claims = identity?.forwardedClaims, !claims.isEmpty {
            for value in claims where !isSafe(value) { return nil }
        }
        // The client's framing, read in one pass (it replaces the look-up for `transfer-encoding` alone that was
        // here): a body the gateway rewrote has a length of its own, and needs neither.
        var chunked = false
        var clientLength: Int?
        if newBodyLength == nil {
            var lengthUnreadable = false
            head.fields.forEach { name, value in
                if FieldBytes.equalsIgnoringCase(name, "transfer-encoding") {
                    chunked = true
                } else if clientLength == nil, !lengthUnreadable, FieldBytes.equalsIgnoringCase(name, "content-length") {
                    clientLength = FieldBytes.decimal(value)
                    lengthUnreadable = clientLength == nil
                }
            }
            guard !lengthUnreadable else { return nil }
        }
        return UpstreamRequestHead(
            client: head,
            identity: identity,
            strip: strip,
            withheldCookies: withheldCookies,
            forwardedClaimHeaders: forwardedClaimHeaders,
            newBodyLength: newBodyLength,
            clientLength: clientLength,
            forwarding: forwarding,
            // A body of unknown length goes chunked (see ``write(_:into:)``).
            chunked: chunked,
            closeConnection: closeConnection,
            secretHeader: secretHeader
        )
    }

    /// Writes `head` as the backend gets it.
    ///
    /// One pass over the client's fields, written straight into the bytes the backend gets: this runs for
    /// every forwarded request, so no intermediate header list is built.
    ///
    /// Body framing is never left to chance (request smuggling): the client's `Content-Length` and
    /// `Transfer-Encoding` are removed and the gateway states the framing of what it will send itself —
    /// the new length, the client's validated length written anew as the number it was read as (`0010` goes as
    /// `10`: a backend that reads leading zeros as octal would frame the body otherwise), or lowercase `chunked`
    /// for a body of unknown length — so the backend can only ever read the body the gateway writes, as the body.
    static func write(_ head: UpstreamRequestHead, into bytes: inout ByteBuffer) {
        let client = head.client.fields
        let strip = head.strip
        // Names the client listed in `Connection` are hop-by-hop too (rare: looked for only when the parse pass
        // saw such a list) — but never the framing or the Host, which the gateway decides.
        let connectionListed = client.connectionNamesFields ? Self.namesListedInConnection(client) : []
        // The client's lines are at most what its kept fields take again.
        bytes.reserveCapacity(minimumWritableBytes: head.sizeHint)
        bytes.writeString(head.client.method.rawValue)
        bytes.writeStaticString(" ")
        bytes.writeString(head.client.uri)
        bytes.writeStaticString(" HTTP/1.1\r\n")
        var host: Range<Int>?
        // Cookies to take out: the token's own (when it came in a cookie and is stripped) and the route's
        // withheld ones. Empty for nearly every request, which then copies its `Cookie` lines as they are.
        var removedCookies = head.withheldCookies
        if case .cookie(let name) = strip {
            removedCookies.append(name)
        }
        var cookies: [String] = []
        client.bytes.withUnsafeBytes { lines in
            HTTP1Syntax.forEachCheckedField(lines, from: 0) { name, value in
                if host == nil, FieldBytes.equalsIgnoringCase(name, "host") {
                    host = RequestFields.range(of: value, in: lines)
                } else if FieldBytes.equalsIgnoringCase(name, "content-length") {
                    return
                } else if FieldBytes.equalsIgnoringCase(name, "transfer-encoding") {
                    return
                }
                if Self.isDroppedFromRequest(name) { return }
                // A client's copy of a header the route fills from the token: only the token's value may arrive.
                if !head.forwardedClaimHeaders.isEmpty,
                    head.forwardedClaimHeaders.contains(where: { claimHeader in
                        var claimHeader = claimHeader
                        return claimHeader.withUTF8 { FieldBytes.equalsIgnoringCase(name, UnsafeRawBufferPointer($0)) }
                    })
                {
                    return
                }
                // A client's copy of the upstream's secret field (it may be guessing, or replaying one it saw).
                if let secret = head.secretHeader, secret.nameBytes.withUnsafeBytes({ FieldBytes.equalsIgnoringCase(name, $0) }) { return }
                if !connectionListed.isEmpty,
                    connectionListed.contains(where: { listed in listed.withUnsafeBytes { FieldBytes.equalsIgnoringCase($0, name) } })
                {
                    return
                }
                if !removedCookies.isEmpty, FieldBytes.equalsIgnoringCase(name, "cookie") {
                    cookies.append(String(decoding: value, as: UTF8.self))
                    return
                }
                switch strip {
                case .authorization where FieldBytes.equalsIgnoringCase(name, "authorization"):
                    return
                case .header(var tokenHeader) where tokenHeader.withUTF8 { FieldBytes.equalsIgnoringCase(name, UnsafeRawBufferPointer($0)) }:
                    return
                case .authorization, .header, .cookie, .form, .json, nil:
                    break
                }
                // The client's values were checked where they were read (the HTTP/1.1 parser, nghttp2).
                bytes.writeHTTPFieldLine(name: name, value: value)
            }
        }
        // The gateway's own values were checked when the head was made (``upstreamHead(from:identity:strip:withheldCookies:newBodyLength:forwarding:)``).
        func field(_ name: String, _ value: String) {
            bytes.writeHTTPFieldLine(name: name, value: value)
        }
        func field(_ name: StaticString, _ value: Range<Int>) {
            client.bytes.withUnsafeBytes { lines in
                bytes.writeHTTPFieldLine(
                    name: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount),
                    value: UnsafeRawBufferPointer(rebasing: lines[value])
                )
            }
        }
        if !cookies.isEmpty, let remaining = CookieHeader.removing(removedCookies, from: cookies) {
            field("cookie", remaining)
        }
        // A body of unknown length is chunked even if a length came with it (both are refused before this; the
        // order here is defence in depth: a length next to chunked framing must never be believed).
        if let newBodyLength = head.newBodyLength {
            bytes.writeContentLengthLine(newBodyLength)
        } else if head.chunked {
            field("transfer-encoding", "chunked")
        } else if let clientLength = head.clientLength {
            bytes.writeContentLengthLine(clientLength)
        }
        // An upstream that does not keep connections (`keep_alive: false`): one request per connection, and the
        // backend told so (the client's own `Connection` was dropped above, as hop-by-hop).
        if head.closeConnection {
            field("connection", "close")
        }
        if let identity = head.identity {
            field("x-tokengate-user", identity.subject)
            field("x-tokengate-token-kind", identity.kind.rawValue)
            field("x-tokengate-issued-at", String(identity.issuedAt))
            if let keyID = identity.keyID {
                field("x-tokengate-key-id", keyID)
            }
            // `forward_claims`: the values line up with the route's headers; an absent claim sends no field.
            for (index, value) in identity.forwardedClaims.enumerated() where index < head.forwardedClaimHeaders.count {
                if let value { field(head.forwardedClaimHeaders[index], value) }
            }
        }
        // At the edge the client's own X-Forwarded-* values are not trusted (they were dropped above): the
        // backend learns the address the gateway saw.
        if let address = head.forwarding.clientAddress {
            field("x-forwarded-for", address)
        }
        field("x-forwarded-proto", head.forwarding.scheme)
        if let host {
            field("x-forwarded-host", host)
        }
        field("x-request-id", head.forwarding.requestID)
        if let secret = head.secretHeader {
            secret.nameBytes.withUnsafeBytes { name in
                secret.value.withUnsafeBytes { bytes.writeHTTPFieldLine(name: name, value: $0) }
            }
        }
        bytes.writeStaticString("\r\n")
    }


    /// Whether a client's field never reaches the backend whatever the route: hop-by-hop fields, `Expect`, the
    /// forwarding fields only the gateway may set, identity fields (`x-tokengate-*`), and names with `_`
    /// (dropped as nginx does by default: CGI-style backends map `X_Tokengate_User` and `X-Tokengate-User` to
    /// the same variable, so they could smuggle an identity past the gateway).
    static func isDroppedFromRequest(_ name: UnsafeRawBufferPointer) -> Bool {
        if Self.droppedFromRequest.contains(name) {
            return true
        }
        let prefix = Self.identityHeaderPrefix
        if name.count >= prefix.utf8CodeUnitCount,
            FieldBytes.equalsIgnoringCase(UnsafeRawBufferPointer(rebasing: name[0..<prefix.utf8CodeUnitCount]), prefix)
        {
            return true
        }
        return name.contains(UInt8(ascii: "_"))
    }

    /// ``ProxyFieldRules/hopByHopFieldNames``, ``ProxyFieldRules/forwardingFieldNames`` and `expect` (the gateway answers `100-continue` itself).
    private static let droppedFromRequest = FieldNameSet(ProxyFieldRules.hopByHopFieldNames + ProxyFieldRules.forwardingFieldNames + ["expect"])

    /// The names a client's `Connection` fields list, when they list more than `keep-alive` and `close` (both
    /// hop-by-hop anyway). Never the framing or the Host, which the gateway decides (``ProxyFieldRules/protectedNames``).
    private static func namesListedInConnection(_ fields: RequestFields) -> [[UInt8]] {
        var listed: [[UInt8]] = []
        fields.forEach { name, value in
            guard FieldBytes.equalsIgnoringCase(name, "connection"),
                !FieldBytes.equalsIgnoringCase(value, "keep-alive"), !FieldBytes.equalsIgnoringCase(value, "close")
            else { return }
            for element in FieldBytes.listElements(value)
            where !element.withUnsafeBytes({ FieldBytes.isOne(of: ProxyFieldRules.protectedNames, $0) }) {
                listed.append(element)
            }
        }
        return listed
    }




    /// The connection's part of the request ids the gateway makes up: 60 random bits as 10 characters of
    /// `A–Z a–z 0–9 _ .`. Behind it `-` and the request's number on the connection (up to 9,999 over
    /// HTTP/1.1), or `-s` and the stream id in base 36 (``streamRequestID(connection:stream:)``, up to
    /// 46,655) keep an id within 15 bytes, which Swift stores inline: making one up costs no allocation.
    static func newConnectionID() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.".utf8)
        var bits = UInt64.random(in: 0...UInt64.max)
        var id: [UInt8] = []
        id.reserveCapacity(10)
        for _ in 0..<10 {
            id.append(alphabet[Int(bits & 63)])
            bits >>= 6
        }
        return String(decoding: id, as: UTF8.self)
    }

    /// An HTTP/2 request's made-up id: `<connection>-s` and the stream id in lowercase base 36. In decimal an
    /// id outgrew Swift's inline strings from stream 1,001 on (the 501st request of a connection), and then
    /// cost an allocation per request; in base 36 that happens only past stream 46,655.
    static func streamRequestID(connection: String, stream: Int32) -> String {
        connection + "-s" + String(stream, radix: 36)
    }

    /// The client's request id when it is a sane one (printable, short), so that traces join up.
    static func requestID(from head: ClientRequestHead, generate: () -> String) -> String {
        let given = head.fields.withFirstValue(name: "x-request-id") { value -> String? in
            guard !value.isEmpty, value.count <= 128, value.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
            // The id is logged: one shaped like a token (a client that put its token there) is replaced.
            guard JWTShape.firstRange(in: value.assumingMemoryBound(to: UInt8.self)) == nil else { return nil }
            return String(decoding: value, as: UTF8.self)
        }
        return (given ?? nil) ?? generate()
    }




}

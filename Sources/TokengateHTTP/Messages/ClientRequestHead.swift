//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// What a client connection hands the request logic: the head, body parts, the end with its trailers. Both
/// protocols make these (``HTTP1RequestParser``, ``HTTP2RequestHeadBuilder``).
package typealias ClientRequestPart = HTTPPart<ClientRequestHead, ByteBuffer>

/// A client's request head: the request line's parts as values, the fields as the bytes of their lines
/// (``RequestFields``). The HTTP/2 pseudo-headers arrive here as an HTTP/1.1 request line would: `:method`,
/// `:path`, and `:authority` as the first field, `host`.
package struct ClientRequestHead: Equatable, Sendable {
    package var version: HTTPVersion
    package var method: HTTPMethod
    package var uri: String
    package var fields: RequestFields
    /// The client may send another request on the connection after this one (RFC 9112 §9.3; always over
    /// HTTP/2, where streams end, not connections). Read by the HTTP/1.1 parser with the framing.
    package var isKeepAlive: Bool

    package init(version: HTTPVersion, method: HTTPMethod, uri: String, fields: RequestFields, isKeepAlive: Bool = true) {
        self.version = version
        self.method = method
        self.uri = uri
        self.fields = fields
        self.isKeepAlive = isKeepAlive
    }

    /// The head as NIO's type, for the paths that take one (the token page). Allocates per field.
    package var nioHead: HTTPRequestHead {
        HTTPRequestHead(version: self.version, method: self.method, uri: self.uri, headers: self.fields.headers)
    }
}

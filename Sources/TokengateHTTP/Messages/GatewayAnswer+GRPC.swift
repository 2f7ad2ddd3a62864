//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

// MARK: The same answers in gRPC's words.

extension GatewayAnswer {
    /// A gRPC client reads only `grpc-status`: an HTTP `401` or `403` surfaces as `UNKNOWN` or `UNAVAILABLE`
    /// ("Received http2 header with status: 401"), never as the refusal it is. So a gRPC request (``isGRPC(_:)``)
    /// gets a Trailers-Only answer instead: HTTP `200`, one HEADERS frame that ends the stream, the gRPC status
    /// and the answer's description as `grpc-message`. The codes follow the gRPC status-code guide:
    /// a missing or bad token is `UNAUTHENTICATED` (16), a token or client not allowed is `PERMISSION_DENIED` (7),
    /// a rate limit or a body over the limit `RESOURCE_EXHAUSTED` (8), no route `UNIMPLEMENTED` (12), a backend
    /// down, failing or slow `UNAVAILABLE` (14), anything else `INTERNAL` (13).
    package var grpcStatus: Int {
        switch self.status.code {
        case 401: 16
        case 403: 7
        case 413, 429: 8
        case 404, 405: 12
        case 502, 503, 504: 14
        default: 13
        }
    }

    /// The Trailers-Only head for a gRPC request: to be written with no body and the end right after it (the
    /// HTTP/2 codec then sends a single HEADERS frame with END_STREAM). `WWW-Authenticate` and the added fields
    /// (`Retry-After`, CORS) stay, for clients that read them as metadata.
    package func grpcTrailersOnlyHead(version: HTTPVersion, hsts: String?) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        headers.reserveCapacity(7 + self.addedFields.count)
        headers.add(name: "content-type", value: "application/grpc")
        headers.add(name: "grpc-status", value: String(self.grpcStatus))
        headers.add(name: "grpc-message", value: Self.grpcPercentEncoded(self.description))
        headers.add(name: "cache-control", value: "no-store")
        if let challenge = self.challenge {
            headers.add(name: "www-authenticate", value: challenge)
        }
        if let hsts {
            headers.add(name: "strict-transport-security", value: hsts)
        }
        for field in self.addedFields {
            headers.add(name: field.name, value: field.value)
        }
        return HTTPResponseHead(version: version, status: .ok, headers: headers)
    }

    /// A gRPC request over HTTP/2: `content-type` is `application/grpc`, alone or followed by `+format` or
    /// parameters (gRPC's PROTOCOL-HTTP2). gRPC-Web (`application/grpc-web…`) is not: its clients read HTTP
    /// statuses.
    package static func isGRPC(version: HTTPVersion, contentType: String?) -> Bool {
        guard version.major == 2, let type = contentType else { return false }
        let prefix = "application/grpc"
        guard type.utf8.count >= prefix.utf8.count,
            type.utf8.prefix(prefix.utf8.count).elementsEqual(prefix.utf8, by: { $0 | 0x20 == $1 | 0x20 })
        else { return false }
        let next = type.utf8.dropFirst(prefix.utf8.count).first
        return next == nil || next == UInt8(ascii: "+") || next == UInt8(ascii: ";")
    }

    /// gRPC's `grpc-message` encoding: bytes outside printable ASCII, and `%`, as `%XX`.
    static func grpcPercentEncoded(_ text: String) -> String {
        var encoded = ""
        encoded.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if byte >= 0x20, byte <= 0x7e, byte != UInt8(ascii: "%") {
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let digits = Array("0123456789ABCDEF".unicodeScalars)
                encoded.unicodeScalars.append("%")
                encoded.unicodeScalars.append(digits[Int(byte >> 4)])
                encoded.unicodeScalars.append(digits[Int(byte & 0x0f)])
            }
        }
        return encoded
    }
}

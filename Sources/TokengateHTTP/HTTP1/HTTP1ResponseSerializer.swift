//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// The bytes of one HTTP/1.x response at a time, written into the caller's buffer: the status line and
/// fields, then the body in the framing the head announced.
///
/// This does what NIO's `HTTPResponseEncoder` did on the client side, without its pipeline: the encoder
/// took the head, every body part and the end as separate `NIOAny` writes and produced a buffer for each
/// (three more per chunk of a chunked body), each passing every handler down to the TLS handler. The
/// connection handler now gathers a response's bytes into one buffer and writes that once.
///
/// Framing is decided here and only here, from what the head actually carries — never from a field the
/// caller meant to send but the filter dropped: a `Transfer-Encoding` field is never copied (the body is
/// re-framed), a `Content-Length` is dropped when the status allows no body (1xx, 204, 304), and a body of
/// unknown length is chunked for HTTP/1.1 clients and delimited by the close for HTTP/1.0 ones (the caller
/// must close then: ``closesToDelimitBody``). Responses to `HEAD` keep their fields but write no body.
package struct HTTP1ResponseSerializer {
    package init() {}

    package enum BodyFraming: Equatable {
        /// No body may follow (a `HEAD` request, a status without body): body writes are dropped.
        case none
        /// The head carried `Content-Length`: bytes go as they are.
        case contentLength
        /// `transfer-encoding: chunked` was added: every body part is a chunk, the end the last chunk.
        case chunked
        /// HTTP/1.0 and no length: the body ends when the connection does.
        case untilClose
    }

    package private(set) var framing: BodyFraming = .none

    /// Whether the connection must close after this response for its body to end.
    package var closesToDelimitBody: Bool { self.framing == .untilClose }

    /// Writes a head the gateway built itself (its answers, the token page, the plain listener's refusal).
    package mutating func writeHead(_ head: HTTPResponseHead, requestMethod: HTTPMethod, into buffer: inout ByteBuffer) {
        self.writeHead(version: head.version, status: head.status, requestMethod: requestMethod, into: &buffer) { field in
            for (name, value) in head.headers {
                FieldBytes.withBytes(of: name, value, field)
            }
        }
    }

    /// Writes the backend's head as the client gets it (``ProxyFieldRules/forEachClientResponseField(of:close:hsts:added:_:)``),
    /// each kept field line copied from the bytes it came in: no string or field list is made for it.
    package mutating func writeUpstreamHead(
        _ head: UpstreamResponseHead,
        version: HTTPVersion,
        close: Bool,
        hsts: String?,
        added: [ResponseField] = [],
        requestMethod: HTTPMethod,
        into buffer: inout ByteBuffer
    ) {
        // The kept lines are at most the backend's, plus HSTS, `connection: close` and the framing.
        buffer.reserveCapacity(minimumWritableBytes: head.fieldBytes + 160)
        self.writeHead(version: version, status: head.status, requestMethod: requestMethod, into: &buffer) { field in
            ProxyFieldRules.forEachClientResponseField(of: head, close: close, hsts: hsts, added: added, field)
        }
    }

    private mutating func writeHead(
        version: HTTPVersion,
        status: HTTPResponseStatus,
        requestMethod: HTTPMethod,
        into buffer: inout ByteBuffer,
        fields: ((UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) -> Void
    ) {
        let mayHaveBody = status.mayHaveResponseBody
        if version == .http1_1, status == .ok {
            buffer.writeStaticString("HTTP/1.1 200 OK\r\n")
        } else {
            buffer.writeStaticString("HTTP/")
            buffer.writeString(String(version.major))
            buffer.writeStaticString(".")
            buffer.writeString(String(version.minor))
            buffer.writeStaticString(" ")
            buffer.writeString(String(status.code))
            buffer.writeStaticString(" ")
            buffer.writeString(status.reasonPhrase)
            buffer.writeStaticString("\r\n")
        }
        var hasContentLength = false
        fields { name, value in
            if FieldBytes.equalsIgnoringCase(name, "transfer-encoding") {
                return
            }
            if FieldBytes.equalsIgnoringCase(name, "content-length") {
                guard mayHaveBody else { return }
                hasContentLength = true
            }
            buffer.writeHTTPFieldLine(name: name, value: value)
        }
        let framing: BodyFraming
        if !mayHaveBody {
            framing = .none
        } else if hasContentLength {
            framing = .contentLength
        } else if version.major == 1 && version.minor >= 1 {
            buffer.writeStaticString("transfer-encoding: chunked\r\n")
            framing = .chunked
        } else {
            framing = .untilClose
        }
        buffer.writeStaticString("\r\n")
        // A response to HEAD announces the body a GET would get, and has none.
        self.framing = requestMethod == .HEAD ? .none : framing
    }

    /// Appends a body part in the head's framing (nothing when no body may follow).
    package func writeBody(_ body: ByteBuffer, into buffer: inout ByteBuffer) {
        guard body.readableBytes > 0, self.framing != .none else {
            return  // An empty chunk would end a chunked body.
        }
        if self.framing == .chunked {
            buffer.writeChunkSizeLine(body.readableBytes)
            buffer.writeImmutableBuffer(body)
            buffer.writeStaticString("\r\n")
        } else {
            buffer.writeImmutableBuffer(body)
        }
    }

    /// Appends the end of the body (the last chunk and any trailers for a chunked body) and gets ready for
    /// the next response.
    package mutating func writeEnd(_ trailers: HTTPHeaders?, into buffer: inout ByteBuffer) {
        if self.framing == .chunked {
            buffer.writeStaticString("0\r\n")
            for (name, value) in trailers ?? [:] where !ProxyFieldRules.isForbiddenTrailer(name) {
                buffer.writeHTTPFieldLine(name: name, value: value)
            }
            buffer.writeStaticString("\r\n")
        }
        self.framing = .none
    }

    /// Whether ``writeEnd(_:into:)`` writes anything (the end of a chunked body); otherwise ``reset()`` will do.
    package var endHasBytes: Bool { self.framing == .chunked }

    /// Gets ready for the next response when the end writes nothing.
    package mutating func reset() {
        self.framing = .none
    }
}

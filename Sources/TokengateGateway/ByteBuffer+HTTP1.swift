//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// The pieces of HTTP/1.1 syntax the gateway writes itself, for both hops: field lines (responses to
/// clients, request heads to backends) and chunk framing (chunked bodies either way).
extension ByteBuffer {
    /// Body parts up to this size are copied next to their framing into one buffer; larger ones are written as
    /// buffers of their own, uncopied.
    static let http1CopyLimit = 4096

    /// `name: value` and its CRLF. The caller vouches that neither can end the line: values come from a parser
    /// that refused CR, LF and NUL, or are checked where they are made (``RequestRewriter``).
    mutating func writeHTTPFieldLine(name: String, value: String) {
        self.writeString(name)
        self.writeStaticString(": ")
        self.writeString(value)
        self.writeStaticString("\r\n")
    }

    /// A chunk's size line (hexadecimal, no extensions). An empty chunk would end the body: callers never
    /// frame one.
    mutating func writeChunkSizeLine(_ length: Int) {
        self.writeString(String(length, radix: 16))
        self.writeStaticString("\r\n")
    }
}

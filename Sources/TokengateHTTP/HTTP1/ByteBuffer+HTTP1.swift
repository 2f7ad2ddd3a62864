//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// The pieces of HTTP/1.1 syntax the gateway writes itself, for both hops: field lines (responses to
/// clients, request heads to backends) and chunk framing (chunked bodies either way); and in-place access to
/// the blocks its parsers read.
extension ByteBuffer {
    /// `withUnsafeReadableBytes` for a parse whose only error is an ``HTTP1ParseFailure`` (NIO's method
    /// rethrows untyped errors).
    package func withHTTP1Bytes<Result>(
        _ body: (UnsafeRawBufferPointer) throws(HTTP1ParseFailure) -> Result
    ) throws(HTTP1ParseFailure) -> Result {
        let outcome: Swift.Result<Result, HTTP1ParseFailure> = self.withUnsafeReadableBytes { bytes in
            Swift.Result { () throws(HTTP1ParseFailure) -> Result in try body(bytes) }
        }
        return try outcome.get()
    }

    /// Body parts up to this size are copied next to their framing into one buffer; larger ones are written as
    /// buffers of their own, uncopied.
    package static let http1CopyLimit = 4096

    /// `name: value` and its CRLF. The caller vouches that neither can end the line: values come from a parser
    /// that refused CR, LF and NUL, or are checked where they are made (``RequestRewriter``).
    ///
    /// One capacity check and one copy per part into the buffer's memory, rather than four `writeString`s:
    /// every head on both hops is written field by field, and each `ByteBuffer` write pays for its own
    /// bounds, capacity and exclusivity checks.
    package mutating func writeHTTPFieldLine(name: String, value: String) {
        FieldBytes.withBytes(of: name, value) { name, value in self.writeHTTPFieldLine(name: name, value: value) }
    }

    /// `name: value` and its CRLF, from raw bytes (a backend's fields, forwarded as they came).
    package mutating func writeHTTPFieldLine(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let length = name.count + value.count + 4
        self.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { target in
            var position = 0
            func append(_ bytes: UnsafeRawBufferPointer) {
                UnsafeMutableRawBufferPointer(rebasing: target[position..<(position + bytes.count)]).copyMemory(from: bytes)
                position += bytes.count
            }
            append(name)
            target[position] = UInt8(ascii: ":")
            target[position + 1] = UInt8(ascii: " ")
            position += 2
            append(value)
            target[position] = UInt8(ascii: "\r")
            target[position + 1] = UInt8(ascii: "\n")
            return length
        }
    }

    /// `content-length: ` and `length` in decimal (no leading zeros), with its CRLF: written digit by digit into
    /// the buffer, with no `String` in between. `length` is not negative (a body's size).
    package mutating func writeContentLengthLine(_ length: Int) {
        precondition(length >= 0, "a negative body length")
        var digits = 1
        var rest = length / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        self.writeStaticString("content-length: ")
        self.writeWithUnsafeMutableBytes(minimumWritableBytes: digits + 2) { target in
            var value = length
            for index in stride(from: digits - 1, through: 0, by: -1) {
                target[index] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            }
            target[digits] = UInt8(ascii: "\r")
            target[digits + 1] = UInt8(ascii: "\n")
            return digits + 2
        }
    }

    /// A chunk's size line (hexadecimal, no extensions). An empty chunk would end the body: callers never
    /// frame one.
    package mutating func writeChunkSizeLine(_ length: Int) {
        self.writeString(String(length, radix: 16))
        self.writeStaticString("\r\n")
    }
}

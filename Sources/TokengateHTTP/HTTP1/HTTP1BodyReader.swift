//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// The body of one HTTP/1.1 message once its head has chosen the framing: a length, chunks with an optional
/// trailer section, or (responses only) everything until the close. A pure state machine shared by both
/// parsers; the head and the choice of framing stay theirs, because requests and responses differ there.
///
/// Body bytes are handed on as slices of the buffers read, without a copy; only a chunk-size line or a
/// trailer section split across reads is gathered (in the parser's ``HTTP1LineReader``).
package struct HTTP1BodyReader {
    package enum Framing: Equatable {
        case length(Int)
        case chunked
        /// Until the peer closes: responses without a length only.
        case untilClose
    }

    package struct Limits {
        /// A chunk-size line with its extensions.
        package var maxChunkLineBytes = 4096
        package var maxTrailerBytes: Int
        package var maxTrailerFields: Int

        package init(maxChunkLineBytes: Int = 4096, maxTrailerBytes: Int, maxTrailerFields: Int) {
            self.maxChunkLineBytes = maxChunkLineBytes
            self.maxTrailerBytes = maxTrailerBytes
            self.maxTrailerFields = maxTrailerFields
        }
    }

    package enum Part {
        case body(ByteBuffer)
        case end(HTTPHeaders?)
    }

    private enum State {
        case fixed(remaining: Int)
        case chunkSizeLine
        case chunkData(remaining: Int)
        /// The CRLF after a chunk's data.
        case chunkDataEnd
        case trailers
        case untilClose
        /// Complete: ``next(from:lines:limits:)`` reports `.end` once, then nothing.
        case ended(HTTPHeaders?)
        case done
    }

    private var state: State

    package init(_ framing: Framing) {
        switch framing {
        case .length(let length): self.state = length == 0 ? .ended(nil) : .fixed(remaining: length)
        case .chunked: self.state = .chunkSizeLine
        case .untilClose: self.state = .untilClose
        }
    }

    /// The next part in `buffer`, consuming the bytes it used; `nil` when more bytes are needed (or after
    /// `.end`). Never consumes a byte beyond the body's end: what follows is the next message's.
    package mutating func next(from buffer: inout ByteBuffer, lines: inout HTTP1LineReader, limits: Limits) throws(HTTP1ParseFailure) -> Part? {
        while true {
            switch self.state {
            case .done:
                return nil
            case .ended(let trailers):
                self.state = .done
                return .end(trailers)
            case .fixed(let remaining):
                guard buffer.readableBytes > 0 else { return nil }
                let count = min(remaining, buffer.readableBytes)
                let slice = buffer.readSlice(length: count)!
                self.state = count == remaining ? .ended(nil) : .fixed(remaining: remaining - count)
                return .body(slice)
            case .chunkSizeLine:
                let checked = lines.partial.count
                guard let line = try lines.line(from: &buffer, limit: limits.maxChunkLineBytes, what: "chunk size line") else {
                    // A line without its end yet: what arrived may already be wrong.
                    try HTTP1Syntax.checkChunkSizeLineSoFar(lines.partial, newFrom: checked)
                    return nil
                }
                let size = try HTTP1Syntax.chunkSize(line)
                self.state = size == 0 ? .trailers : .chunkData(remaining: size)
            case .chunkData(let remaining):
                guard buffer.readableBytes > 0 else { return nil }
                let count = min(remaining, buffer.readableBytes)
                let slice = buffer.readSlice(length: count)!
                self.state = count == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - count)
                return .body(slice)
            case .chunkDataEnd:
                guard let line = try lines.line(from: &buffer, limit: 2, what: "chunk end") else {
                    return nil
                }
                guard line.isEmpty else {
                    throw .malformed("chunk data longer than its size")
                }
                self.state = .chunkSizeLine
            case .trailers:
                guard let block = try lines.block(from: &buffer, startingWithLine: false, limit: limits.maxTrailerBytes) else {
                    return nil
                }
                let trailers = try block.withHTTP1Bytes { bytes throws(HTTP1ParseFailure) in
                    try HTTP1Syntax.fields(bytes, from: 0, maxFields: limits.maxTrailerFields)
                }
                self.state = .ended(trailers.isEmpty ? nil : trailers)
            case .untilClose:
                guard buffer.readableBytes > 0 else { return nil }
                return .body(buffer.readSlice(length: buffer.readableBytes)!)
            }
        }
    }

    /// The peer closed the connection: the end of a body that runs until the close, or `truncated`.
    package mutating func connectionClosed() throws(HTTP1ParseFailure) -> Part? {
        switch self.state {
        case .untilClose:
            self.state = .done
            return .end(nil)
        case .ended(let trailers):
            self.state = .done
            return .end(trailers)
        case .done:
            return nil
        case .fixed, .chunkSizeLine, .chunkData, .chunkDataEnd, .trailers:
            throw .truncated
        }
    }
}

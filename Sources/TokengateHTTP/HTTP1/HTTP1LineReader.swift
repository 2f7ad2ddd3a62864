//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// Takes the line-shaped parts of an HTTP/1.1 message — a head, a chunk-size line, a trailer section — out of
/// the reads they arrive in, gathering only what a read split. Shared by both parsers; holds nothing between
/// messages (``partial`` is empty whenever a part was returned).
///
/// A limit is checked while gathering, so a peer that never ends a line cannot make the gateway buffer more
/// than the limit plus one read.
package struct HTTP1LineReader {
    package init() {}

    /// Bytes of a line or block that a read split; empty otherwise.
    package private(set) var partial: [UInt8] = []

    package mutating func reset() {
        self.partial.removeAll(keepingCapacity: true)
    }

    /// One CRLF-terminated line without its CRLF, from ``partial`` and then `buffer`.
    package mutating func line(from buffer: inout ByteBuffer, limit: Int, what: String) throws(HTTP1ParseFailure) -> [UInt8]? {
        let found: Int? = buffer.withUnsafeReadableBytes { bytes in
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                if byte == 0x0A {
                    return index
                }
                index += 1
            }
            return nil
        }
        guard let newline = found else {
            self.partial += buffer.readBytes(length: buffer.readableBytes)!
            guard self.partial.count <= limit + 1 else { throw .tooLarge(what) }
            return nil
        }
        self.partial += buffer.readBytes(length: newline + 1)!
        // Released, not kept, as in ``block(from:startingWithLine:limit:)``: a client's 4 KiB chunk extension
        // would otherwise stay held by its connection while it idles.
        defer { self.partial = [] }
        guard self.partial.count >= 2, self.partial[self.partial.count - 2] == 0x0D else {
            throw .malformed("a bare LF in the \(what)")
        }
        let line = Array(self.partial[0..<(self.partial.count - 2)])
        guard line.count <= limit else { throw .tooLarge(what) }
        guard !line.contains(0x0D), !line.contains(0x0A) else { throw .malformed("a bare CR in the \(what)") }
        return line
    }

    /// A block of lines ending with an empty line (a head, or a trailer section), with all its line ends;
    /// `nil` until it is complete. Bare CR and LF are refused here, once, for the whole block. On
    /// `tooLarge` the bytes gathered stay in ``partial`` for the caller to look at. A block that came whole
    /// in one read is a slice of that read's buffer, not a copy.
    package mutating func block(from buffer: inout ByteBuffer, startingWithLine: Bool, limit: Int) throws(HTTP1ParseFailure) -> ByteBuffer? {
        if self.partial.isEmpty, let block = Self.wholeBlock(in: &buffer, startingWithLine: startingWithLine, limit: limit) {
            try block.withHTTP1Bytes { bytes throws(HTTP1ParseFailure) in try HTTP1Syntax.checkLineEnds(bytes) }
            return block
        }
        // Where the search resumes: a CRLFCRLF may straddle the previous read.
        let resumeAt = max(0, self.partial.count - 3)
        self.partial += buffer.readableBytesView
        let end: Int? = {
            // A trailer section may be just the empty line.
            if !startingWithLine, self.partial.count >= 2, self.partial[0] == 0x0D, self.partial[1] == 0x0A {
                return 2
            }
            var index = resumeAt
            while index + 3 < self.partial.count {
                if self.partial[index] == 0x0D, self.partial[index + 1] == 0x0A, self.partial[index + 2] == 0x0D,
                    self.partial[index + 3] == 0x0A
                {
                    return index + 4
                }
                index += 1
            }
            return nil
        }()
        guard let end else {
            // Nothing consumed beyond what is kept in `partial`. A line end that is already wrong fails now
            // rather than when a block end arrives that never will (a client ending lines with LF alone).
            try Self.checkLineEndsSoFar(self.partial, from: resumeAt)
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            guard self.partial.count <= limit else { throw .tooLarge("head or trailer section") }
            return nil
        }
        guard end <= limit else { throw .tooLarge("head or trailer section") }
        // Give back what belongs to the body: `partial` held bytes of earlier reads, so count from its end.
        let unused = self.partial.count - end
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes - unused)
        let block = ByteBuffer(bytes: self.partial[0..<end])
        // Released, not kept: a connection that once had a split head should not hold its size while idle.
        self.partial = []
        try block.withHTTP1Bytes { bytes throws(HTTP1ParseFailure) in try HTTP1Syntax.checkLineEnds(bytes) }
        return block
    }

    /// Every LF from `start` on follows a CR, every CR is followed by an LF where the next byte is there, and
    /// there is no NUL (no line of a head may hold one, so a peer that sends one is refused at once).
    private static func checkLineEndsSoFar(_ bytes: [UInt8], from start: Int) throws(HTTP1ParseFailure) {
        for index in start..<bytes.count {
            switch bytes[index] {
            case 0x0A where index == 0 || bytes[index - 1] != 0x0D: throw .malformed("a bare LF")
            case 0x0D where index + 1 < bytes.count && bytes[index + 1] != 0x0A: throw .malformed("a bare CR")
            case 0: throw .malformed("a NUL byte")
            default: continue
            }
        }
    }

    /// The common case: a whole block at the start of one read, taken without gathering.
    private static func wholeBlock(in buffer: inout ByteBuffer, startingWithLine: Bool, limit: Int) -> ByteBuffer? {
        let end: Int? = buffer.withUnsafeReadableBytes { bytes in
            if !startingWithLine, bytes.count >= 2, bytes[0] == 0x0D, bytes[1] == 0x0A {
                return 2
            }
            // From LF to LF (`memchr`): a head has a few lines, so a few jumps instead of a test per byte.
            var from = 3
            while let lf = HTTP1Syntax.find(0x0A, in: bytes, from: from, to: min(bytes.count, limit)) {
                if bytes[lf - 3] == 0x0D, bytes[lf - 2] == 0x0A, bytes[lf - 1] == 0x0D {
                    return lf + 1
                }
                from = lf + 1
            }
            return nil
        }
        guard let end else { return nil }
        return buffer.readSlice(length: end)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOHTTP1

/// Why an HTTP/1.1 message from a peer was refused: the client's request (``HTTP1RequestParser``) or a
/// backend's response (``HTTP1ResponseParser``). The texts name the rule broken and never quote the peer's
/// bytes, so they may go into logs and into the client's error answer.
package enum HTTP1ParseFailure: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    case tooLarge(String)
    /// The request target alone is over its limit (414 rather than 431).
    case uriTooLong
    /// Bytes arrived while no response was expected.
    case unsolicited
    /// The connection closed before the message was complete.
    case truncated

    package var description: String {
        switch self {
        case .malformed(let what): "malformed message: \(what)"
        case .tooLarge(let what): "message too large: \(what)"
        case .uriTooLong: "the request target is too long"
        case .unsolicited: "bytes from the backend with no request outstanding"
        case .truncated: "the connection closed before the message was complete"
        }
    }
}

/// The syntax rules both HTTP/1.1 parsers share, pure functions of the bytes of one block or line: field
/// lines, lengths, chunk sizes and extensions, line ends. Everything here refuses rather than guesses: a
/// peer and the gateway must never disagree on where a message ends (RFC 9112 §6.3, §11.2).
///
/// Blocks (heads, trailer sections) are read in place, as the raw bytes of the buffer they arrived in: no
/// copy into an array, and no bounds check per byte on the scans every head goes through.
package enum HTTP1Syntax {
    /// Field lines from `start` up to the empty line that ends `block`, as strings (trailer sections).
    package static func fields(_ block: UnsafeRawBufferPointer, from start: Int, maxFields: Int) throws(HTTP1ParseFailure) -> HTTPHeaders {
        // Sized once: at most one field per line end after `start` (HTTPHeaders would grow its storage field by field).
        var fields: [(String, String)] = []
        fields.reserveCapacity(min(Self.lineEnds(in: block, from: start), maxFields + 1))
        try Self.forEachField(block, from: start, maxFields: maxFields) { name, value throws(HTTP1ParseFailure) in
            fields.append((Self.string(block, name), Self.string(block, value)))
        }
        return HTTPHeaders(fields)
    }

    /// Checks the field lines from `start` up to the empty line that ends `block` — `token ":" OWS value OWS
    /// CRLF` — and gives each field's name and value (without the whitespace around it) to `body`, in order.
    /// Returns how many fields there were.
    @discardableResult
    package static func forEachField(
        _ block: UnsafeRawBufferPointer,
        from start: Int,
        maxFields: Int,
        _ body: (_ name: Range<Int>, _ value: Range<Int>) throws(HTTP1ParseFailure) -> Void
    ) throws(HTTP1ParseFailure) -> Int {
        var position = start
        var count = 0
        while true {
            guard let end = Self.lineEnd(block, from: position) else { throw .malformed("a field line without CRLF") }
            if end == position { return count }  // The empty line.
            count += 1
            guard count <= maxFields else { throw .tooLarge("too many fields") }
            var colon = position
            while colon < end, Self.isTokenByte(block[colon]) { colon += 1 }
            guard colon > position, colon < end, block[colon] == UInt8(ascii: ":") else {
                // Also an obs-fold line (starting with SP or HTAB) or whitespace before the colon.
                throw .malformed("a field line that is not name: value")
            }
            let value = Self.trimmedValue(block, colon + 1..<end)
            // Without an exit per byte, so the compiler can vectorize the scan of long values (tokens).
            var control: UInt8 = 0
            for index in value {
                let byte = block[index]
                control |= ((byte < 0x20 && byte != 0x09) || byte == 0x7F) ? 1 : 0
            }
            guard control == 0 else { throw .malformed("control bytes in a field value") }
            try body(position..<colon, value)
            position = end + 2
        }
    }

    /// The field lines of a block that ``forEachField(_:from:maxFields:_:)`` accepted, walked again without
    /// its checks (``UpstreamResponseHead`` and ``RequestFields`` keep such lines): every line has its CRLF and a colon after a
    /// name of token bytes, which holds no colon. A block that breaks this ends the walk; it never traps.
    package static func forEachCheckedField(
        _ block: UnsafeRawBufferPointer,
        from start: Int,
        _ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Void
    ) {
        var position = start
        while let lineFeed = Self.find(0x0A, in: block, from: position, to: block.count), lineFeed > position + 1 {
            let end = lineFeed - 1
            guard let colon = Self.find(UInt8(ascii: ":"), in: block, from: position, to: end) else { return }
            let value = Self.trimmedValue(block, colon + 1..<end)
            body(UnsafeRawBufferPointer(rebasing: block[position..<colon]), UnsafeRawBufferPointer(rebasing: block[value]))
            position = lineFeed + 1
        }
    }

    /// `range` without the optional whitespace (SP, HTAB) at either end.
    @inline(__always)
    private static func trimmedValue(_ block: UnsafeRawBufferPointer, _ range: Range<Int>) -> Range<Int> {
        var valueStart = range.lowerBound
        var valueEnd = range.upperBound
        while valueStart < valueEnd, block[valueStart] == 0x20 || block[valueStart] == 0x09 { valueStart += 1 }
        while valueEnd > valueStart, block[valueEnd - 1] == 0x20 || block[valueEnd - 1] == 0x09 { valueEnd -= 1 }
        return valueStart..<valueEnd
    }

    /// The bytes of `range` as a string (field names and values, targets, reason phrases: checked already).
    package static func string(_ block: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: block[range]).assumingMemoryBound(to: UInt8.self), as: UTF8.self)
    }

    package static func lineEnds(in block: UnsafeRawBufferPointer, from start: Int) -> Int {
        var count = 0
        var index = start
        while index < block.count, let found = Self.find(0x0A, in: block, from: index, to: block.count) {
            count += 1
            index = found + 1
        }
        return count
    }

    /// The first index of `byte` in `block[start..<end]` (`memchr`: the C library's vectorized search).
    @inline(__always)
    package static func find(_ byte: UInt8, in block: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int? {
        guard start < end, let base = block.baseAddress else { return nil }
        guard let found = memchr(base + start, Int32(byte), end - start) else { return nil }
        return base.distance(to: UnsafeRawPointer(found))
    }

    /// RFC 9110 tchar.
    package static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// What a message's fields say about its framing and its connection, read in one pass for both parsers;
    /// each parser then decides with its own rules (a request and a response differ in what no length means).
    package struct FramingFields {
        package init() {}

        package var transferEncodings = 0
        /// The (last) `Transfer-Encoding` is exactly `chunked`; with more than one the message is refused.
        package var chunked = false
        package var lengths = 0
        package var length = 0
        /// `Connection` lists `close` / `keep-alive` (RFC 9112 §9.3).
        package var close = false
        package var keepAlive = false
        /// A `Connection` field says more than just `keep-alive` or `close`: it may name other fields, which
        /// are hop-by-hop too (the common values need no split of the list).
        package var connectionNamesFields = false

        /// Takes one field into account, from its bytes as they arrived.
        package mutating func add(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws(HTTP1ParseFailure) {
            if FieldBytes.equalsIgnoringCase(name, "connection") {
                self.close = self.close || FieldBytes.listContains(value, token: "close")
                self.keepAlive = self.keepAlive || FieldBytes.listContains(value, token: "keep-alive")
                self.connectionNamesFields = self.connectionNamesFields
                    || !(FieldBytes.equalsIgnoringCase(value, "keep-alive") || FieldBytes.equalsIgnoringCase(value, "close"))
            } else if FieldBytes.equalsIgnoringCase(name, "transfer-encoding") {
                self.transferEncodings += 1
                self.chunked = FieldBytes.equalsIgnoringCase(value, "chunked")
            } else if FieldBytes.equalsIgnoringCase(name, "content-length") {
                self.lengths += 1
                guard let parsed = FieldBytes.decimal(value) else {
                    throw .malformed("Content-Length is not a number")
                }
                self.length = parsed
            }
        }
    }

    /// `1*HEXDIG [ chunk-ext ]` (extensions are ignored); at most 15 hex digits, so the size fits an `Int`.
    package static func chunkSize(_ line: [UInt8]) throws(HTTP1ParseFailure) -> Int {
        var size = 0
        var digits = 0
        for byte in line {
            let value: Int
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = Int(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = Int(byte - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = Int(byte - UInt8(ascii: "A")) + 10
            case UInt8(ascii: ";"), UInt8(ascii: " "), 0x09:
                guard digits > 0, Self.isChunkExtensions(line[digits...]) else {
                    throw .malformed("chunk size line")
                }
                return size
            default:
                throw .malformed("chunk size line")
            }
            digits += 1
            guard digits <= 15 else { throw .tooLarge("chunk size") }
            size = size * 16 + value
        }
        guard digits > 0 else { throw .malformed("chunk size line") }
        return size
    }

    /// The bytes of a chunk-size line that arrived so far, still without their LF (`line[checked...]` are
    /// the new ones): refused as soon as no ending could make them a valid line, instead of waiting for an
    /// LF or for the line's limit while the request is held open. Looser than ``chunkSize(_:)`` (every prefix
    /// of a line it accepts passes), which still judges the whole line; only the new bytes are looked at, so a
    /// line dribbled a byte per read costs no rescans.
    package static func checkChunkSizeLineSoFar(_ line: [UInt8], newFrom checked: Int) throws(HTTP1ParseFailure) {
        var digits = 0
        while digits < line.count, digits <= 15, Self.isHexDigit(line[digits]) { digits += 1 }
        guard digits <= 15 else { throw .tooLarge("chunk size") }
        guard digits < line.count else { return }
        guard digits > 0 else { throw .malformed("chunk size line") }
        // From the last byte checked before: a CR there was allowed only as the last byte.
        for index in max(checked - 1, digits)..<line.count {
            let byte = line[index]
            if byte == 0x0D {
                guard index == line.count - 1 else { throw .malformed("a bare CR in the chunk size line") }
            } else if index == digits {
                // After the size only extensions may follow: `;`, or whitespace before one.
                guard byte == UInt8(ascii: ";") || byte == 0x20 || byte == 0x09 else { throw .malformed("chunk size line") }
            } else {
                // Extension names, values and quoted strings: no control bytes but HTAB.
                guard byte == 0x09 || (byte >= 0x20 && byte != 0x7F) else { throw .malformed("chunk size line") }
            }
        }
    }

    package static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }

    /// `*( BWS ";" name [ "=" ( token / quoted-string ) ] )`: RFC 9112 §7.1.1 without the optional whitespace
    /// after `;` and around `=`, which llhttp refuses too. Extensions are ignored, but never let through loosely:
    /// whitespace must lead to a `;` (the grammar has none at the end of the line, and llhttp refuses `5 `).
    package static func isChunkExtensions(_ bytes: ArraySlice<UInt8>) -> Bool {
        var index = bytes.startIndex
        func skipWhitespace() {
            while index < bytes.endIndex, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 }
        }
        func token() -> Bool {
            let start = index
            while index < bytes.endIndex, Self.isTokenByte(bytes[index]) { index += 1 }
            return index > start
        }
        while true {
            if index == bytes.endIndex { return true }
            skipWhitespace()
            guard index < bytes.endIndex, bytes[index] == UInt8(ascii: ";") else { return false }
            index += 1
            guard token() else { return false }
            guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "=") else { continue }
            index += 1
            if index < bytes.endIndex, bytes[index] == UInt8(ascii: "\"") {
                index += 1
                var closed = false
                while index < bytes.endIndex {
                    let byte = bytes[index]
                    index += 1
                    if byte == UInt8(ascii: "\"") {
                        closed = true
                        break
                    }
                    if byte == UInt8(ascii: "\\") {
                        guard index < bytes.endIndex else { return false }
                        index += 1
                        continue
                    }
                    guard byte == 0x09 || (byte >= 0x20 && byte != 0x7F) else { return false }
                }
                guard closed else { return false }
            } else if !token() {
                return false
            }
        }
    }

    /// The index of the CR of the first CRLF at or after `start`; a bare CR or LF is an error, so callers
    /// see only well-formed line ends. `nil` when the block has no further line end.
    package static func lineEnd(_ block: UnsafeRawBufferPointer, from start: Int) -> Int? {
        var index = start
        // A CR in the last byte has no LF after it: search up to the one before.
        while let cr = Self.find(0x0D, in: block, from: index, to: block.count - 1) {
            if block[cr + 1] == 0x0A { return cr }
            index = cr + 1
        }
        return nil
    }

    /// Every LF of a block follows a CR and every CR precedes an LF; no NUL anywhere. Three `memchr` passes
    /// that stop at a head's few line ends, not a test of every byte; the failure named is the one that comes
    /// first in the block, as a byte-by-byte scan would find it.
    package static func checkLineEnds(_ block: UnsafeRawBufferPointer) throws(HTTP1ParseFailure) {
        let count = block.count
        var bareLF = count
        var index = 0
        while let lf = Self.find(0x0A, in: block, from: index, to: count) {
            if lf == 0 || block[lf - 1] != 0x0D {
                bareLF = lf
                break
            }
            index = lf + 1
        }
        var bareCR = count
        index = 0
        while let cr = Self.find(0x0D, in: block, from: index, to: min(count, bareLF)) {
            if cr + 1 >= count || block[cr + 1] != 0x0A {
                bareCR = cr
                break
            }
            index = cr + 2
        }
        let nul = Self.find(0, in: block, from: 0, to: min(count, bareLF, bareCR)) ?? count
        if nul < count { throw .malformed("a NUL byte") }
        if bareCR < count { throw .malformed("a bare CR") }
        if bareLF < count { throw .malformed("a bare LF") }
    }
}

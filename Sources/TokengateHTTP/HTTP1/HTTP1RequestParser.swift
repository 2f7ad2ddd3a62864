//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// Reads a client's HTTP/1.1 requests off its connection: a pure state machine that takes the bytes the
/// connection delivers and gives back request parts (``next(from:)``), with no I/O of its own.
///
/// It replaces NIO's `HTTPRequestDecoder` (llhttp behind a `ByteToMessageHandler`) so that the connection
/// handler reads its own bytes: one handler less that every read, read-complete and write crosses, no
/// `NIOAny` per part, and a pipelined request simply stays unparsed in its buffer until the one before it is
/// answered (``HTTP1ConnectionHandler``) instead of being decoded and queued.
///
/// **Strict on purpose**, like ``HTTP1ResponseParser``: the gateway and the backend must never disagree on
/// where a request ends, or a body becomes a request the token check never saw (request smuggling). So every
/// framing ambiguity is refused (RFC 9112 §6.3, §11.2): `Transfer-Encoding` other than exactly `chunked`, in
/// an HTTP/1.0 request, twice, or with `Content-Length`; more than one `Content-Length`, or one that is not all
/// digits; obs-fold lines, whitespace before a colon, bare CR or LF, NUL or other control bytes in a field; a
/// request target with spaces, control or non-ASCII bytes; any version but HTTP/1.0 and HTTP/1.1. Empty lines
/// before a request line are skipped (RFC 9112 §2.2), up to ``Limits/maxHeadBytes`` of them: a client
/// cannot keep a connection busy with an endless run of them. A request without either length field has no body.
///
/// Limits are checked while bytes are gathered: the request line and fields together within
/// ``Limits/maxHeadBytes`` (`max_header_bytes`; over it, ``HTTP1ParseFailure/uriTooLong`` when the target
/// alone is over `max_uri_bytes`, `tooLarge` otherwise), at most ``Limits/maxFields`` fields.
package struct HTTP1RequestParser {
    package struct Limits {
        /// The request line and the fields with their line ends.
        package var maxHeadBytes: Int
        /// The request target: decides between 414 and 431 for a head over its limit. A head within its limit
        /// with a longer target is the exchange's to answer (414), as over HTTP/2.
        package var maxURIBytes: Int
        package var maxFields = 256
        /// A chunk-size line with its extensions.
        package var maxChunkLineBytes = 4096

        package init(maxHeadBytes: Int, maxURIBytes: Int) {
            self.maxHeadBytes = maxHeadBytes
            self.maxURIBytes = maxURIBytes
        }
    }

    private enum State {
        /// Waiting for (the rest of) a request head.
        case head
        /// `lastRequest`: the request asked for the connection to close after it (RFC 9112 §9.3).
        case body(HTTP1BodyReader, lastRequest: Bool)
        /// After a request that closes the connection: nothing more is a request.
        case closed
        case failed
    }

    private let limits: Limits
    private let bodyLimits: HTTP1BodyReader.Limits
    private var state: State = .head
    private var lines = HTTP1LineReader()
    /// The request line of the head being gathered was complete and checked already (see
    /// ``checkHeadSoFar()``); with how far the gathered bytes were searched for its end.
    private var requestLineChecked = false
    private var searchedForLineEnd = 0
    /// Bytes of empty lines skipped since the last request head (see the type's overview).
    private var skippedEmptyLineBytes = 0

    /// Between requests, with nothing of the next one gathered.
    package var isAtMessageBoundary: Bool {
        switch self.state {
        case .head: self.lines.partial.isEmpty
        case .closed: true
        case .body, .failed: false
        }
    }

    package init(limits: Limits) {
        self.limits = limits
        self.bodyLimits = HTTP1BodyReader.Limits(
            maxChunkLineBytes: limits.maxChunkLineBytes,
            maxTrailerBytes: limits.maxHeadBytes,
            maxTrailerFields: limits.maxFields
        )
    }

    /// The next request part in `buffer`, consuming the bytes it used; `nil` when more bytes are needed. Bytes
    /// after a request's end are left for the next call. After an error the parser stays failed: the
    /// connection must be answered and closed.
    package mutating func next(from buffer: inout ByteBuffer) throws(HTTP1ParseFailure) -> ClientRequestPart? {
        do {
            return try self.step(from: &buffer)
        } catch {
            self.state = .failed
            self.lines.reset()
            throw error
        }
    }

    private mutating func step(from buffer: inout ByteBuffer) throws(HTTP1ParseFailure) -> ClientRequestPart? {
        while true {
            switch self.state {
            case .failed:
                throw .malformed("the connection already failed")
            case .head:
                guard let block = try self.headBlock(from: &buffer) else {
                    try self.checkHeadSoFar()
                    return nil
                }
                self.requestLineChecked = false
                self.searchedForLineEnd = 0
                // Only empty lines: skipped, the request line is still to come.
                guard var head = try self.head(from: block) else {
                    self.skippedEmptyLineBytes += block.readableBytes
                    guard self.skippedEmptyLineBytes <= self.limits.maxHeadBytes else {
                        throw .tooLarge("empty lines before a request line")
                    }
                    continue
                }
                self.skippedEmptyLineBytes = 0
                let (framing, lastRequest) = try Self.framing(of: head.request.version, head.framing)
                head.request.isKeepAlive = !lastRequest
                self.state = .body(HTTP1BodyReader(framing), lastRequest: lastRequest)
                return .head(head.request)
            case .body(var reader, let lastRequest):
                let part = try reader.next(from: &buffer, lines: &self.lines, limits: self.bodyLimits)
                self.state = .body(reader, lastRequest: lastRequest)
                switch part {
                case nil:
                    return nil
                case .body(let slice):
                    return .body(slice)
                case .end(let trailers):
                    self.state = lastRequest ? .closed : .head
                    return .end(trailers)
                }
            case .closed:
                // As llhttp: the client said this connection ends, so what follows is no request to serve.
                guard buffer.readableBytes == 0 else { throw .malformed("bytes after a request that closes the connection") }
                return nil
            }
        }
    }

    // MARK: The head.

    /// A whole head block when it is there; over the limit, the failure says whether the target is to blame.
    private mutating func headBlock(from buffer: inout ByteBuffer) throws(HTTP1ParseFailure) -> ByteBuffer? {
        do {
            return try self.lines.block(from: &buffer, startingWithLine: true, limit: self.limits.maxHeadBytes)
        } catch .tooLarge {
            throw Self.targetLength(in: self.lines.partial) > self.limits.maxURIBytes ? .uriTooLong : .tooLarge("request head")
        }
    }

    /// The request in a head block and what its fields say about its framing, read in the same pass; `nil`
    /// when the block held only empty lines. The field lines are copied out of the block as they are
    /// (``RequestFields``): the block may be a slice of a read buffer that is lent to other connections.
    private func head(from block: ByteBuffer) throws(HTTP1ParseFailure) -> (request: ClientRequestHead, framing: HTTP1Syntax.FramingFields)? {
        try block.withHTTP1Bytes { bytes throws(HTTP1ParseFailure) in try self.head(from: bytes) }
    }

    private func head(from block: UnsafeRawBufferPointer) throws(HTTP1ParseFailure) -> (request: ClientRequestHead, framing: HTTP1Syntax.FramingFields)? {
        var start = 0
        while start + 1 < block.count, block[start] == 0x0D, block[start + 1] == 0x0A { start += 2 }
        if start == block.count { return nil }
        let line = try Self.requestLine(block, from: start)
        var framing = HTTP1Syntax.FramingFields()
        let count = try HTTP1Syntax.forEachField(block, from: line.fieldsStart, maxFields: self.limits.maxFields) {
            name, value throws(HTTP1ParseFailure) in
            try framing.add(name: UnsafeRawBufferPointer(rebasing: block[name]), value: UnsafeRawBufferPointer(rebasing: block[value]))
        }
        // The block ends with the empty line, which is not a field line.
        let lines = Array(block[line.fieldsStart..<max(line.fieldsStart, block.count - 2)])
        let fields = RequestFields(checkedLines: lines, count: count, connectionNamesFields: framing.connectionNamesFields)
        return (ClientRequestHead(version: line.version, method: line.method, uri: line.target, fields: fields), framing)
    }

    package struct RequestLine {
        package var method: HTTPMethod
        package var target: String
        package var version: HTTPVersion
        /// Offset of the first field line in the block.
        package var fieldsStart: Int
    }

    /// `method SP request-target SP HTTP/1.x CRLF`, single spaces, nothing else on the line.
    package static func requestLine(_ block: UnsafeRawBufferPointer, from start: Int) throws(HTTP1ParseFailure) -> RequestLine {
        guard let end = HTTP1Syntax.lineEnd(block, from: start) else { throw .malformed("no request line") }
        var index = start
        while index < end, HTTP1Syntax.isTokenByte(block[index]) { index += 1 }
        guard index > start, index < end, block[index] == UInt8(ascii: " ") else {
            throw .malformed("the request line's method")
        }
        let methodEnd = index
        index += 1
        let targetStart = index
        // Visible ASCII only: no spaces, no control bytes, nothing a backend might decode another way.
        while index < end, block[index] > 0x20, block[index] < 0x7F { index += 1 }
        guard index > targetStart, index < end, block[index] == UInt8(ascii: " ") else {
            throw .malformed("the request line's target")
        }
        let targetEnd = index
        index += 1
        let method = HTTPMethod(rawValue: HTTP1Syntax.string(block, start..<methodEnd))
        if case .RAW(let name) = method, name != "QUERY" {
            // The methods llhttp knew, as before this parser (`QUERY` is the one `HTTPMethod` has no case for): an
            // unknown one is more likely an attack than an API.
            throw .malformed("an unknown method")
        }
        guard Self.isTargetForm(block[targetStart..<targetEnd], method: method) else {
            throw .malformed("the request line's target")
        }
        guard end - index == 8, block[index] == UInt8(ascii: "H"), block[index + 1] == UInt8(ascii: "T"),
            block[index + 2] == UInt8(ascii: "T"), block[index + 3] == UInt8(ascii: "P"), block[index + 4] == UInt8(ascii: "/"),
            block[index + 6] == UInt8(ascii: ".")
        else {
            throw .malformed("the request line's version")
        }
        guard block[index + 5] == UInt8(ascii: "1"), block[index + 7] == UInt8(ascii: "0") || block[index + 7] == UInt8(ascii: "1") else {
            throw .malformed("unsupported HTTP version")
        }
        return RequestLine(
            method: method,
            target: HTTP1Syntax.string(block, targetStart..<targetEnd),
            version: HTTPVersion(major: 1, minor: block[index + 7] == UInt8(ascii: "1") ? 1 : 0),
            fieldsStart: end + 2
        )
    }

    /// Longer than any method `HTTPMethod` knows (`UNSUBSCRIBE`, 11 bytes): every other one is refused anyway.
    package static let maxMethodBytes = 16

    /// What can be judged of a head that has not ended yet: the method as it arrives, and the whole request
    /// line once it is complete, so that a client whose request line is already wrong is refused now, not at
    /// the header timeout. The line is checked once per head and only new bytes are searched for its end, so
    /// a head dribbled a byte per read costs no rescans.
    private mutating func checkHeadSoFar() throws(HTTP1ParseFailure) {
        let gathered = self.lines.partial
        let start = try Self.checkMethodSoFar(gathered)
        guard !self.requestLineChecked else { return }
        let from = max(start, self.searchedForLineEnd)
        self.searchedForLineEnd = gathered.count
        // Line ends were checked as they came (a LF always follows a CR here), so a LF ends the line.
        guard from < gathered.count, gathered[from...].contains(0x0A) else { return }
        self.requestLineChecked = true
        // (`Array.withUnsafeBytes` rethrows untyped: the failure comes out as a value.)
        let failure: HTTP1ParseFailure? = gathered.withUnsafeBytes { bytes in
            do throws(HTTP1ParseFailure) {
                _ = try Self.requestLine(bytes, from: start)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Bytes that cannot begin a request line are refused as they come (a TLS handshake sent to a plain
    /// port, a binary protocol), not only when a head end arrives that never will. Only the method is
    /// checked here: the rest waits for the whole line. The method is bounded too: this runs over the bytes
    /// gathered on every read, so a method growing to the head limit a byte per read would cost quadratic time.
    /// Returns where the request line starts (after the empty lines that may come before it).
    package static func checkMethodSoFar(_ gathered: [UInt8]) throws(HTTP1ParseFailure) -> Int {
        var index = 0
        while index + 1 < gathered.count, gathered[index] == 0x0D, gathered[index + 1] == 0x0A { index += 2 }
        let start = index
        while index < gathered.count, index - start <= Self.maxMethodBytes, HTTP1Syntax.isTokenByte(gathered[index]) {
            index += 1
        }
        if index - start > Self.maxMethodBytes {
            throw .malformed("the request line's method")
        }
        if index < gathered.count, gathered[index] != UInt8(ascii: " "), !(index == start && gathered[index] == 0x0D) {
            throw .malformed("the request line's method")
        }
        return start
    }

    /// RFC 9112 §3.2: origin-form (`/path?query`), asterisk-form (`*`), absolute-form (`scheme://…`), and
    /// authority-form for `CONNECT` only. Anything else is no target a backend should be asked to interpret.
    package static func isTargetForm(_ target: Slice<UnsafeRawBufferPointer>, method: HTTPMethod) -> Bool {
        guard let first = target.first else { return false }
        if first == UInt8(ascii: "/") || method == .CONNECT { return true }
        if first == UInt8(ascii: "*") { return target.count == 1 }
        // scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then "://".
        var index = target.startIndex
        guard (first | 0x20) >= UInt8(ascii: "a"), (first | 0x20) <= UInt8(ascii: "z") else { return false }
        while index < target.endIndex {
            let byte = target[index]
            let isSchemeByte =
                ((byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            guard isSchemeByte else { break }
            index += 1
        }
        return target[index...].starts(with: "://".utf8)
    }

    /// How long the request target is in the bytes of an over-long head, as far as they go: the bytes after
    /// the first space of the request line up to the next space or line end.
    package static func targetLength(in bytes: [UInt8]) -> Int {
        var index = 0
        while index + 1 < bytes.count, bytes[index] == 0x0D, bytes[index + 1] == 0x0A { index += 2 }
        while index < bytes.count, bytes[index] != UInt8(ascii: " "), bytes[index] != 0x0D { index += 1 }
        guard index < bytes.count, bytes[index] == UInt8(ascii: " ") else { return 0 }
        let targetStart = index + 1
        index = targetStart
        while index < bytes.count, bytes[index] != UInt8(ascii: " "), bytes[index] != 0x0D { index += 1 }
        return index - targetStart
    }

    /// RFC 9112 §6.1–6.3 for requests, with every ambiguity refused (no length field: no body), and whether
    /// the request is the connection's last (§9.3: HTTP/1.1 unless `close` is listed, HTTP/1.0 only with
    /// `keep-alive`), read in the same pass over the fields.
    package static func framing(
        of version: HTTPVersion,
        _ fields: HTTP1Syntax.FramingFields
    ) throws(HTTP1ParseFailure) -> (HTTP1BodyReader.Framing, lastRequest: Bool) {
        if fields.transferEncodings > 0 {
            // RFC 9112 §6.1: in HTTP/1.0 it is faulty framing; a server must not guess.
            guard version.minor >= 1 else {
                throw .malformed("Transfer-Encoding in an HTTP/1.0 request")
            }
            guard fields.transferEncodings == 1, fields.chunked else {
                throw .malformed("only the chunked transfer coding is accepted")
            }
            guard fields.lengths == 0 else {
                throw .malformed("both Transfer-Encoding and Content-Length")
            }
            return (.chunked, lastRequest: fields.close)
        }
        if fields.lengths > 1 {
            throw .malformed("more than one Content-Length")
        }
        return (.length(fields.length), lastRequest: fields.close || (version.minor == 0 && !fields.keepAlive))
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// Reads a backend's HTTP/1.1 responses off a pooled connection, one request at a time: a pure state
/// machine that takes bytes and gives back response parts (``next(from:)``), with no I/O of its own.
///
/// It replaces NIO's `HTTPResponseDecoder` on the upstream side because that decoder learns a request's
/// method only by watching `HTTPClientRequestPart` writes go past it, which ties the whole upstream pipeline
/// to NIO's per-part request encoder; the gateway now writes each request head as one buffer it serialized
/// itself (``UpstreamResponseHandler``), and says here what it sent (``requestSent(method:)``).
///
/// **Strict on purpose.** A pooled connection serves many users in turn: if the gateway and the backend ever
/// disagreed on where a response ends, one user's bytes could become the next user's response. So every
/// length ambiguity is an error, never a guess (RFC 9112 §6.3): `Transfer-Encoding` other than exactly
/// `chunked`, `Transfer-Encoding` together with `Content-Length`, more than one `Content-Length`, a length that
/// is not all digits, obs-fold lines, bare LF or CR, control bytes in a field, an over-long head, chunk size or
/// trailer section. A response with neither length nor chunking runs until the backend closes, and such a
/// connection is never reused (``keepsConnection``). A response to `HEAD`, a `204` and a `304` have no body
/// whatever their fields say; interim `1xx` responses are read and dropped (`101` is an error: the gateway
/// never asks to switch protocols). Bytes that arrive with no request outstanding are an error too.
///
/// **A head that announces a body HTTP says is absent ends the connection's use.** A response to `HEAD` with
/// `Transfer-Encoding`, a `Content-Length` above 0 or none at all (its GET would run until the close), and a
/// `204`, `304` or `1xx` with `Transfer-Encoding` or a `Content-Length` above 0 (or two of them): the client gets
/// the response without a body, as HTTP says, but a backend that wrote such a head may also mean to send the body
/// it announced, and if those bytes arrive after the next request went out on the connection they would be read
/// as that request's response — another user's. Whether they come is unknowable, so such a connection is closed
/// instead of pooled (``keepsConnection``). Legal `Content-Length`s on `HEAD` and `304` responses cost a
/// reconnect (a `HEAD` is kept only after `Content-Length: 0`); the check reads the fields the parse pass already
/// gathered, and only for those statuses.
///
/// The body is read by ``HTTP1BodyReader`` and split lines are gathered by ``HTTP1LineReader``, both shared
/// with the client side's ``HTTP1RequestParser``; the status line and the choice of framing are this type's.
package struct HTTP1ResponseParser {
    package struct Limits {
        /// Status line and fields, with their line ends (NIO's decoder allowed 80 KiB as well); the interim
        /// (`1xx`) heads before a final one count towards it too, so that a backend cannot keep a request's
        /// response pending with an endless run of them.
        package var maxHeadBytes = 80 * 1024
        package var maxFields = 1000
        /// A chunk-size line with its extensions.
        package var maxChunkLineBytes = 4096

        package init() {}
    }

    package typealias Failure = HTTP1ParseFailure

    private enum State {
        /// No request outstanding.
        case idle
        /// Waiting for (the rest of) a response head.
        case head
        case body(HTTP1BodyReader)
        case failed
    }

    private let limits: Limits
    private let bodyLimits: HTTP1BodyReader.Limits
    private var state: State = .idle
    private var lines = HTTP1LineReader()
    private var requestWasHEAD = false
    /// Whether the connection may carry another request after this response.
    package private(set) var keepsConnection = true
    /// An interim (`1xx`) response to the request outstanding announced a body (see the type's overview): the
    /// connection is not kept after the final response, whatever that says.
    private var interimAnnouncedBody = false
    /// Bytes of the interim heads dropped for the request outstanding (see ``Limits/maxHeadBytes``).
    private var interimBytes = 0

    package init(limits: Limits = Limits()) {
        self.limits = limits
        self.bodyLimits = HTTP1BodyReader.Limits(
            maxChunkLineBytes: limits.maxChunkLineBytes,
            maxTrailerBytes: limits.maxHeadBytes,
            maxTrailerFields: limits.maxFields
        )
    }

    /// Whether no response is expected or being read.
    package var isIdle: Bool {
        if case .idle = self.state { return true }
        return false
    }

    /// A request went out: its response comes next. Only when ``isIdle``: one request at a time.
    package mutating func requestSent(method: HTTPMethod) {
        assert(self.isIdle, "a request was sent while a response was still expected")
        self.requestWasHEAD = method == .HEAD
        self.interimAnnouncedBody = false
        self.interimBytes = 0
        self.state = .head
        self.lines.reset()
    }

    /// The next response part in `buffer`, consuming the bytes it used; `nil` when more bytes are needed.
    /// After an error the parser stays failed: the connection must be closed.
    package mutating func next(from buffer: inout ByteBuffer) throws(Failure) -> UpstreamResponsePart? {
        do {
            return try self.step(from: &buffer)
        } catch {
            self.state = .failed
            self.lines.reset()
            throw error
        }
    }

    private mutating func step(from buffer: inout ByteBuffer) throws(Failure) -> UpstreamResponsePart? {
        while true {
            switch self.state {
            case .failed:
                throw .malformed("the connection already failed")
            case .idle:
                if buffer.readableBytes > 0 {
                    throw .unsolicited
                }
                return nil
            case .head:
                guard let head = try self.readHead(from: &buffer) else { return nil }
                if let head { return .head(head) }
            // An interim response was dropped: the loop reads the next head.
            case .body(var reader):
                let part = try reader.next(from: &buffer, lines: &self.lines, limits: self.bodyLimits)
                self.state = .body(reader)
                switch part {
                case nil:
                    return nil
                case .body(let slice):
                    return .body(slice)
                case .end(let trailers):
                    self.state = .idle
                    return .end(trailers)
                }
            }
        }
    }

    /// The backend closed the connection: the end of a body that runs until the close, or an error.
    package mutating func connectionClosed() throws(Failure) -> UpstreamResponsePart? {
        switch self.state {
        case .idle, .failed:
            return nil
        case .body(var reader):
            do {
                guard case .end(let trailers) = try reader.connectionClosed() else { return nil }
                self.state = .idle
                return .end(trailers)
            } catch {
                self.state = .failed
                throw error
            }
        case .head:
            self.state = .failed
            throw .truncated
        }
    }

    // MARK: The head.

    /// Reads a whole head when it is there; `.some(nil)` for an interim (1xx) response that was dropped.
    private mutating func readHead(from buffer: inout ByteBuffer) throws(Failure) -> UpstreamResponseHead?? {
        let limit = self.limits.maxHeadBytes - self.interimBytes
        guard let block = try self.lines.block(from: &buffer, startingWithLine: true, limit: limit) else { return nil }
        let maxFields = self.limits.maxFields
        let (line, fieldCount, fields) = try block.withHTTP1Bytes { bytes throws(Failure) in
            let line = try Self.statusLine(bytes)
            var fields = HTTP1Syntax.FramingFields()
            let count = try HTTP1Syntax.forEachField(bytes, from: line.fieldsStart, maxFields: maxFields) {
                name, value throws(Failure) in
                try fields.add(name: UnsafeRawBufferPointer(rebasing: bytes[name]), value: UnsafeRawBufferPointer(rebasing: bytes[value]))
            }
            return (line, count, fields)
        }
        let code = line.status.code
        if code == 101 {
            throw .malformed("101 Switching Protocols, which the gateway never asks for")
        }
        if code < 200 {
            // RFC 9110 §8.6, §6.1: a 1xx has no content and carries neither length nor coding.
            if fields.transferEncodings > 0 || fields.length > 0 || fields.lengths > 1 {
                self.interimAnnouncedBody = true
            }
            self.interimBytes += block.readableBytes
            guard self.interimBytes < self.limits.maxHeadBytes else { throw .tooLarge("interim responses") }
            return .some(nil)  // Interim: the final response follows. State stays `.head`.
        }
        self.state = .body(HTTP1BodyReader(try self.chooseFraming(version: line.version, code: code, fields)))
        return .some(
            UpstreamResponseHead(
                version: line.version,
                status: line.status,
                checkedBlock: block,
                fieldsStart: line.fieldsStart,
                fieldCount: fieldCount,
                connectionNamesFields: fields.connectionNamesFields
            )
        )
    }

    package struct StatusLine {
        var version: HTTPVersion
        var status: HTTPResponseStatus
        /// Offset of the first field line in the block.
        var fieldsStart: Int
    }

    /// `HTTP/1.x SP 3DIGIT [SP reason] CRLF`.
    package static func statusLine(_ block: UnsafeRawBufferPointer) throws(Failure) -> StatusLine {
        guard let end = HTTP1Syntax.lineEnd(block, from: 0) else { throw .malformed("no status line") }
        guard end >= 12, block[0] == UInt8(ascii: "H"), block[1] == UInt8(ascii: "T"), block[2] == UInt8(ascii: "T"),
            block[3] == UInt8(ascii: "P"), block[4] == UInt8(ascii: "/"), block[5] == UInt8(ascii: "1"),
            block[6] == UInt8(ascii: "."),
            block[7] == UInt8(ascii: "0") || block[7] == UInt8(ascii: "1"),
            block[8] == UInt8(ascii: " ")
        else {
            throw .malformed("not an HTTP/1.x status line")
        }
        var code = 0
        for index in 9..<12 {
            let digit = block[index]
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { throw .malformed("status code") }
            code = code * 10 + Int(digit - UInt8(ascii: "0"))
        }
        // RFC 9110 §15: codes outside 100–599 are invalid. Passed on, a `999` (sent by some bot-blocking
        // front ends) is a status HTTP/2 clients and many libraries refuse or misread; it is the backend's fault.
        guard code >= 100, code <= 599 else { throw .malformed("status code") }
        var reason = ""
        if end > 12 {
            guard block[12] == UInt8(ascii: " ") else { throw .malformed("status code") }
            let phrase = block[13..<end]
            guard phrase.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
                throw .malformed("control bytes in the reason phrase")
            }
            reason = HTTP1Syntax.string(block, 13..<end)
        }
        return StatusLine(
            version: HTTPVersion(major: 1, minor: block[7] == UInt8(ascii: "1") ? 1 : 0),
            status: HTTPResponseStatus(statusCode: code, reasonPhrase: reason),
            fieldsStart: end + 2
        )
    }

    /// RFC 9112 §6.3, with every ambiguity refused.
    private mutating func chooseFraming(
        version: HTTPVersion,
        code: UInt,
        _ fields: HTTP1Syntax.FramingFields
    ) throws(Failure) -> HTTP1BodyReader.Framing {
        // RFC 9112 §9.3: HTTP/1.1 persists unless `close` is listed; HTTP/1.0 only if `keep-alive` is.
        // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing: close after it.
        let http10 = version.minor == 0
        self.keepsConnection =
            !fields.close && (!http10 || fields.keepAlive) && !(http10 && fields.transferEncodings > 0)
            && !self.interimAnnouncedBody
        if self.requestWasHEAD || code == 204 || code == 304 {
            // No body whatever the fields say (for HEAD and 304 they describe what a GET would get). One they announce
            // anyway may still come, late: the connection is not reused (see the type's overview). RFC 9110 §8.6
            // allows no `Content-Length` at all on a 204, and a length on HEAD and 304 responses (so above 0 is
            // what counts there, and two of them, whatever their values).
            // `Content-Length: 0` announces nothing that could come late (some frameworks put it on every 204),
            // whatever RFC 9110 §8.6 says a 204 should carry.
            let announcesBody = fields.transferEncodings > 0 || fields.length > 0 || fields.lengths > 1
            // A `HEAD` answer with no length at all says its GET would run until the backend closes: a body it may
            // send anyway has no end the gateway could find, so it is treated as announced.
            let headAnswerWithoutLength = self.requestWasHEAD && code != 204 && code != 304 && fields.lengths == 0
            if announcesBody || headAnswerWithoutLength {
                self.keepsConnection = false
            }
            return .length(0)
        }
        if fields.transferEncodings > 0 {
            guard fields.transferEncodings == 1, fields.chunked else {
                throw .malformed("a Transfer-Encoding other than chunked")
            }
            guard fields.lengths == 0 else {
                throw .malformed("both Transfer-Encoding and Content-Length")
            }
            return .chunked
        }
        if fields.lengths > 1 {
            throw .malformed("more than one Content-Length")
        }
        if fields.lengths == 1 {
            return .length(fields.length)
        }
        self.keepsConnection = false
        return .untilClose
    }
}

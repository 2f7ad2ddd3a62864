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
/// Body bytes are handed on as slices of the buffers read, without a copy; only a head, a chunk-size line or a
/// trailer section split across reads is gathered.
struct HTTP1ResponseParser {
    struct Limits {
        /// Status line and fields, with their line ends (NIO's decoder allowed 80 KiB as well).
        var maxHeadBytes = 80 * 1024
        var maxFields = 1000
        /// A chunk-size line with its extensions.
        var maxChunkLineBytes = 4096
    }

    enum Failure: Error, Equatable, CustomStringConvertible {
        case malformed(String)
        case tooLarge(String)
        /// Bytes arrived while no request was outstanding.
        case unsolicited
        /// The connection closed before the response was complete.
        case truncated

        var description: String {
            switch self {
            case .malformed(let what): "malformed response: \(what)"
            case .tooLarge(let what): "response too large: \(what)"
            case .unsolicited: "bytes from the backend with no request outstanding"
            case .truncated: "the backend closed before the response was complete"
            }
        }
    }

    private enum State {
        /// No request outstanding.
        case idle
        /// Waiting for (the rest of) a response head.
        case head
        case fixedBody(remaining: Int)
        case chunkSizeLine
        case chunkData(remaining: Int)
        /// The CRLF after a chunk's data.
        case chunkDataEnd
        case trailers
        case untilClose
        /// The response ended; ``next(from:)`` reports `.end` and goes idle.
        case ended(HTTPHeaders?)
        case failed
    }

    private let limits: Limits
    private var state: State = .idle
    /// Bytes of a head, chunk-size line or trailer section that a read split; empty otherwise.
    private var partial: [UInt8] = []
    private var requestWasHEAD = false
    /// Whether the connection may carry another request after this response.
    private(set) var keepsConnection = true

    init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Whether no response is expected or being read.
    var isIdle: Bool {
        if case .idle = self.state { return true }
        return false
    }

    /// A request went out: its response comes next. Only when ``isIdle``: one request at a time.
    mutating func requestSent(method: HTTPMethod) {
        assert(self.isIdle, "a request was sent while a response was still expected")
        self.requestWasHEAD = method == .HEAD
        self.state = .head
        self.partial.removeAll(keepingCapacity: true)
    }

    /// The next response part in `buffer`, consuming the bytes it used; `nil` when more bytes are needed.
    /// After an error the parser stays failed: the connection must be closed.
    mutating func next(from buffer: inout ByteBuffer) throws(Failure) -> HTTPClientResponsePart? {
        do {
            return try self.step(from: &buffer)
        } catch {
            self.state = .failed
            self.partial.removeAll()
            throw error
        }
    }

    private mutating func step(from buffer: inout ByteBuffer) throws(Failure) -> HTTPClientResponsePart? {
        while true {
            switch self.state {
            case .failed:
                throw .malformed("the connection already failed")
            case .idle:
                if buffer.readableBytes > 0 {
                    self.state = .failed
                    throw .unsolicited
                }
                return nil
            case .ended(let trailers):
                self.state = .idle
                return .end(trailers)
            case .head:
                guard let head = try self.readHead(from: &buffer) else { return nil }
                if let head { return .head(head) }
            // An interim response was dropped: the loop reads the next head.
            case .fixedBody(let remaining):
                guard buffer.readableBytes > 0 else { return nil }
                let count = min(remaining, buffer.readableBytes)
                let slice = buffer.readSlice(length: count)!
                self.state = count == remaining ? .ended(nil) : .fixedBody(remaining: remaining - count)
                return .body(slice)
            case .chunkSizeLine:
                guard let line = try self.readLine(from: &buffer, limit: self.limits.maxChunkLineBytes, what: "chunk size line") else {
                    return nil
                }
                let size = try Self.chunkSize(line)
                self.state = size == 0 ? .trailers : .chunkData(remaining: size)
            case .chunkData(let remaining):
                guard buffer.readableBytes > 0 else { return nil }
                let count = min(remaining, buffer.readableBytes)
                let slice = buffer.readSlice(length: count)!
                self.state = count == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - count)
                return .body(slice)
            case .chunkDataEnd:
                guard let line = try self.readLine(from: &buffer, limit: 2, what: "chunk end") else {
                    return nil
                }
                guard line.isEmpty else {
                    self.state = .failed
                    throw .malformed("chunk data longer than its size")
                }
                self.state = .chunkSizeLine
            case .trailers:
                guard let block = try self.readBlock(from: &buffer, startingWithLine: false) else { return nil }
                let trailers = try Self.fields(block, from: 0, limits: self.limits)
                self.state = .ended(trailers.isEmpty ? nil : trailers)
            case .untilClose:
                guard buffer.readableBytes > 0 else { return nil }
                return .body(buffer.readSlice(length: buffer.readableBytes)!)
            }
        }
    }

    /// The backend closed the connection: the end of a body that runs until the close, or an error.
    mutating func connectionClosed() throws(Failure) -> HTTPClientResponsePart? {
        switch self.state {
        case .idle, .failed:
            return nil
        case .untilClose:
            self.state = .idle
            return .end(nil)
        case .ended(let trailers):
            self.state = .idle
            return .end(trailers)
        case .head, .fixedBody, .chunkSizeLine, .chunkData, .chunkDataEnd, .trailers:
            self.state = .failed
            throw .truncated
        }
    }

    // MARK: The head.

    /// Reads a whole head when it is there; `.some(nil)` for an interim (1xx) response that was dropped.
    private mutating func readHead(from buffer: inout ByteBuffer) throws(Failure) -> HTTPResponseHead?? {
        guard let block = try self.readBlock(from: &buffer, startingWithLine: true) else { return nil }
        var head = try Self.statusLine(block)
        head.headers = try Self.fields(block, from: head.fieldsStart, limits: self.limits)
        let code = head.status.code
        if code == 101 {
            throw .malformed("101 Switching Protocols, which the gateway never asks for")
        }
        if code < 200 {
            return .some(nil)  // Interim: the final response follows. State stays `.head`.
        }
        let response = HTTPResponseHead(version: head.version, status: head.status, headers: head.headers)
        try self.chooseFraming(response)
        return .some(response)
    }

    /// RFC 9112 §6.3, with every ambiguity refused.
    private mutating func chooseFraming(_ head: HTTPResponseHead) throws(Failure) {
        var transferEncodings = 0
        var chunked = false
        var lengths = 0
        var length = 0
        // RFC 9112 §9.3: HTTP/1.1 persists unless `close` is listed; HTTP/1.0 only if `keep-alive` is.
        var close = false
        var keepAlive = false
        for (name, value) in head.headers {
            if HTTPHeaders.equalsIgnoringCase(name, "connection") {
                close = close || HTTPHeaders.listContains(value, token: "close")
                keepAlive = keepAlive || HTTPHeaders.listContains(value, token: "keep-alive")
            } else if HTTPHeaders.equalsIgnoringCase(name, "transfer-encoding") {
                transferEncodings += 1
                chunked = HTTPHeaders.equalsIgnoringCase(value, "chunked")
            } else if HTTPHeaders.equalsIgnoringCase(name, "content-length") {
                lengths += 1
                guard let parsed = Self.decimal(value) else {
                    throw .malformed("Content-Length is not a number")
                }
                length = parsed
            }
        }
        // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing: close after it.
        self.keepsConnection = !close && (head.version.minor >= 1 || keepAlive) && !(head.version.minor == 0 && transferEncodings > 0)
        let code = head.status.code
        if self.requestWasHEAD || code == 204 || code == 304 {
            // No body whatever the fields say (they describe what a GET would get).
            self.state = .ended(nil)
            return
        }
        if transferEncodings > 0 {
            guard transferEncodings == 1, chunked else {
                throw .malformed("a Transfer-Encoding other than chunked")
            }
            guard lengths == 0 else {
                throw .malformed("both Transfer-Encoding and Content-Length")
            }
            self.state = .chunkSizeLine
            return
        }
        if lengths > 1 {
            throw .malformed("more than one Content-Length")
        }
        if lengths == 1 {
            self.state = length == 0 ? .ended(nil) : .fixedBody(remaining: length)
            return
        }
        self.state = .untilClose
        self.keepsConnection = false
    }

    // MARK: Lines and blocks.

    /// One CRLF-terminated line without its CRLF, from `partial` and then `buffer`.
    private mutating func readLine(from buffer: inout ByteBuffer, limit: Int, what: String) throws(Failure) -> [UInt8]? {
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
        defer { self.partial.removeAll(keepingCapacity: true) }
        guard self.partial.count >= 2, self.partial[self.partial.count - 2] == 0x0D else {
            throw .malformed("a bare LF in the \(what)")
        }
        let line = Array(self.partial[0..<(self.partial.count - 2)])
        guard line.count <= limit else { throw .tooLarge(what) }
        guard !line.contains(0x0D), !line.contains(0x0A) else { throw .malformed("a bare CR in the \(what)") }
        return line
    }

    /// A block of lines ending with an empty line (a head, or a trailer section), with all its line ends;
    /// `nil` until it is complete. Bare CR and LF are refused here, once, for the whole block.
    private mutating func readBlock(from buffer: inout ByteBuffer, startingWithLine: Bool) throws(Failure) -> [UInt8]? {
        if self.partial.isEmpty, let block = Self.wholeBlock(in: &buffer, startingWithLine: startingWithLine, limit: self.limits.maxHeadBytes) {
            try Self.checkLineEnds(block)
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
            // Nothing consumed beyond what is kept in `partial`.
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            guard self.partial.count <= self.limits.maxHeadBytes else { throw .tooLarge("head or trailer section") }
            return nil
        }
        guard end <= self.limits.maxHeadBytes else { throw .tooLarge("head or trailer section") }
        // Give back what belongs to the body: `partial` held bytes of earlier reads, so count from its end.
        let unused = self.partial.count - end
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes - unused)
        let block = Array(self.partial[0..<end])
        self.partial.removeAll(keepingCapacity: true)
        try Self.checkLineEnds(block)
        return block
    }

    /// The common case: a whole block at the start of one read, taken without gathering.
    private static func wholeBlock(in buffer: inout ByteBuffer, startingWithLine: Bool, limit: Int) -> [UInt8]? {
        let end: Int? = buffer.withUnsafeReadableBytes { bytes in
            if !startingWithLine, bytes.count >= 2, bytes[0] == 0x0D, bytes[1] == 0x0A {
                return 2
            }
            var index = 0
            let last = min(bytes.count, limit) - 3
            while index < last {
                if bytes[index + 3] != 0x0A {
                    index += 1
                    continue
                }
                if bytes[index] == 0x0D, bytes[index + 1] == 0x0A, bytes[index + 2] == 0x0D {
                    return index + 4
                }
                index += 1
            }
            return nil
        }
        guard let end else { return nil }
        return buffer.readBytes(length: end)
    }
}

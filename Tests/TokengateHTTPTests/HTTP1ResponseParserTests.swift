//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
import TokengateHTTP
import TokengateHTTPTestSupport


/// The upstream response parser: a pooled connection serves many users in turn, so where a response ends
/// must never be in doubt. Checked against NIO's llhttp-based decoder (which it replaced) on generated and
/// mutated responses — whenever both accept, they must agree on every part — and on every way of being
/// ambiguous, which it must refuse.
@Suite struct HTTP1ResponseParserTests {
    /// What a parse produced: the parts, flattened for comparison.
    struct Outcome: Equatable, CustomStringConvertible {
        var heads: [String] = []
        var body: [UInt8] = []
        var ends: [String] = []
        var failure: String?
        var description: String { "heads \(self.heads) body \(self.body.count) bytes ends \(self.ends) failure \(self.failure ?? "-")" }

        /// What NIO's decoder produced.
        mutating func record(_ part: HTTPClientResponsePart) {
            switch part {
            case .head(let head):
                self.record(status: head.status, head.headers)
            case .body(let buffer):
                self.record(UpstreamResponsePart.body(buffer))
            case .end(let trailers):
                self.record(UpstreamResponsePart.end(trailers))
            }
        }

        /// What ``HTTP1ResponseParser`` produced.
        mutating func record(_ part: UpstreamResponsePart) {
            switch part {
            case .head(let head):
                self.record(status: head.status, head.headers)
            case .body(let buffer):
                self.body += buffer.readableBytesView
            case .end(let trailers):
                self.ends.append(
                    trailers.map { $0.map { "\($0.name)=\($0.value.trimmingTrailingBlanks())" }.joined(separator: ";") } ?? ""
                )
            }
        }

        private mutating func record(status: HTTPResponseStatus, _ headers: HTTPHeaders) {
            self.heads.append("\(status.code) " + headers.map { "\($0.name)=\($0.value)" }.joined(separator: ";"))
        }
    }

    /// Feeds `chunks` to a fresh parser after one request with `method`, then closes when `close` says so.
    private func parse(_ chunks: [[UInt8]], method: HTTPMethod = .GET, close: Bool = false) -> (Outcome, HTTP1ResponseParser) {
        var parser = HTTP1ResponseParser()
        var outcome = Outcome()
        parser.requestSent(method: method)
        do {
            for chunk in chunks {
                var buffer = ByteBuffer(bytes: chunk)
                while let part = try parser.next(from: &buffer) {
                    outcome.record(part)
                }
                #expect(buffer.readableBytes == 0, "a parser consumes every byte it is given or fails")
            }
            if close, let part = try parser.connectionClosed() {
                outcome.record(part)
            }
        } catch {
            outcome.failure = "\(error)"
        }
        return (outcome, parser)
    }

    private func parse(_ text: String, method: HTTPMethod = .GET, close: Bool = false) -> Outcome {
        self.parse([Array(text.utf8)], method: method, close: close).0
    }

    /// What NIO's HTTPResponseDecoder makes of the same bytes (it learns the method from the request write).
    private func parsedByNIO(_ bytes: [UInt8], method: HTTPMethod = .GET, close: Bool = false) -> Outcome {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .forwardBytes)))
        var outcome = Outcome()
        do {
            try channel.writeOutbound(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: method, uri: "/")))
            try channel.writeInbound(ByteBuffer(bytes: bytes))
            if close {
                _ = try channel.finish()
            }
        } catch {
            outcome.failure = "\(error)"
        }
        while let part = try? channel.readInbound(as: HTTPClientResponsePart.self) {
            outcome.record(part)
        }
        _ = try? channel.finish()
        return outcome
    }

    // MARK: Framing.

    @Test func aConnectionFieldThatNamesFieldsIsNotedInTheParsePassAndItsNamesAreDropped() throws {
        func head(_ text: String) throws -> UpstreamResponseHead {
            var parser = HTTP1ResponseParser()
            parser.requestSent(method: .GET)
            var buffer = ByteBuffer(string: text)
            guard case .head(let head) = try #require(try parser.next(from: &buffer)) else {
                throw HTTP1ParseFailure.malformed("no head")
            }
            return head
        }
        let named = try head("HTTP/1.1 200 OK\r\nX-Secret: s\r\nConnection: keep-alive, X-Secret\r\nContent-Length: 0\r\n\r\n")
        #expect(named.connectionNamesFields)
        #expect(named.clientFields(close: false).map(\.name) == ["Content-Length", "strict-transport-security"])
        for common in ["keep-alive", "Close", "KEEP-ALIVE"] {
            let plain = try head("HTTP/1.1 200 OK\r\nConnection: \(common)\r\nX-Kept: k\r\nContent-Length: 0\r\n\r\n")
            #expect(!plain.connectionNamesFields, "\(common)")
            #expect(plain.clientFields(close: false).map(\.name) == ["X-Kept", "Content-Length", "strict-transport-security"])
        }
    }

    @Test func aResponseWithALengthEndsExactlyThere() {
        let outcome = self.parse("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")
        #expect(outcome.heads == ["200 Content-Type=text/plain;Content-Length=5"])
        #expect(outcome.body == Array("hello".utf8) && outcome.ends == [""] && outcome.failure == nil)
    }

    @Test func aChunkedBodyWithExtensionsAndTrailers() {
        let outcome = self.parse(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n1 ;x;q=\"a \\\"b\\\"\"\r\n!\r\n0\r\nX-Sum: 6\r\n\r\n"
        )
        #expect(outcome.body == Array("hello!".utf8) && outcome.ends == ["X-Sum=6"] && outcome.failure == nil, "\(outcome)")
    }

    /// The body such a head announces may still come, after the next request went out on the connection (where
    /// it would be read as that request's response): the response is read without a body, and the connection is
    /// not kept.
    @Test func noBodyAfterHEADOr204Or304WhateverTheFieldsSayAndNoReuseWhenTheyAnnounceOne() {
        for (text, method) in [
            ("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", HTTPMethod.HEAD),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", .HEAD),
            ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n", .HEAD),
            ("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\n", .HEAD),
            // No length at all: its GET would run until the close, so where a body sent anyway ends is unknowable.
            ("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n", .HEAD),
            ("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", .GET),
            ("HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", .GET),
            ("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", .GET),
            ("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", .GET),
        ] {
            let (outcome, parser) = self.parse([Array(text.utf8)], method: method)
            #expect(outcome.ends == [""] && outcome.body.isEmpty && outcome.failure == nil, "\(text): \(outcome)")
            #expect(parser.isIdle && !parser.keepsConnection, "\(method) \(text)")
        }
    }

    /// Bodiless responses whose heads announce nothing more (`HEAD` with `Content-Length: 0`, the common `204` and
    /// `304`) keep the connection.
    @Test func aBodilessResponseThatAnnouncesNoBodyKeepsTheConnection() {
        for (text, method) in [
            ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", HTTPMethod.HEAD),
            ("HTTP/1.1 204 No Content\r\n\r\n", .GET),
            ("HTTP/1.1 204 No Content\r\n\r\n", .HEAD),
            // A length of 0 announces nothing (some frameworks add it to every 204).
            ("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", .GET),
            ("HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\n\r\n", .GET),
            ("HTTP/1.1 304 Not Modified\r\nContent-Length: 0\r\n\r\n", .GET),
        ] {
            let (outcome, parser) = self.parse([Array(text.utf8)], method: method)
            #expect(outcome.ends == [""] && outcome.body.isEmpty && outcome.failure == nil, "\(text): \(outcome)")
            #expect(parser.isIdle && parser.keepsConnection, "\(method) \(text)")
        }
    }

    /// A 1xx has no content (RFC 9110 §15.2): one with a length or a coding may be followed by bytes the backend
    /// counts as its body. The final response is read; the connection is not kept after it, and the next request
    /// on a kept one starts clean.
    @Test func anInterimResponseThatAnnouncesABodyEndsTheConnectionsUse() throws {
        let (outcome, parser) = self.parse(
            [Array("HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx".utf8)]
        )
        #expect(outcome.heads == ["200 Content-Length=1"] && outcome.failure == nil, "\(outcome)")
        #expect(!parser.keepsConnection)
        let chunked = self.parse([Array("HTTP/1.1 103 Early Hints\r\nTransfer-Encoding: chunked\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n".utf8)]).1
        #expect(!chunked.keepsConnection)
        let plainInterim = self.parse([Array("HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n".utf8)]).1
        #expect(plainInterim.keepsConnection)
        // What an interim response announced belongs to its request: the parser's next request is judged on its own.
        var next = parser
        next.requestSent(method: .GET)
        var response = ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        while try next.next(from: &response) != nil {}
        #expect(next.isIdle && next.keepsConnection)
    }

    @Test func interimResponsesAreDroppedAndTheFinalOneRead() {
        let outcome = self.parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx")
        #expect(outcome.heads == ["200 Content-Length=1"] && outcome.body == [UInt8(ascii: "x")], "\(outcome)")
    }

    /// Found by fuzzing: interim responses were dropped without a count, so a backend could keep a request's
    /// response pending, and its connection's parser busy, for as long as it sent them.
    @Test func interimResponsesCountTowardsTheHeadLimit() {
        let hints = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        let final = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"
        let few = self.parse(String(repeating: hints, count: 100) + final)
        #expect(few.heads == ["200 Content-Length=1"] && few.failure == nil, "\(few)")
        let endless = self.parse(String(repeating: hints, count: 20_000) + final)
        #expect(endless.failure == "\(HTTP1ResponseParser.Failure.tooLarge("interim responses"))", "\(endless)")
        // Interim heads and the final head share the limit.
        let nearly = String(repeating: hints, count: (80 * 1024 - 100) / hints.utf8.count)
        let bigFinal = "HTTP/1.1 200 OK\r\nX-A: \(String(repeating: "a", count: 200))\r\nContent-Length: 0\r\n\r\n"
        #expect(self.parse(nearly + bigFinal).failure?.contains("too large") == true)
        // The count starts again with each request.
        var parser = HTTP1ResponseParser()
        for _ in 0..<3 {
            parser.requestSent(method: .GET)
            var buffer = ByteBuffer(string: String(repeating: hints, count: 1500) + final)
            var ended = false
            while let part = try? parser.next(from: &buffer) {
                if case .end = part { ended = true }
            }
            #expect(ended && parser.isIdle)
        }
    }

    @Test func aBodyWithoutLengthRunsUntilTheCloseAndTheConnectionIsNotReused() {
        let (outcome, parser) = self.parse([Array("HTTP/1.1 200 OK\r\n\r\nabc".utf8), Array("def".utf8)], close: true)
        #expect(outcome.body == Array("abcdef".utf8) && outcome.ends == [""] && outcome.failure == nil)
        #expect(!parser.keepsConnection)
        let http10 = self.parse([Array("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx".utf8)]).1
        #expect(!http10.keepsConnection, "HTTP/1.0 without keep-alive closes")
        let close = self.parse([Array("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx".utf8)]).1
        #expect(!close.keepsConnection)
        let listed = self.parse([Array("HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 1\r\n\r\nx".utf8)]).1
        #expect(!listed.keepsConnection)
        let http10KeepAlive = self.parse([Array("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx".utf8)]).1
        #expect(http10KeepAlive.keepsConnection)
        let plain = self.parse([Array("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx".utf8)]).1
        #expect(plain.keepsConnection)
        // RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 is faulty framing, whatever Connection says.
        let (http10Chunked, http10ChunkedParser) = self.parse(
            [Array("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n".utf8)]
        )
        #expect(http10Chunked.body == Array("ok".utf8) && !http10ChunkedParser.keepsConnection)
    }

    @Test func aResponseCutShortByTheCloseIsAFailure() {
        for text in [
            "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            "HTTP/1.1 200 OK\r\nContent-Le",
        ] {
            #expect(self.parse(text, close: true).failure == "\(HTTP1ResponseParser.Failure.truncated)", "\(text)")
        }
    }

    @Test func bytesAfterTheResponseOrWithNoRequestOutstandingAreRefused() throws {
        let (outcome, _) = self.parse([Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n\r\n".utf8)])
        #expect(outcome.ends == [""], "the first response is complete")
        #expect(outcome.failure == "\(HTTP1ResponseParser.Failure.unsolicited)")
        var idle = HTTP1ResponseParser()
        var stray = ByteBuffer(string: "x")
        #expect(throws: HTTP1ResponseParser.Failure.unsolicited) { try idle.next(from: &stray) }
    }

    @Test(arguments: [
        ("both framings", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("a coding other than chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
        ("a coding other than chunked, alone", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nabc"),
        ("two Transfer-Encodings", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"),
        ("a length list", "HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\nabc"),
        ("a signed length", "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\nabc"),
        ("a huge length", "HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999999\r\n\r\nabc"),
        ("obs-fold", "HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\nContent-Length: 0\r\n\r\n"),
        ("space before the colon", "HTTP/1.1 200 OK\r\nContent-Length : 3\r\n\r\nabc"),
        ("a bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n"),
        ("a bare CR", "HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n"),
        ("a NUL in a value", "HTTP/1.1 200 OK\r\nX-A: a\u{0}b\r\nContent-Length: 0\r\n\r\n"),
        ("a control byte in a value", "HTTP/1.1 200 OK\r\nX-A: a\u{1}b\r\nContent-Length: 0\r\n\r\n"),
        ("no colon", "HTTP/1.1 200 OK\r\nX-A\r\nContent-Length: 0\r\n\r\n"),
        ("101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"),
        ("HTTP/2 status line", "HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n"),
        ("a short status", "HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n"),
        ("a status over 599", "HTTP/1.1 999 Request denied\r\nContent-Length: 0\r\n\r\n"),
        ("a status of 600", "HTTP/1.1 600 X\r\nContent-Length: 0\r\n\r\n"),
        ("a chunk size that overflows", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n"),
        ("a chunk size that is not hex", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n"),
        ("a negative chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n"),
        ("whitespace after a chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\nab\r\n0\r\n\r\n"),
        ("chunk data longer than its size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n"),
        ("a bare LF after chunk data", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\n0\r\n\r\n"),
        ("a bad trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX A: 1\r\n\r\n"),
    ])
    func everyAmbiguityIsRefused(_ name: String, _ text: String) {
        let bytes = Array(text.utf8)
        #expect(self.parse(text).failure != nil, "\(name)")
        // Also when the bytes come one at a time.
        #expect(self.parse(bytes.map { [$0] }).0.failure != nil, "\(name), byte by byte")
    }

    @Test func overLongHeadsAndChunkLinesAreRefusedBeforeTheyAreBuffered() {
        let longValue = String(repeating: "a", count: 90 * 1024)
        #expect(self.parse("HTTP/1.1 200 OK\r\nX-A: \(longValue)\r\n\r\n").failure?.contains("too large") == true)
        let (dribbled, _) = self.parse([Array("HTTP/1.1 200 OK\r\nX-A: ".utf8)] + Array(repeating: Array(repeating: UInt8(ascii: "a"), count: 4096), count: 30))
        #expect(dribbled.failure?.contains("too large") == true)
        let longExtension = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + String(repeating: "x", count: 5000) + "\r\na\r\n0\r\n\r\n"
        #expect(self.parse(longExtension).failure?.contains("too large") == true)
    }

    // MARK: The same answer however the bytes are split, and the same as NIO's decoder.

    static let valid: [String] = [
        "HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Mon, 23 Nov 2026 16:00:00 GMT\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n3;a=b\r\nabc\r\n0\r\nX-Trailer: t\r\nX-Other:   spaced   \r\n\r\n",
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 599 \r\nX-Empty:\r\nContent-Length: 2\r\n\r\nok",
        "HTTP/1.1 201 Created Here\r\nSet-Cookie: a=b; Path=/\r\nSet-Cookie: c=d\r\nContent-Length: 1\r\n\r\nz",
        "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabc",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi",
        "HTTP/1.1 200 OK\r\nX-Obs: caf\u{e9}\r\nContent-Length: 1\r\n\r\n!",
    ]

    @Test(arguments: Self.valid)
    func everySplitGivesTheSameParts(_ text: String) {
        let bytes = Array(text.utf8)
        let whole = self.parse([bytes]).0
        #expect(whole.failure == nil, "\(whole)")
        for split in 1..<bytes.count {
            let parts = self.parse([Array(bytes[..<split]), Array(bytes[split...])]).0
            #expect(parts == whole, "split at \(split)")
        }
        #expect(self.parse(bytes.map { [$0] }).0 == whole, "byte by byte")
        let nio = self.parsedByNIO(bytes)
        #expect(nio.failure == nil && nio.heads.count == 1 && nio.body == whole.body && nio.ends == whole.ends, "NIO: \(nio) ours: \(whole)")
    }

    /// Generated responses, then the same with one byte changed: whenever both parsers accept a response they
    /// agree on its status, fields, body and trailers — a byte the parser gets wrong would show as a
    /// difference here, not as a user seeing another user's response.
    @Test func agreesWithNIOsDecoderOnGeneratedAndMutatedResponses() {
        var generator = SystemRandomNumberGenerator()
        var bothAccepted = 0
        var onlyNIOAccepted: [String] = []
        for round in 0..<3000 {
            var bytes = Self.generatedResponse(using: &generator)
            if round % 2 == 1 {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                bytes[index] = [UInt8(ascii: "\r"), UInt8(ascii: "\n"), UInt8(ascii: " "), UInt8(ascii: ":"), UInt8(ascii: "0"), 0, UInt8(ascii: "a"), 0x7F]
                    .randomElement(using: &generator)!
            }
            let ours = self.parse([bytes], close: true).0
            let nio = self.parsedByNIO(bytes, close: true)
            if ours.failure == nil {
                #expect(nio.failure == nil, "accepted what llhttp refuses: \(String(decoding: bytes, as: UTF8.self).debugDescription)")
                #expect(
                    ours.heads.count == nio.heads.count && ours.body == nio.body && ours.ends == nio.ends,
                    "\(String(decoding: bytes, as: UTF8.self).debugDescription): ours \(ours) NIO \(nio)"
                )
                bothAccepted += 1
            } else if nio.failure == nil {
                onlyNIOAccepted.append(String(decoding: bytes, as: UTF8.self))
            }
        }
        #expect(bothAccepted > 1500, "the generator must mostly produce valid responses")
        // Stricter than llhttp is fine (an ambiguity refused); but unmutated responses must all pass.
        _ = onlyNIOAccepted
    }

    static func generatedResponse(using generator: inout SystemRandomNumberGenerator) -> [UInt8] {
        let status = [200, 201, 202, 301, 400, 401, 403, 404, 500, 502, 503].randomElement(using: &generator)!
        var text = "HTTP/1.1 \(status) Reason\r\n"
        text += HTTP1Generated.fieldLines(excluding: ["content-length", "transfer-encoding", "connection"], using: &generator)
        let body = HTTP1Generated.text(0...300, of: 0x20...0x7E, using: &generator)
        if Bool.random(using: &generator) {
            text += "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        } else {
            text += HTTP1Generated.chunked(body, maxChunk: 120, using: &generator)
        }
        return Array(text.utf8)
    }
}

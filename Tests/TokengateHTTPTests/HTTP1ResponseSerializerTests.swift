//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
import TokengateHTTP
import TokengateHTTPTestSupport


/// The client side's response bytes: the same as NIO's `HTTPResponseEncoder` wrote for every head the
/// gateway produces (checked side by side), and framing decided only from what the head really carries.
@Suite struct HTTP1ResponseSerializerTests {
    struct Case: CustomStringConvertible, Sendable {
        var name: String
        var head: HTTPResponseHead
        var bodies: [String] = []
        var trailers: HTTPHeaders? = nil
        var description: String { self.name }
    }

    static let cases: [Case] = [
        Case(
            name: "length",
            head: HTTPResponseHead(version: .http1_1, status: .ok, headers: ["content-type": "text/plain", "content-length": "5"]),
            bodies: ["hello"]
        ),
        Case(name: "chunked", head: HTTPResponseHead(version: .http1_1, status: .ok, headers: ["x-a": "1"]), bodies: ["abc", "", "0123456789abcdefg"]),
        Case(
            name: "chunked with trailers",
            head: HTTPResponseHead(version: .http1_1, status: .ok),
            bodies: ["abc"],
            trailers: ["x-checksum": "42", "x-more": "yes"]
        ),
        Case(name: "HTTP/1.0 without length", head: HTTPResponseHead(version: .http1_0, status: .ok), bodies: ["abc", "def"]),
        Case(name: "HTTP/1.0 with length", head: HTTPResponseHead(version: .http1_0, status: .notFound, headers: ["content-length": "3"]), bodies: ["abc"]),
        Case(name: "204 drops its length", head: HTTPResponseHead(version: .http1_1, status: .noContent, headers: ["content-length": "0", "x-b": "2"])),
        Case(name: "304 drops its length", head: HTTPResponseHead(version: .http1_1, status: .notModified, headers: ["etag": "\"x\"", "content-length": "10"])),
        Case(
            name: "an answer",
            head: HTTPResponseHead(
                version: .http1_1,
                status: .unauthorized,
                headers: ["content-type": "application/json", "www-authenticate": "Bearer realm=\"x\"", "content-length": "2", "connection": "close"]
            ),
            bodies: ["{}"]
        ),
        Case(name: "a status without a reason phrase", head: HTTPResponseHead(version: .http1_1, status: .custom(code: 299, reasonPhrase: "")), bodies: ["a"]),
        Case(name: "a status NIO has no name for", head: HTTPResponseHead(version: .http1_1, status: .custom(code: 499, reasonPhrase: "Closed")), bodies: ["a"]),
        Case(name: "interim", head: HTTPResponseHead(version: .http1_1, status: .continue)),
    ]

    /// What NIO's encoder writes for `testCase`, concatenated.
    private func encodedByNIO(_ testCase: Case) throws -> [UInt8] {
        let channel = EmbeddedChannel(handler: HTTPResponseEncoder())
        defer { _ = try? channel.finish() }
        try channel.writeOutbound(HTTPServerResponsePart.head(testCase.head))
        for body in testCase.bodies {
            try channel.writeOutbound(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(string: body))))
        }
        if testCase.head.status.code >= 200 {
            try channel.writeOutbound(HTTPServerResponsePart.end(testCase.trailers))
        }
        var bytes: [UInt8] = []
        while let buffer = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = buffer else { continue }
            bytes += buffer.readableBytesView
        }
        return bytes
    }

    private func serialized(_ testCase: Case, method: HTTPMethod = .GET) -> (bytes: [UInt8], closes: Bool) {
        var serializer = HTTP1ResponseSerializer()
        var buffer = ByteBuffer()
        serializer.writeHead(testCase.head, requestMethod: method, into: &buffer)
        for body in testCase.bodies {
            serializer.writeBody(ByteBuffer(string: body), into: &buffer)
        }
        let closes = serializer.closesToDelimitBody
        if testCase.head.status.code >= 200 {
            serializer.writeEnd(testCase.trailers, into: &buffer)
        }
        return (Array(buffer.readableBytesView), closes)
    }

    @Test(arguments: Self.cases)
    func writesWhatNIOsEncoderWrote(_ testCase: Case) throws {
        let expected = try self.encodedByNIO(testCase)
        let actual = self.serialized(testCase).bytes
        #expect(String(decoding: actual, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
    }

    @Test func onlyAnHTTP10BodyOfUnknownLengthNeedsTheClose() {
        let closing = Self.cases.filter { self.serialized($0).closes }.map(\.name)
        #expect(closing == ["HTTP/1.0 without length"])
    }

    @Test func aResponseToHEADKeepsItsFieldsAndSendsNoBody() {
        let length = Case(name: "", head: HTTPResponseHead(version: .http1_1, status: .ok, headers: ["content-length": "1000"]), bodies: ["x"])
        #expect(String(decoding: self.serialized(length, method: .HEAD).bytes, as: UTF8.self) == "HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n")
        let unknown = Case(name: "", head: HTTPResponseHead(version: .http1_1, status: .ok), bodies: ["x"])
        // No last chunk either: the client reads no body at all after a HEAD.
        #expect(String(decoding: self.serialized(unknown, method: .HEAD).bytes, as: UTF8.self) == "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    }

    @Test func theBodyIsFramedByWhatTheHeadCarriesNotByWhatTheBackendSaid() throws {
        // A backend that lists Content-Length in Connection gets it dropped as hop-by-hop: the client must then
        // get a chunked body, not the backend's length applied to a head without it (a desync).
        let head = HTTPResponseHead(
            version: .http1_1,
            status: .ok,
            headers: ["connection": "content-length", "content-length": "3", "transfer-encoding": "chunked"]
        )
        var serializer = HTTP1ResponseSerializer()
        var buffer = ByteBuffer()
        serializer.writeUpstreamHead(try UpstreamResponseHead(head), version: .http1_1, close: false, hsts: "max-age=31536000", requestMethod: .GET, into: &buffer)
        serializer.writeBody(ByteBuffer(string: "abc"), into: &buffer)
        serializer.writeEnd(nil, into: &buffer)
        #expect(
            String(buffer: buffer)
                == "HTTP/1.1 200 OK\r\nstrict-transport-security: max-age=31536000\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        )
    }

    @Test func trailersThatWouldReframeOrManageTheConnectionAreDropped() {
        var serializer = HTTP1ResponseSerializer()
        var buffer = ByteBuffer()
        serializer.writeHead(HTTPResponseHead(version: .http1_1, status: .ok), requestMethod: .GET, into: &buffer)
        buffer.clear()
        serializer.writeEnd(
            ["Content-Length": "5", "x-checksum": "1", "Transfer-Encoding": "chunked", "Connection": "close", "Keep-Alive": "1", "Host": "h"],
            into: &buffer
        )
        #expect(String(buffer: buffer) == "0\r\nx-checksum: 1\r\n\r\n")
    }

    @Test func theBackendsHeadIsRewrittenInTheSamePass() throws {
        let head = HTTPResponseHead(
            version: .http1_1,
            status: .created,
            headers: [
                "Server": "backend", "Connection": "keep-alive, X-Hop", "X-Hop": "1", "Keep-Alive": "timeout=5",
                "Transfer-Encoding": "chunked", "Content-Length": "2", "Set-Cookie": "a=b",
            ]
        )
        var serializer = HTTP1ResponseSerializer()
        var buffer = ByteBuffer()
        let upstream = try UpstreamResponseHead(head)
        serializer.writeUpstreamHead(upstream, version: .http1_0, close: true, hsts: "max-age=31536000", requestMethod: .POST, into: &buffer)
        #expect(serializer.framing == .contentLength)
        #expect(
            String(buffer: buffer)
                == "HTTP/1.0 201 Created\r\nServer: backend\r\nContent-Length: 2\r\nSet-Cookie: a=b\r\n"
                + "strict-transport-security: max-age=31536000\r\nconnection: close\r\n\r\n"
        )
        // The HTTP/2 side gets the same fields from the same filter: names lowercased, and `connection`, which
        // HTTP/2 forbids, dropped.
        let h2 = try #require(HTTP2HeaderBlock.response(fromUpstream: upstream, close: true, hsts: "max-age=31536000"))
        #expect(h2.names == [":status", "server", "content-length", "set-cookie", "strict-transport-security"])
        #expect(h2.neverIndex == [0, 0, 0, 1, 0], "set-cookie stays out of the HPACK table")
    }

    /// A backend's `204` or `304` with a `Content-Length` reaches neither protocol's client with it: an HTTP/2
    /// client's nghttp2 resets a 204 stream that carries one (and HTTP/1.1 drops it already).
    @Test(arguments: [HTTPResponseStatus.noContent, .notModified])
    func aBodylessStatusLosesItsContentLength(status: HTTPResponseStatus) throws {
        let upstream = try UpstreamResponseHead(
            HTTPResponseHead(version: .http1_1, status: status, headers: ["Content-Length": "5", "ETag": "\"x\""])
        )
        let h2 = try #require(HTTP2HeaderBlock.response(fromUpstream: upstream, close: false, hsts: nil))
        #expect(h2.names == [":status", "etag"])
        var serializer = HTTP1ResponseSerializer()
        var buffer = ByteBuffer()
        serializer.writeUpstreamHead(upstream, version: .http1_1, close: false, hsts: nil, requestMethod: .GET, into: &buffer)
        #expect(!String(buffer: buffer).lowercased().contains("content-length"), "\(String(buffer: buffer))")
    }
}

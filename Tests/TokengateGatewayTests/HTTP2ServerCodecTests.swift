//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Glibc
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
import TokengateHTTPTestSupport
@testable import TokengateHTTP

@testable import TokengateGateway

/// The codec in an EmbeddedChannel, driven with hand-built frames.
@Suite struct HTTP2ServerCodecTests {
    private let calm: UInt32 = 0xb

    @Test func theServerPrefaceAnnouncesTheSettings() throws {
        var configuration = HTTP2ServerConfiguration()
        configuration.maxConcurrentStreams = 7
        configuration.initialWindowSize = 12_345
        let client = try H2EmbeddedClient(configuration: configuration)
        defer { client.finish() }
        let frames = try client.read()
        let settings = try #require(frames.first)
        #expect(settings.type == H2Frame.settings && settings.flags == 0)
        var entries: [UInt16: UInt32] = [:]
        for offset in stride(from: 0, to: settings.payload.count, by: 6) {
            let p = settings.payload
            entries[UInt16(p[offset]) << 8 | UInt16(p[offset + 1])] =
                UInt32(p[offset + 2]) << 24 | UInt32(p[offset + 3]) << 16 | UInt32(p[offset + 4]) << 8 | UInt32(p[offset + 5])
        }
        #expect(entries[0x3] == 7)  // MAX_CONCURRENT_STREAMS
        #expect(entries[0x4] == 12_345)  // INITIAL_WINDOW_SIZE
        #expect(entries[0x6] == UInt32(configuration.maxHeaderListSize))  // MAX_HEADER_LIST_SIZE
        #expect(entries[0x2] == 0)  // ENABLE_PUSH
        // The connection window is opened to its configured size right away.
        let update = try #require(frames.first { $0.type == H2Frame.windowUpdate && $0.stream == 0 })
        #expect(update.windowIncrement == UInt32(configuration.connectionWindowSize - 65_535))
    }

    @Test func aGetIsMappedToAnHTTP1HeadAndAnswered() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/hello?x=1", extra: [("cookie", "a=1"), ("cookie", "b=2"), ("accept", "*/*")]))
        let frames = try client.read()
        let head = try #require(client.log.heads.first)
        #expect(head.method == .GET && head.uri == "/hello?x=1" && head.version.major == 2)
        #expect(head.headers.first(name: "host") == "example.test")
        #expect(head.headers[canonicalForm: "cookie"] == ["a=1; b=2"])
        let blocks = client.headerBlocks(frames)
        #expect(blocks.count == 1)
        let response = try #require(blocks.first)
        #expect(response.stream == 1 && !response.endStream)
        #expect(response.fields.first?.0 == ":status" && response.fields.value(":status") == "200")
        #expect(response.fields.value("x-upper") == "A")
        #expect(response.fields.value("connection") == nil && response.fields.value("transfer-encoding") == nil)
        let data = frames.filter { $0.type == H2Frame.data && $0.stream == 1 }
        #expect(String(decoding: data.flatMap(\.payload), as: UTF8.self) == "GET /hello?x=1 example.test\n")
        #expect(data.last?.flags == H2Frame.endStream)
        #expect(client.log.resets.isEmpty)
        #expect(!client.isClosed)
    }

    @Test func aPostBodyIsDeliveredAndWindowUpdatesFollowConsumption() throws {
        var configuration = HTTP2ServerConfiguration()
        configuration.initialWindowSize = 1_000
        let client = try H2EmbeddedClient(configuration: configuration)
        defer { client.finish() }
        try client.handshake()
        try client.read()
        // `/noconsume` never reports bytes consumed: the stream's window stays shut.
        try client.send(.request(1, method: "POST", path: "/noconsume", endStream: false), .data(1, [UInt8](repeating: 7, count: 1_000)))
        let before = try client.read()
        #expect(client.log.bodies[1]?.count == 1_000)
        #expect(!before.contains { $0.type == H2Frame.windowUpdate && $0.stream == 1 })
        // More than the window is a flow-control error (nghttp2 enforces the window it announced).
        let stream = try #require(client.log.streams[1])
        stream.consumed(bytes: 1_000)
        let after = try client.read()
        let update = try #require(after.first { $0.type == H2Frame.windowUpdate && $0.stream == 1 })
        #expect(update.windowIncrement == 1_000)
        try client.send(.data(1, Array("tail".utf8), endStream: true))
        let response = try client.read()
        let body = String(decoding: response.filter { $0.type == H2Frame.data }.flatMap(\.payload), as: UTF8.self)
        #expect(body.hasPrefix("POST /noconsume example.test\n"))
        #expect(body.hasSuffix("tail"))
        #expect(body.utf8.count == "POST /noconsume example.test\n".utf8.count + 1_004)
    }

    /// What the body's pace asks (``ExchangeClient/isRequestBodyHeldBack``): whether the client may send no more
    /// on a stream, by its own window or the connection's. Other streams' unread bytes can use up the connection's
    /// window, and then a stream that has sent nothing is held back too, by no fault of its client.
    @Test func aStreamKnowsWhenItsWindowOrTheConnectionsIsShut() throws {
        var configuration = HTTP2ServerConfiguration()
        configuration.initialWindowSize = 1_000
        configuration.connectionWindowSize = 65_535  // The protocol's initial window: no WINDOW_UPDATE raises it.
        let client = try H2EmbeddedClient(configuration: configuration)
        defer { client.finish() }
        try client.handshake()
        try client.read()
        // 65 streams fill their windows (1,000 bytes each) and are never read.
        for index in 0..<65 {
            let id = Int32(2 * index + 1)
            try client.send(.request(id, method: "POST", path: "/noconsume", endStream: false), .data(id, [UInt8](repeating: 1, count: 1_000)))
        }
        _ = try client.read()
        let full = try #require(client.log.streams[1])
        #expect(full.isReceiveWindowShut, "its own window is used up")
        // A stream that has sent 500 bytes of its 1,000: its window is open, the connection's still has 535 bytes.
        try client.send(.request(131, method: "POST", path: "/noconsume", endStream: false), .data(131, [UInt8](repeating: 2, count: 500)))
        _ = try client.read()
        let open = try #require(client.log.streams[131])
        #expect(!open.isReceiveWindowShut)
        // The connection's last 35 bytes go to another stream: now 131 is held back by the others.
        try client.send(.request(133, method: "POST", path: "/noconsume", endStream: false), .data(133, [UInt8](repeating: 3, count: 35)))
        _ = try client.read()
        #expect(open.isReceiveWindowShut, "the connection's window is used up by other streams")
        // Bytes passed on give window back, once nghttp2 sends the WINDOW_UPDATE: for a stream when half its window
        // is passed on, for the connection likewise, so one stream's 1,000 bytes reopen its own window only.
        full.consumed(bytes: 1_000)
        _ = try client.read()
        #expect(open.isReceiveWindowShut, "the connection's window is still shut: the client may not send yet")
        for index in 1..<65 {
            try #require(client.log.streams[Int32(2 * index + 1)]).consumed(bytes: 1_000)
        }
        _ = try client.read()
        #expect(!open.isReceiveWindowShut)
        #expect(!full.isReceiveWindowShut)
    }

    @Test func bodyBeyondTheWindowIsAFlowControlError() throws {
        var configuration = HTTP2ServerConfiguration()
        configuration.initialWindowSize = 100
        let client = try H2EmbeddedClient(configuration: configuration)
        defer { client.finish() }
        try client.handshake()
        try client.read()
        try client.send(.request(1, method: "POST", path: "/noconsume", endStream: false), .data(1, [UInt8](repeating: 1, count: 100)))
        try client.read()
        try client.send(.data(1, [UInt8](repeating: 1, count: 100)))
        let frames = try client.read()
        // A stream error: RST_STREAM FLOW_CONTROL_ERROR, and the handler is told to stop. (nghttp2 1.52 still
        // hands over the offending frame's payload before the reset, so at most one frame past the window.)
        #expect(frames.first { $0.type == H2Frame.rstStream && $0.stream == 1 }?.errorCode == 0x3)
        #expect(client.log.resets.map(\.1) == [.flowControlError])
        #expect(!frames.contains { $0.type == H2Frame.goaway })
    }

    @Test func aResponseHeadWithMoreFieldsThanTheShimsStackArrayArrivesWhole() throws {
        // 43 fields: past the 32 the C shim builds on its stack, so its heap path is the one taken.
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/many"))
        let response = try #require(client.headerBlocks(try client.read()).first)
        #expect(response.fields.count == 43)
        #expect((0..<40).allSatisfy { response.fields.value("x-field-\($0)") == String($0) })
        #expect(response.fields.value(":status") == "200" && response.fields.value("x-upper") == "A")
    }

    @Test func responseTrailersFollowTheData() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/trailers"))
        let frames = try client.read().filter { $0.stream == 1 }
        #expect(frames.map(\.type) == [H2Frame.headers, H2Frame.data, H2Frame.headers])
        #expect(frames[1].flags & H2Frame.endStream == 0)
        let blocks = client.headerBlocks(frames)
        #expect(blocks.last?.fields.value("x-checksum") == "42")
        #expect(blocks.last?.endStream == true)
    }

    @Test func requestTrailersReachTheHandler() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(
            .request(1, method: "POST", path: "/echo", endStream: false),
            .data(1, Array("abc".utf8)),
            .headers(1, [("x-digest", "d1")], endStream: true)
        )
        try client.read()
        let trailers = try #require(client.log.ends[1] ?? nil)
        #expect(trailers.first(name: "x-digest") == "d1")
    }

    @Test func oversizedHeadersGetA431AndNeverReachAHandler() throws {
        var configuration = HTTP2ServerConfiguration()
        configuration.maxHeaderListSize = 1_000
        let client = try H2EmbeddedClient(configuration: configuration)
        defer { client.finish() }
        try client.handshake()
        // Over the limit, within twice the limit: the 431 a client whose headers grew too large should get.
        try client.send(.request(1, path: "/x", extra: [("x-big", String(repeating: "b", count: 1_200))]))
        let frames = try client.read()
        #expect(client.log.heads.isEmpty)
        let response = try #require(client.headerBlocks(frames).first)
        #expect(response.fields.value(":status") == "431")
        #expect(response.fields.value("connection") == nil)
        let body = String(decoding: frames.filter { $0.type == H2Frame.data }.flatMap(\.payload), as: UTF8.self)
        #expect(body.contains("request_header_fields_too_large"))
        // The connection goes on.
        try client.send(.request(3, path: "/ok"))
        try client.read()
        #expect(client.log.heads.map(\.uri) == ["/ok"])
    }

    /// A HEADERS frame that adds one 4,000-byte field to the HPACK table (whose default size is 4,096), then references it thousands of times
    /// with one byte each (an HPACK bomb: 12 KB on the wire, ~48 MB decoded).
    private func hpackBomb(_ stream: Int32, references: Int, indexFirst: Bool) -> H2Frame {
        var payload = HPACKLiteral.encode([(":method", "GET"), (":scheme", "https"), (":authority", "example.test"), (":path", "/bomb")])
        if indexFirst {
            // Literal with incremental indexing, new name (RFC 7541 §6.2.1): it becomes dynamic entry 62.
            payload += [0x40, 6] + Array("x-bomb".utf8) + [0x7f, 0xa1, 0x1e] + [UInt8](repeating: 0x41, count: 4_000)
        }
        payload += [UInt8](repeating: 0xbe, count: references)  // Indexed field 62 (§6.1).
        return H2Frame(type: H2Frame.headers, flags: H2Frame.endStream | H2Frame.endHeaders, stream: stream, payload: payload)
    }

    /// Past twice the header list limit, the stream is reset (nghttp2 reads the rest of the block without
    /// validating or reporting it) and the connection goes on; a connection that keeps sending oversized lists
    /// ends with GOAWAY ENHANCE_YOUR_CALM.
    @Test func anHPACKBombResetsItsStreamAndRepeatedOnesEndTheConnection() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.read()
        try client.send(self.hpackBomb(1, references: 12_000, indexFirst: true))
        let frames = try client.read()
        #expect(frames.first { $0.type == H2Frame.rstStream && $0.stream == 1 }?.errorCode == 0x2)
        #expect(client.headerBlocks(frames).isEmpty, "no 431 after a reset")
        #expect(client.log.heads.isEmpty)
        try client.send(.request(3, path: "/ok"))
        try client.read()
        #expect(client.log.heads.map(\.uri) == ["/ok"])
        #expect(!client.isClosed)
        // Ten oversized lists in a burst are allowed (the one above was the first); the eleventh ends it all.
        var id: Int32 = 5
        for _ in 0..<9 {
            try client.send(self.hpackBomb(id, references: 12_000, indexFirst: false))
            id += 2
        }
        let beforeLimit = try client.read()
        #expect(!beforeLimit.contains { $0.type == H2Frame.goaway })
        #expect(beforeLimit.filter { $0.type == H2Frame.rstStream }.count == 9)
        try client.send(self.hpackBomb(id, references: 12_000, indexFirst: false))
        try self.expectCalm(client)
        #expect(client.log.heads.map(\.uri) == ["/ok"])
    }

    /// What HTTP/1.1 refuses, HTTP/2 refuses with the same answer, and the connection goes on.
    @Test(arguments: [
        ("method_weird", "FOO", "example.test", 0, "400"), ("method_lowercase", "get", "example.test", 0, "400"),
        ("many_headers_300", "GET", "example.test", 300, "431"), ("authority_userinfo", "GET", "user@localhost", 0, "400"),
    ])
    func requestsHTTP1WouldRefuseNeverReachAHandler(_ name: String, _ method: String, _ authority: String, _ fields: Int, _ status: String) throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        let extra = (0..<fields).map { ("x-f\($0)", "1") }
        try client.send(.request(1, method: method, path: "/x", authority: authority, extra: extra))
        let frames = try client.read()
        #expect(client.log.heads.isEmpty, "\(name)")
        #expect(client.headerBlocks(frames).first?.fields.value(":status") == status, "\(name)")
        try client.send(.request(3, path: "/ok"))
        try client.read()
        #expect(client.log.heads.map(\.uri) == ["/ok"], "\(name)")
    }

    /// Requests the codec answers itself get HTTP/1.1's access-log line for its own rejections (status and
    /// reason; never the path, its query or a field), and none when the access log is off.
    @Test(arguments: [true, false])
    func requestsTheCodecAnswersAreLogged(_ accessLog: Bool) throws {
        let logs = LogCapture()
        var configuration = HTTP2ServerConfiguration()
        configuration.accessLog = accessLog
        configuration.maxHeaderListSize = 1_000
        let client = try H2EmbeddedClient(configuration: configuration, logs: logs)
        defer { client.finish() }
        try client.handshake()
        let secret = "Bearer eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.c2ln"
        try client.send(
            .request(1, path: "/x?access_token=qsecret", extra: [("host", "other.test"), ("authorization", secret)]),
            .request(3, path: "/y?access_token=qsecret", extra: [("authorization", secret), ("x-big", String(repeating: "b", count: 1_000))])
        )
        try client.read()
        let lines = logs.all.filter { $0.hasPrefix("info request ") }
        if accessLog {
            #expect(lines == [
                "info request reason=malformed_http status=400 stream=1",
                "info request reason=headers_too_large status=431 stream=3",
            ])
        } else {
            #expect(lines.isEmpty)
        }
        #expect(!logs.all.contains { $0.contains("qsecret") || $0.contains("eyJ") })
    }

    @Test func connectionSpecificRequestHeadersAreRefusedByNghttp2() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/x", extra: [("connection", "keep-alive")]))
        let frames = try client.read()
        #expect(client.log.heads.isEmpty)
        #expect(frames.first { $0.type == H2Frame.rstStream && $0.stream == 1 }?.errorCode == 0x1)
    }

    /// What would break the field lines and request line the request logic writes for the backend: a `:path`
    /// with a space or a tab, field values with CR, LF or NUL, names with a colon, space or uppercase. None may
    /// reach a handler, whoever refuses it (nghttp2's checks, the head builder's own).
    @Test func requestsThatCouldBreakTheBackendsLinesNeverReachAHandler() throws {
        let cases: [(path: String, extra: [(String, String)])] = [
            ("/a b", []), ("/a\tb", []), ("/a\r\nx: y", []),
            ("/x", [("x-a", "1\r\nx-tokengate-user: admin")]), ("/x", [("x-a", "1\nb")]), ("/x", [("x-a", "1\u{0}")]),
            ("/x", [("x-a:b", "1")]), ("/x", [("x a", "1")]), ("/x", [("X-Upper", "1")]), ("/x", [("cookie", "a=1\r\nb")]),
        ]
        for (index, request) in cases.enumerated() {
            let client = try H2EmbeddedClient()
            defer { client.finish() }
            try client.handshake()
            try client.send(.request(1, path: request.path, extra: request.extra))
            try client.read()
            #expect(client.log.heads.isEmpty, "case \(index): \(request.path.debugDescription) \(request.extra)")
        }
        // The same harness hands a clean request on.
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/a%20b", extra: [("x-a", "1 \t2"), ("x-b", "caf\u{e9}")]))
        try client.read()
        #expect(client.log.heads.map(\.uri) == ["/a%20b"])
        #expect(client.log.heads.first?.fields.first(name: "x-a") == "1 \t2")
    }

    @Test func aClientResetReachesTheHandler() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/hang"))
        try client.read()
        #expect(client.log.heads.count == 1)
        try client.send(.rstStream(1, 0x8))
        try client.read()
        #expect(client.log.resets.map(\.0) == [1])
        #expect(client.log.resets.first?.1 == .cancel)
        // Writes after the reset are dropped, not sent.
        let stream = try #require(client.log.streams[1])
        stream.writeHead(HTTPResponseHead(version: .http1_1, status: .ok))
        #expect(try client.read().filter { $0.stream == 1 }.isEmpty)
        #expect(!stream.isWritable)
    }

    @Test func aHandlerResetSendsRstStream() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/hang"))
        try client.read()
        let stream = try #require(client.log.streams[1])
        stream.reset(code: .internalError)
        let frames = try client.read()
        #expect(frames.first { $0.type == H2Frame.rstStream }?.errorCode == 0x2)
        #expect(client.log.resets.isEmpty)  // The handler asked for it: it is not told again.
    }

    /// A handler's writes out of order (the gateway's bug, never the client's doing) reset that stream with
    /// INTERNAL_ERROR instead of sending a response it did not mean, or stopping the process; the
    /// connection's other streams go on.
    @Test(arguments: ["body before head", "body after end", "second head"])
    func anIllegalWriteResetsItsStreamOnly(_ sequence: String) throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/hang"))
        try client.read()
        let stream = try #require(client.log.streams[1])
        let head = HTTPResponseHead(version: .http1_1, status: .ok, headers: ["content-length": "2"])
        switch sequence {
        case "body before head":
            stream.writeBody(ByteBuffer(string: "ok"))
        case "body after end":
            stream.writeHead(head)
            stream.writeBody(ByteBuffer(string: "ok"))
            stream.writeEnd(nil)
            stream.writeBody(ByteBuffer(string: "more"))
        default:
            stream.writeHead(head)
            stream.writeHead(HTTPResponseHead(version: .http1_1, status: .notFound))
        }
        let frames = try client.read().filter { $0.stream == 1 }
        #expect(frames.map(\.type) == [H2Frame.rstStream], "\(sequence)")
        #expect(frames.first?.errorCode == 0x2)
        // The handler did not ask for the reset: it is told.
        #expect(client.log.resets.map(\.0) == [1])
        try client.send(.request(3, path: "/other"))
        let other = client.headerBlocks(try client.read()).filter { $0.stream == 3 }
        #expect(other.first?.fields.value(":status") == "200")
    }

    @Test func anEarlyCompleteResponseAsksTheClientToStopSending() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, method: "POST", path: "/hang", endStream: false))
        try client.read()
        let stream = try #require(client.log.streams[1])
        stream.writeHead(HTTPResponseHead(version: .http1_1, status: .unauthorized))
        stream.writeEnd(nil)
        let frames = try client.read().filter { $0.stream == 1 }
        #expect(frames.map(\.type) == [H2Frame.headers, H2Frame.rstStream])
        #expect(frames.last?.errorCode == 0x0)
        #expect(client.log.resets.map(\.1) == [.noError])
    }

    /// RFC 9113 §6.8's two GOAWAYs: the shutdown notice (last stream 2^31-1); a request the client sent before
    /// it read the notice is still taken; after the notice timeout the final GOAWAY names the last stream
    /// processed, after which a new stream is refused; in-flight streams finish, then the close.
    @Test func gracefulShutdownSendsNoticeThenGoawayAndFinishesInFlightStreams() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/hang"), .request(3, path: "/hang"))
        try client.read()
        client.channel.pipeline.fireUserInboundEventTriggered(GatewayShutdownEvent())
        let notice = try client.read().compactMap(\.goaway)
        #expect(notice.count == 1)
        #expect(notice.first?.lastStream == Int32.max && notice.first?.code == 0)
        #expect(!client.isClosed)
        // Sent before the client read the notice: still processed.
        try client.send(.request(5, path: "/crossing"))
        try client.read()
        #expect(client.log.heads.contains { $0.uri == "/crossing" })
        let timeout = HTTP2ServerConfiguration().shutdownNoticeTimeout
        client.channel.embeddedEventLoop.advanceTime(by: timeout - .milliseconds(1))
        #expect(try client.read().compactMap(\.goaway).isEmpty)
        client.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        let final = try client.read().compactMap(\.goaway)
        #expect(final.count == 1)
        #expect(final.first?.lastStream == 5 && final.first?.code == 0)
        // A new stream after the final GOAWAY is not processed.
        try client.send(.request(7, path: "/late"))
        try client.read()
        #expect(!client.log.heads.contains { $0.uri == "/late" })
        for id: Int32 in [1, 3, 5] {
            let stream = try #require(client.log.streams[id])
            stream.writeHead(HTTPResponseHead(version: .http1_1, status: .ok))
            stream.writeEnd(nil)
            try client.read()
            #expect(!client.isClosed)
        }
        // Every stream is done: the connection closes after the linger that lets a request the client sent
        // before it read the GOAWAY be read and dropped, not reset.
        client.channel.embeddedEventLoop.advanceTime(by: HTTP2ServerConfiguration().closeLinger - .milliseconds(1))
        #expect(!client.isClosed)
        client.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(client.isClosed)
        #expect(client.log.resets.isEmpty)
        #expect(client.received.compactMap(\.goaway).count == 2)
    }

    /// A connection without a request yet when the drain begins: no GOAWAY until its first request is
    /// answered, then the notice, and the final GOAWAY names that request's stream (never 0, which refuses it).
    @Test func gracefulShutdownAnswersTheFirstRequestBeforeTheNotice() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        client.channel.pipeline.fireUserInboundEventTriggered(GatewayShutdownEvent())
        #expect(try client.read().compactMap(\.goaway).isEmpty)
        try client.send(.request(1, path: "/hang"))
        #expect(try client.read().compactMap(\.goaway).isEmpty, "no GOAWAY while the first request is unanswered")
        let stream = try #require(client.log.streams[1])
        stream.writeHead(HTTPResponseHead(version: .http1_1, status: .ok))
        stream.writeEnd(nil)
        let frames = try client.read()
        let responseAt = try #require(frames.firstIndex { $0.type == H2Frame.headers && $0.stream == 1 })
        let noticeAt = try #require(frames.firstIndex { $0.goaway?.lastStream == Int32.max })
        #expect(responseAt < noticeAt)
        client.channel.embeddedEventLoop.advanceTime(by: HTTP2ServerConfiguration().shutdownNoticeTimeout)
        #expect(try client.read().compactMap(\.goaway).map(\.lastStream) == [1])
        try client.lingerOver()
        #expect(client.isClosed)
    }

    @Test func slowClientsBackPressureTheResponse() throws {
        var configuration = HTTP2ServerConfiguration()
        configuration.maxQueuedBytesPerStream = 64 * 1024
        let client = try H2EmbeddedClient(configuration: configuration)
        defer { client.finish() }
        try client.handshake()
        // 256 KiB against the client's default 64 KiB windows.
        try client.send(.request(1, path: "/big?262144"))
        var frames = try client.read()
        var received = frames.filter { $0.type == H2Frame.data }.reduce(0) { $0 + $1.payload.count }
        #expect(received == 65_535)
        let stream = try #require(client.log.streams[1])
        #expect(!stream.isWritable)
        #expect(client.log.writability.map(\.1) == [false])
        // The client reads and opens its windows: the rest flows, and the stream becomes writable again.
        while received < 262_144 {
            try client.send(.windowUpdate(0, 65_535), .windowUpdate(1, 65_535))
            frames = try client.read()
            let more = frames.filter { $0.type == H2Frame.data }.reduce(0) { $0 + $1.payload.count }
            #expect(more > 0)
            if more == 0 { break }
            received += more
        }
        #expect(received == 262_144)
        #expect(client.received.last { $0.type == H2Frame.data }?.flags == H2Frame.endStream)
        #expect(client.log.writability.map(\.1) == [false, true])
    }

    // MARK: Floods

    private func expectCalm(_ client: H2EmbeddedClient, _ sourceLocation: SourceLocation = #_sourceLocation) throws {
        let frames = try client.read()
        let goaway = frames.first { $0.type == H2Frame.goaway }?.goaway
        #expect(goaway?.code == self.calm, sourceLocation: sourceLocation)
        // Closed after the linger that keeps the GOAWAY from being lost to a reset.
        #expect(!client.isClosed, sourceLocation: sourceLocation)
        try client.lingerOver()
        #expect(client.isClosed, sourceLocation: sourceLocation)
    }

    @Test func aPingFloodEndsTheConnection() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(bytes: (0..<200).flatMap { _ in H2Frame.ping().bytes })
        try self.expectCalm(client)
    }

    @Test func pingsAtAnHonestRateAreAnswered() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/hang"))  // An open stream keeps the connection from idling.
        for _ in 0..<60 {
            try client.send(.ping())
            client.channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
        }
        let frames = try client.read()
        #expect(frames.filter { $0.type == H2Frame.ping && $0.flags == H2Frame.ack }.count == 60)
        #expect(!frames.contains { $0.type == H2Frame.goaway })
    }

    @Test func anEmptyDataFloodEndsTheConnection() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, method: "POST", path: "/hang", endStream: false))
        try client.send(bytes: (0..<100).flatMap { _ in H2Frame.data(1, []).bytes })
        try self.expectCalm(client)
        #expect(client.log.resets.map(\.0) == [1])  // The stream's work is cancelled with the connection.
    }

    @Test func aWindowUpdateFloodEndsTheConnection() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(bytes: (0..<1_000).flatMap { _ in H2Frame.windowUpdate(0, 1).bytes })
        try self.expectCalm(client)
    }

    @Test func aSettingsAndPriorityFloodEndsTheConnection() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        var bytes: [UInt8] = []
        for i in 0..<500 {
            let frame: H2Frame = i % 2 == 0 ? .settings([]) : .priority(Int32(2 * i + 1))
            bytes += frame.bytes
        }
        try client.send(bytes: bytes)
        try self.expectCalm(client)
    }

    /// MadeYouReset (CVE-2025-8671): each stream is opened, then made invalid (more DATA than its declared
    /// content-length), so nghttp2 resets it: the handler is told every time, and the connection ends once
    /// the resets pile up.
    @Test func provokedServerResetsEndTheConnection() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        var id: Int32 = 1
        for _ in 0..<150 where !client.isClosed {
            try client.send(
                .request(id, method: "POST", path: "/hang", extra: [("content-length", "1")], endStream: false),
                .data(id, [1, 2], endStream: true)
            )
            id += 2
        }
        let frames = try client.read()
        let resets = frames.filter { $0.type == H2Frame.rstStream }
        #expect(resets.count == HTTP2DoSHeuristics.Limits().serverReset.burst + 1)
        #expect(resets.allSatisfy { $0.errorCode == 0x1 })
        #expect(frames.first { $0.type == H2Frame.goaway }?.goaway?.code == self.calm)
        try client.lingerOver()
        #expect(client.isClosed)
        #expect(client.log.resets.count == client.log.heads.count)
    }

    /// Rapid reset (CVE-2023-44487): the gateway's own limit trips before nghttp2's (which would end the
    /// connection with GOAWAY INTERNAL_ERROR and no log line): ENHANCE_YOUR_CALM and a warning.
    @Test func rapidResetEndsWithEnhanceYourCalmAndAWarning() throws {
        let logs = LogCapture()
        let client = try H2EmbeddedClient(logs: logs)
        defer { client.finish() }
        try client.handshake()
        var bytes: [UInt8] = []
        for index in 0..<1_100 {
            let id = Int32(2 * index + 1)
            bytes += H2Frame.request(id, path: "/hang").bytes + H2Frame.rstStream(id, 0x8).bytes
        }
        try client.send(bytes: bytes)
        try self.expectCalm(client)
        #expect(logs.all.contains { $0.hasPrefix("warning HTTP/2 client flooding") && $0.contains("limit=clientReset") })
    }

    /// GOAWAYs nghttp2 sends on its own (mem_recv succeeds: the codec sees no error) are logged as warnings
    /// naming the error code and nghttp2's reason.
    @Test func aGoawayNghttp2SendsOnItsOwnIsLogged() throws {
        let logs = LogCapture()
        let client = try H2EmbeddedClient(logs: logs)
        defer { client.finish() }
        try client.handshake()
        // A SETTINGS frame with more entries than the 32 the session allows.
        try client.send(.settings((0..<40).map { _ in (0x3, 100) }))
        let frames = try client.read()
        #expect(frames.first { $0.type == H2Frame.goaway }?.goaway?.code == self.calm)
        let line = try #require(logs.all.first { $0.hasPrefix("warning HTTP/2 connection ended with GOAWAY") })
        #expect(line.contains("code=ENHANCE_YOUR_CALM"))
        #expect(line.contains("cause=SETTINGS: too many setting entries"))
        // A dynamic table size update over the size the gateway allows: COMPRESSION_ERROR.
        let other = LogCapture()
        let second = try H2EmbeddedClient(logs: other)
        defer { second.finish() }
        try second.handshake()
        // 0x3f 81 20: table size update to 31 + 4,097 (RFC 7541 §6.3), over the 4,096 the gateway allows.
        try second.send(H2Frame(type: H2Frame.headers, flags: H2Frame.endHeaders | H2Frame.endStream, stream: 1, payload: [0x3f, 0x81, 0x20]))
        #expect(try second.read().first { $0.type == H2Frame.goaway }?.goaway?.code == 0x9)
        #expect(other.all.contains { $0.hasPrefix("warning HTTP/2 connection ended with GOAWAY") && $0.contains("code=COMPRESSION_ERROR") })
    }

    // MARK: Timeouts

    @Test func noPrefaceWithinTheHeaderTimeoutCloses() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.read()
        client.channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(!client.isClosed)
        client.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        try client.read()
        try client.lingerOver()
        #expect(client.isClosed)
    }

    @Test func anUnfinishedHeaderBlockTimesOut() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.headers(1, [(":method", "GET")], endStream: true, endHeaders: false))
        client.channel.embeddedEventLoop.advanceTime(by: .seconds(11))
        let frames = try client.read()
        #expect(frames.contains { $0.type == H2Frame.goaway })
        try client.lingerOver()
        #expect(client.isClosed)
        #expect(client.log.heads.isEmpty)
    }

    /// A header block nghttp2 rejects (an uppercase name: RST_STREAM PROTOCOL_ERROR) or one over the trailer
    /// limit (the codec refuses it: RST_STREAM INTERNAL_ERROR) gets no on_frame_recv; its header read timeout
    /// must end with the block, or it ends the connection later and a healthy upload with it.
    @Test(arguments: ["rejected request head", "oversized trailers"])
    func aRejectedHeaderBlockAffectsOnlyItsStream(_ kind: String) throws {
        var configuration = HTTP2ServerConfiguration()
        configuration.maxHeaderListSize = 1_000
        let client = try H2EmbeddedClient(configuration: configuration)
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, method: "POST", path: "/hang", endStream: false), .data(1, Array("part".utf8)))
        if kind == "rejected request head" {
            try client.send(.request(3, path: "/x", extra: [("X-Upper", "1")]))
        } else {
            try client.send(
                .request(3, method: "POST", path: "/hang", endStream: false),
                .headers(3, [("x-trailer", String(repeating: "t", count: 2_000))], endStream: true)
            )
        }
        let frames = try client.read()
        #expect(frames.first { $0.type == H2Frame.rstStream && $0.stream == 3 }?.errorCode == (kind == "oversized trailers" ? 0x2 : 0x1))
        // The upload on stream 1 stays quiet for longer than the header read timeout (its client waits for
        // the backend, say): no GOAWAY.
        client.channel.embeddedEventLoop.advanceTime(by: .seconds(11))
        try client.send(.data(1, Array("more".utf8)))
        client.channel.embeddedEventLoop.advanceTime(by: .seconds(11))
        let later = try client.read()
        #expect(!later.contains { $0.type == H2Frame.goaway })
        #expect(!client.isClosed)
        #expect(client.log.bodies[1] == Array("partmore".utf8))
        #expect(!client.log.resets.contains { $0.0 == 1 })
    }

    /// A block rejected in its first frame, whose CONTINUATION never comes, still times out: nothing else can
    /// be read on the connection until it does.
    @Test func aRejectedHeaderBlockWaitingForItsContinuationStillTimesOut() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.headers(1, [(":method", "GET"), ("X-Upper", "1")], endStream: true, endHeaders: false))
        try client.read()
        client.channel.embeddedEventLoop.advanceTime(by: .seconds(11))
        let frames = try client.read()
        #expect(frames.contains { $0.type == H2Frame.goaway })
        try client.lingerOver()
        #expect(client.isClosed)
    }

    @Test func anIdleConnectionIsClosedWithGoaway() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/x"))
        try client.read()
        client.channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        #expect(!client.isClosed)
        client.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        let frames = try client.read()
        #expect(frames.first { $0.type == H2Frame.goaway }?.goaway?.code == 0)
        try client.lingerOver()
        #expect(client.isClosed)
    }

    /// A client that announces a body (HEADERS without END_STREAM) and stops sending it gets its stream reset
    /// after the idle timeout, and the handler is told; a stream whose window the gateway keeps shut, or
    /// whose request is complete, is left alone.
    @Test func aStalledRequestBodyIsResetAfterTheIdleTimeout() throws {
        var configuration = HTTP2ServerConfiguration()
        configuration.idleTimeout = .seconds(5)
        configuration.initialWindowSize = 100
        let client = try H2EmbeddedClient(configuration: configuration)
        defer { client.finish() }
        try client.handshake()
        try client.send(
            .request(1, method: "POST", path: "/hang", endStream: false),
            .request(3, path: "/hang"),
            .request(5, method: "POST", path: "/noconsume", endStream: false), .data(5, [UInt8](repeating: 1, count: 100))
        )
        try client.read()
        let loop = client.channel.embeddedEventLoop
        loop.advanceTime(by: .seconds(3))
        try client.send(.data(1, Array("a".utf8)))
        loop.advanceTime(by: .seconds(4))  // 7 s: stream 1 was heard from 4 s ago.
        #expect(try client.read().filter { $0.type == H2Frame.rstStream }.isEmpty)
        loop.advanceTime(by: .seconds(2))  // 9 s: 6 s of silence.
        let frames = try client.read()
        #expect(frames.filter { $0.type == H2Frame.rstStream }.map(\.stream) == [1])
        #expect(frames.first { $0.type == H2Frame.rstStream }?.errorCode == 0x8)
        #expect(client.log.resets.map(\.0) == [1] && client.log.resets.first?.1 == .cancel)
        // Stream 5's window is shut (its handler never reports the bytes consumed): not its client's fault.
        loop.advanceTime(by: .seconds(20))
        #expect(try client.read().filter { $0.type == H2Frame.rstStream }.isEmpty)
        // Once the window opens, its client has the idle timeout to use it.
        try #require(client.log.streams[5]).consumed(bytes: 100)
        try client.read()
        loop.advanceTime(by: .seconds(4))
        #expect(try client.read().filter { $0.type == H2Frame.rstStream }.isEmpty)
        loop.advanceTime(by: .seconds(2))
        #expect(try client.read().filter { $0.type == H2Frame.rstStream }.map(\.stream) == [5])
        #expect(client.log.resets.map(\.0) == [1, 5])
        #expect(!client.isClosed)
    }

    /// Stream handles hold their codec strongly (a weak reference slowed every retain of it); the codec breaks
    /// that cycle as streams go. A closed connection's codec must be freed even while exchanges still hold
    /// handles of its streams, finished or cut off, and those handles must then do nothing.
    @Test func aClosedConnectionsCodecIsFreedWhileHandlesOfItsStreamsAreStillHeld() throws {
        weak var freedCodec: HTTP2ServerCodec?
        var handles: [HTTP2ServerStream] = []
        do {
            let client = try H2EmbeddedClient()
            freedCodec = client.codec
            try client.handshake()
            try client.send(.request(1, path: "/done"), .request(3, path: "/hang"))
            try client.read()
            #expect(client.log.streams.count == 2)
            handles = Array(client.log.streams.values)
            client.finish()
        }
        #expect(freedCodec == nil, "the codec outlived its connection")
        for handle in handles {
            handle.writeHead(HTTPResponseHead(version: .http1_1, status: .ok))
            handle.writeBody(ByteBuffer(string: "late"))
            handle.writeEnd(nil)
            #expect(!handle.isWritable)
        }
    }

    @Test func anOpenStreamKeepsTheConnectionFromIdling() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/hang"))
        client.channel.embeddedEventLoop.advanceTime(by: .seconds(300))
        try client.read()
        #expect(!client.isClosed)
    }

    /// The frame buffer's pages go back to the kernel after a second without streams, once per idle period,
    /// and the next response is still whole (nghttp2 finds zeroed pages, which it never reads before writing).
    @Test(.enabled(if: Int(sysconf(Int32(_SC_PAGESIZE))) == 4096, "the arena maps nothing on larger pages"))
    func anIdleSessionHandsItsFrameBufferPagesBack() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        let arena = try #require(client.codec.arena)
        #expect(arena.mappedBlockCount == 1)
        for stream: Int32 in [1, 3] {
            try client.send(.request(stream, path: "/page\(stream)"))
            let frames = try client.read()
            let body = frames.filter { $0.type == H2Frame.data && $0.stream == stream }.flatMap(\.payload)
            #expect(String(decoding: body, as: UTF8.self) == "GET /page\(stream) example.test\n")
            #expect(client.headerBlocks(frames).first { $0.stream == stream }?.fields.value(":status") == "200")
            #expect(arena.residentMappedBytes > 0)
            client.channel.embeddedEventLoop.advanceTime(by: .milliseconds(900))
            #expect(arena.residentMappedBytes > 0)
            client.channel.embeddedEventLoop.advanceTime(by: .milliseconds(200))
            #expect(arena.residentMappedBytes == 0)
            #expect(arena.mappedBlockCount == 1)
        }
        #expect(!client.isClosed)
        #expect(client.log.resets.isEmpty)
    }

    /// A keep-alive PING answered while idle writes into the frame buffer again; its page goes back at once.
    @Test(.enabled(if: Int(sysconf(Int32(_SC_PAGESIZE))) == 4096, "the arena maps nothing on larger pages"))
    func pagesTouchedByAnIdlePingGoBackToo() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        let arena = try #require(client.codec.arena)
        try client.send(.request(1, path: "/x"))
        try client.read()
        client.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1_100))
        #expect(arena.residentMappedBytes == 0)
        try client.send(.ping())
        let frames = try client.read()
        #expect(frames.contains { $0.type == H2Frame.ping && $0.flags == H2Frame.ack })
        // The ACK was serialized into the buffer (touching its first page); the release follows on the next
        // turn of the loop, which reading already ran.
        client.channel.embeddedEventLoop.run()
        #expect(arena.residentMappedBytes == 0)
        #expect(!client.isClosed)
    }

    @Test func aSessionWithAStreamOpenKeepsItsFrameBufferPages() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        let arena = try #require(client.codec.arena)
        try client.send(.request(1, path: "/hang"))
        try client.read()
        client.channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(arena.residentMappedBytes > 0)
    }

    @Test func notHTTP2AtAllIsClosedWithoutAnswer() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.read()
        try client.send(bytes: Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        try client.read()
        #expect(client.isClosed)
        #expect(client.log.heads.isEmpty)
    }
}

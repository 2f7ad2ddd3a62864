//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
import TokengateHTTPTestSupport
@testable import TokengateHTTP

@testable import TokengateGateway

/// Storage of finished HTTP/2 streams kept for the next ones (``HTTP2StreamSpares``).
@Suite struct HTTP2StreamSparesTests {
    private func upstreamHead(_ status: HTTPResponseStatus, _ fields: [(String, String)]) throws -> UpstreamResponseHead {
        try UpstreamResponseHead(HTTPResponseHead(version: .http1_1, status: status, headers: HTTPHeaders(fields)))
    }

    /// A block written into an emptied block's storage is the block a fresh one would be, whether the new head
    /// is smaller or larger than the one before.
    @Test func aBlockInReusedStorageEqualsAFreshOne() throws {
        let heads = [
            try self.upstreamHead(.ok, [("Content-Type", "application/json"), ("Set-Cookie", "a=1"), ("X-Long", String(repeating: "v", count: 300))]),
            try self.upstreamHead(.notFound, [("Content-Length", "0")]),
            try self.upstreamHead(.created, (0..<20).map { ("X-F\($0)", "value \($0)") } + [("Connection", "x-f3")]),
            try self.upstreamHead(.ok, []),
        ]
        var block = HTTP2HeaderBlock()
        for (index, head) in heads.enumerated() {
            let fresh = try #require(HTTP2HeaderBlock.response(fromUpstream: head, close: index == 1, hsts: "max-age=31536000"))
            let written = block.writeResponse(fromUpstream: head, close: index == 1, hsts: "max-age=31536000")
            #expect(written)
            #expect(block == fresh, "head \(index)")
            #expect(block.names == fresh.names && block.neverIndex == fresh.neverIndex)
        }
        // The storage is really reused: written over, a big block's storage keeps its capacity for a small head.
        _ = block.writeResponse(fromUpstream: heads[2], close: false, hsts: "max-age=31536000")
        let bigCapacity = block.storageCapacity
        _ = block.writeResponse(fromUpstream: heads[1], close: false, hsts: "max-age=31536000")
        #expect(block.storageCapacity == bigCapacity)
        // An informational head leaves nothing behind.
        let interim = block.writeResponse(fromUpstream: try self.upstreamHead(.continue, []), close: false, hsts: "max-age=31536000")
        #expect(!interim && block.count == 0 && block.names.isEmpty)
    }

    @Test func atMostTheLimitIsKeptSmallBlocksOnlyAndReleaseLetsAllGo() throws {
        var spares = HTTP2StreamSpares()
        for _ in 0..<(HTTP2StreamSpares.limit + 3) {
            spares.giveBack(body: CircularBuffer(initialCapacity: 4))
            spares.giveBack(headerBlock: try #require(HTTP2HeaderBlock.response(fromUpstream: try self.upstreamHead(.ok, []), close: false, hsts: "max-age=31536000")))
        }
        #expect(spares.keptBodies == HTTP2StreamSpares.limit && spares.keptHeaderBlocks == HTTP2StreamSpares.limit)
        var body = CircularBuffer<ByteBuffer>(initialCapacity: 4)
        body.append(ByteBuffer(string: "queued"))
        spares.release()
        spares.giveBack(body: body)  // Not empty: not kept.
        let huge = try self.upstreamHead(.ok, [("X-Huge", String(repeating: "h", count: HTTP2StreamSpares.maxKeptHeaderBlockBytes))])
        spares.giveBack(headerBlock: try #require(HTTP2HeaderBlock.response(fromUpstream: huge, close: false, hsts: "max-age=31536000")))
        #expect(spares.keptBodies == 0 && spares.keptHeaderBlocks == 0)
        #expect(spares.takeBody().isEmpty && spares.takeHeaderBlock() == nil)
    }

    /// Through the codec: backend heads of successive streams, each written into the storage the stream before
    /// left, reach the client whole; a connection idle for a while keeps nothing.
    @Test func successiveStreamsReuseStorageAndAConnectionIdleForAWhileKeepsNone() throws {
        let client = try H2EmbeddedClient()
        defer { client.finish() }
        try client.handshake()
        try client.send(.request(1, path: "/hang"))  // Keeps the connection busy throughout.
        try client.read()
        let heads: [(Int32, [(String, String)])] = [
            (3, [("Content-Type", "text/plain"), ("X-A", String(repeating: "a", count: 200))]),
            (5, [("X-B", "b")]),
            (7, (0..<12).map { ("X-C\($0)", "c\($0)") }),
        ]
        for (stream, fields) in heads {
            try client.send(.request(stream, path: "/hang"))
            try client.read()
            let handle = try #require(client.log.streams[stream])
            handle.writeHead(fromUpstream: try self.upstreamHead(.ok, fields), close: false, hsts: "max-age=31536000")
            handle.writeBody(ByteBuffer(string: "body \(stream)"))
            handle.writeEnd(nil)
            let frames = try client.read()
            let block = try #require(client.headerBlocks(frames).first { $0.stream == stream })
            #expect(block.fields.first?.0 == ":status" && block.fields.value(":status") == "200")
            for (name, value) in fields {
                #expect(block.fields.value(name.lowercased()) == value, "stream \(stream) field \(name)")
            }
            #expect(block.fields.count == fields.count + 2, "stream \(stream): :status, the fields, HSTS")
            let body = frames.filter { $0.type == H2Frame.data && $0.stream == stream }.flatMap(\.payload)
            #expect(String(decoding: body, as: UTF8.self) == "body \(stream)")
            #expect(client.codec.spares.keptHeaderBlocks == 1, "stream \(stream)")
        }
        try client.send(.rstStream(1, 0x8))
        try client.read()
        // No stream open: kept for the next batch of requests a moment longer, then let go.
        #expect(client.codec.spares.keptBodies > 0 && client.codec.spares.keptHeaderBlocks == 1)
        client.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(client.codec.spares.keptBodies == 0 && client.codec.spares.keptHeaderBlocks == 0)
        #expect(!client.isClosed)
    }
}

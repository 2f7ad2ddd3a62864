//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import TokengateGateway

@Suite struct PlainHTTPOnTLSPortHandlerTests {
    private func channel(refused: @escaping () -> Void = {}) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(PlainHTTPOnTLSPortHandler(logger: Logger(label: "test"), onRefused: refused))
        return channel
    }

    @Test func aTLSHelloPassesUntouchedAndTheHandlerLeaves() throws {
        let channel = try self.channel()
        let hello = ByteBuffer(bytes: [0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5])
        try channel.writeInbound(hello)
        #expect(try channel.readInbound(as: ByteBuffer.self) == hello)
        #expect(throws: (any Error).self, "removed after the first read") {
            try channel.pipeline.syncOperations.handler(type: PlainHTTPOnTLSPortHandler.self)
        }
        // What follows is not looked at: a later "G" is TLS record payload, not a method.
        try channel.writeInbound(ByteBuffer(string: "GET"))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "GET"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        _ = try channel.finish()
    }

    @Test func anEmptyReadDecidesNothing() throws {
        let channel = try self.channel()
        try channel.writeInbound(ByteBuffer())
        #expect(try channel.pipeline.syncOperations.handler(type: PlainHTTPOnTLSPortHandler.self) != nil)
        _ = try channel.finish()
    }

    @Test func aPlainRequestGetsA400AndTheConnectionCloses() throws {
        var refusals = 0
        let channel = try self.channel { refusals += 1 }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try channel.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil, "nothing reaches the TLS handler")
        let response = try #require(try channel.readOutbound(as: ByteBuffer.self))
        let text = String(buffer: response)
        #expect(text.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(text)")
        #expect(text.contains("\"error\":\"tls_required\"") && text.lowercased().contains("connection: close"))
        #expect(refusals == 1)
        #expect(!channel.isActive, "closed after the answer")
    }
}

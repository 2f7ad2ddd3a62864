//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateOpenSSL
import Logging
import NIOCore
import NIOEmbedded
import Testing
import TokengateTLS

@Suite struct TLSHandlerTests {
    let localhost: TestCertificate
    let other: TestCertificate

    init() throws {
        self.localhost = try TestCertificate.make(["localhost", "127.0.0.1"])
        self.other = try TestCertificate.make(["api.example.com", "*.apps.example.com"])
    }

    @Test func handshakeNegotiatesALPNByServerPreference() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["h2", "http/1.1"])
        let client = try TLSClientContext(
            trustRootsPath: self.localhost.certificatePath,
            alpnProtocols: ["http/1.1", "h2"]
        )
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.connect()

        let serverHandshake = try #require(pair.serverRecorder.handshake)
        let clientHandshake = try #require(pair.clientRecorder.handshake)
        #expect(serverHandshake.protocol == "h2")
        #expect(clientHandshake.protocol == "h2")
        #expect(serverHandshake.serverName == "localhost")
        #expect(serverHandshake.version == "TLSv1.3")
        #expect(pair.serverRecorder.errors.isEmpty)
        #expect(pair.clientRecorder.errors.isEmpty)
    }

    @Test func clientVerifiesIPAddressSANsAndRejectsWrongNames() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var byIP = try ChannelPair(server: server, client: client, serverHostname: "127.0.0.1")
        defer { byIP.finish() }
        try byIP.connect()
        #expect(byIP.clientRecorder.errors.isEmpty)
        #expect(try #require(byIP.clientRecorder.handshake).serverName == nil, "no SNI for IP literals")

        var wrongName = try ChannelPair(server: server, client: client, serverHostname: "evil.example")
        defer { wrongName.finish() }
        try wrongName.connect()
        let error = try #require(wrongName.clientRecorder.errors.first as? TLSError)
        #expect(error.code == .handshakeFailed)
        #expect(error.message.contains("hostname mismatch"), "\(error.message)")
    }

    @Test func noALPNOverlapContinuesForHTTP1Lists() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath, alpnProtocols: ["spdy/3"])
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.connect()
        let handshake = try #require(pair.serverRecorder.handshake)
        #expect(handshake.protocol == nil)
    }

    @Test func noALPNOverlapFailsForH2OnlyLists() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["h2"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath, alpnProtocols: ["http/1.1"])
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.connect()
        #expect(pair.serverRecorder.handshake == nil)
        #expect(pair.serverRecorder.tlsErrorCodes == [.handshakeFailed])
        let clientError = try #require(pair.clientRecorder.errors.first as? TLSError)
        #expect(clientError.message.contains("no_application_protocol"))
        #expect(!pair.server.isActive)
    }

    @Test func sniPicksTheMatchingCertificate() throws {
        let server = try TLSServerContext(
            certificates: [self.localhost.source, self.other.source],
            alpnProtocols: ["http/1.1"]
        )
        #expect(server.serverNames == [["localhost"], ["api.example.com", "*.apps.example.com"]])
        // The client trusts only the second certificate, so the handshake succeeds only if SNI selected it.
        for name in ["api.example.com", "Shop.Apps.Example.com"] {
            let client = try TLSClientContext(trustRootsPath: self.other.certificatePath)
            var pair = try ChannelPair(server: server, client: client, serverHostname: name)
            defer { pair.finish() }
            try pair.connect()
            #expect(pair.clientRecorder.errors.isEmpty, "\(name): \(pair.clientRecorder.errors)")
            let handshake = try #require(pair.serverRecorder.handshake)
            #expect(handshake.serverName == name.lowercased())
        }
    }

    @Test func withoutSNIOrUnknownNameTheFirstCertificateIsServed() throws {
        let server = try TLSServerContext(
            certificates: [self.localhost.source, self.other.source],
            alpnProtocols: ["http/1.1"]
        )
        // Trusting only the first certificate: without SNI it must be the one presented.
        let trustsFirst = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var pair = try ChannelPair(server: server, client: trustsFirst, serverHostname: nil)
        defer { pair.finish() }
        try pair.connect()
        #expect(pair.clientRecorder.errors.isEmpty)
        #expect(try #require(pair.serverRecorder.handshake).serverName == nil)

        // An unknown name also gets the default, which fails verification for a client trusting the second.
        let trustsSecond = try TLSClientContext(trustRootsPath: self.other.certificatePath)
        var unknown = try ChannelPair(server: server, client: trustsSecond, serverHostname: "a.b.apps.example.com")
        defer { unknown.finish() }
        try unknown.connect()
        let error = try #require(unknown.clientRecorder.errors.first as? TLSError)
        #expect(error.code == .handshakeFailed)
        #expect(error.message.contains("certificate verify failed"))
    }

    @Test func dataFlowsBothWaysAndLargeWritesAreSplitIntoRecords() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.connect()
        pair.clientWrites.removeAll()

        var big = ByteBuffer()
        for i in 0..<(1 << 20) {
            big.writeInteger(UInt8(truncatingIfNeeded: i &* 31))
        }
        let written = pair.client.writeAndFlush(big)
        try pair.interactInMemory()
        try written.wait()
        #expect(pair.clientWrites.count == 1, "one network write per flush")
        let recordCount = (1 << 20) / 16_384
        #expect(pair.clientWrites[0] > 1 << 20 && pair.clientWrites[0] <= (1 << 20) + (recordCount + 1) * 29)
        #expect(pair.serverRecorder.received == big)

        try pair.server.writeAndFlush(ByteBuffer(string: "pong")).wait()
        try pair.interactInMemory()
        #expect(pair.clientRecorder.received == ByteBuffer(string: "pong"))
    }

    @Test func applicationDataInTheSameReadAsTheClientFinishedIsDelivered() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try pair.client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        let clientHello = try #require(try pair.client.readOutbound(as: ByteBuffer.self))
        try pair.server.writeInbound(clientHello)
        while let flight = try pair.server.readOutbound(as: ByteBuffer.self) {
            try pair.client.writeInbound(flight)
        }
        // The TLS 1.3 client is done; its Finished and its first request leave together.
        pair.client.writeAndFlush(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"), promise: nil)
        var coalesced = ByteBuffer()
        while var bytes = try pair.client.readOutbound(as: ByteBuffer.self) {
            coalesced.writeBuffer(&bytes)
        }
        try pair.server.writeInbound(coalesced)
        #expect(pair.serverRecorder.handshake != nil)
        #expect(pair.serverRecorder.received == ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"))
    }

    @Test func smallWritesOfOneFlushShareARecord() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.connect()
        pair.serverWrites.removeAll()
        let header = String(repeating: "h", count: 300)
        let body = String(repeating: "b", count: 200)
        pair.server.write(ByteBuffer(string: header), promise: nil)
        let last = pair.server.writeAndFlush(ByteBuffer(string: body))
        try pair.interactInMemory()
        try last.wait()
        #expect(pair.clientRecorder.received == ByteBuffer(string: header + body))
        // TLS 1.3 with AES-GCM: one record is 5 + 500 + 1 + 16 bytes; two would be 22 bytes more.
        #expect(pair.serverWrites == [500 + 22])
    }

    /// The staging buffer for small writes is allocated per flush and freed after it (so idle connections hold
    /// none): every path that ends or restarts it — end of flush, a large write in between, more small bytes
    /// than one record — must keep the bytes in order, one network write per flush.
    @Test func smallAndLargeWritesAcrossFlushesArriveInOrder() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.connect()
        pair.serverWrites.removeAll()

        let flushes: [[(UInt8, Int)]] = [
            [(0x61, 300), (0x62, 200)],  // both staged
            [(0x63, 100), (0x64, 6_000), (0x65, 50)],  // staged, large (ends staging), staged anew
            [(0x66, 4_000), (0x67, 4_000), (0x68, 4_000), (0x69, 4_000), (0x6A, 4_000)],  // over one record
            [(0x7A, 1)],
        ]
        var expected = ByteBuffer()
        for flush in flushes {
            var last: EventLoopFuture<Void>?
            for (byte, count) in flush {
                let chunk = ByteBuffer(repeating: byte, count: count)
                expected.writeImmutableBuffer(chunk)
                let promise = pair.server.eventLoop.makePromise(of: Void.self)
                pair.server.write(chunk, promise: promise)
                last = promise.futureResult
            }
            pair.server.flush()
            try pair.interactInMemory()
            try #require(last).wait()
        }
        #expect(pair.clientRecorder.received == expected)
        #expect(pair.serverWrites.count == flushes.count, "one network write per flush")
    }

    @Test func writesDuringTheHandshakeAreBufferedUntilFlushedAndSent() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try pair.client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        let early = pair.client.writeAndFlush(ByteBuffer(string: "early"))
        pair.client.write(ByteBuffer(string: " unflushed"), promise: nil)
        try pair.interactInMemory()
        try early.wait()
        #expect(pair.serverRecorder.received == ByteBuffer(string: "early"))
        pair.client.flush()
        try pair.interactInMemory()
        #expect(pair.serverRecorder.received == ByteBuffer(string: "early unflushed"))
    }

    @Test func closeNotifyFromTheClient() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.connect()

        let closed = pair.client.close()
        #expect(pair.client.isActive, "the client waits for the server's close_notify")
        try pair.interactInMemory()
        try closed.wait()
        #expect(!pair.client.isActive)
        #expect(!pair.server.isActive)
        #expect(pair.serverRecorder.userEvents.last == .shutdownCompleted)
        #expect(pair.clientRecorder.userEvents.last == .shutdownCompleted)
        #expect(pair.serverRecorder.errors.isEmpty)
        #expect(pair.clientRecorder.errors.isEmpty)
    }

    @Test func closeNotifyFromTheServerDeliversDataFirst() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.connect()

        pair.server.writeAndFlush(ByteBuffer(string: "bye"), promise: nil)
        let closed = pair.server.close()
        try pair.interactInMemory()
        try closed.wait()
        #expect(pair.clientRecorder.received == ByteBuffer(string: "bye"))
        #expect(!pair.client.isActive)
        #expect(!pair.server.isActive)
        #expect(pair.clientRecorder.userEvents.last == .shutdownCompleted)
        #expect(pair.serverRecorder.userEvents.last == .shutdownCompleted)
    }

    @Test func closeNotifyWaitIsBounded() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.connect()
        let closed = pair.server.close()
        _ = try pair.server.readOutbound(as: ByteBuffer.self)  // the close_notify never reaches the client
        #expect(pair.server.isActive)
        pair.server.embeddedEventLoop.advanceTime(by: .seconds(4))
        try closed.wait()
        #expect(!pair.server.isActive)
    }

    @Test func eofWithoutCloseNotifyIsAnUncleanShutdown() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.connect()
        pair.server.pipeline.fireChannelInactive()
        #expect(pair.serverRecorder.tlsErrorCodes == [.uncleanShutdown])
        #expect(pair.serverRecorder.inactive)
    }

    @Test func garbageFailsTheHandshakeAndCloses() throws {
        let context = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let recorder = EventRecorder()
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.pipeline.syncOperations.addHandler(TLSHandler(context: context, logger: ChannelPair.logger))
        try channel.pipeline.syncOperations.addHandler(recorder)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try channel.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(recorder.tlsErrorCodes == [.handshakeFailed])
        let error = try #require(recorder.errors.first as? TLSError)
        #expect(error.message.contains("wrong version number") || error.message.contains("http request"))
        #expect(!channel.isActive)
    }

    @Test func handshakeTimeoutClosesTheChannel() throws {
        let context = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let recorder = EventRecorder()
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.pipeline.syncOperations.addHandler(
            TLSHandler(context: context, handshakeTimeout: .seconds(5), logger: ChannelPair.logger)
        )
        try channel.pipeline.syncOperations.addHandler(recorder)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        channel.embeddedEventLoop.advanceTime(by: .seconds(4))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(recorder.tlsErrorCodes == [.handshakeTimeout])
        #expect(!channel.isActive)
    }

    @Test func tls11ClientIsRefused() throws {
        let context = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let recorder = EventRecorder()
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.pipeline.syncOperations.addHandler(TLSHandler(context: context, logger: ChannelPair.logger))
        try channel.pipeline.syncOperations.addHandler(recorder)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()

        // A raw OpenSSL client limited to TLS 1.1 (security level 0 so that it is willing to try).
        let clientContext = try #require(SSL_CTX_new(TLS_client_method()))
        defer { SSL_CTX_free(clientContext) }
        #expect(SSL_CTX_ctrl(clientContext, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_VERSION), nil) == 1)
        #expect(SSL_CTX_ctrl(clientContext, SSL_CTRL_SET_MAX_PROTO_VERSION, Int(TLS1_1_VERSION), nil) == 1)
        #expect(SSL_CTX_set_cipher_list(clientContext, "DEFAULT@SECLEVEL=0") == 1)
        let ssl = try #require(SSL_new(clientContext))
        defer { SSL_free(ssl) }
        let readBIO = BIO_new(BIO_s_mem())
        let writeBIO = BIO_new(BIO_s_mem())
        SSL_set_bio(ssl, readBIO, writeBIO)
        SSL_set_connect_state(ssl)

        var clientResult: Int32 = 0
        for _ in 0..<10 {
            clientResult = SSL_do_handshake(ssl)
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = BIO_read(writeBIO, &chunk, Int32(chunk.count))
            if n > 0, channel.isActive {
                try channel.writeInbound(ByteBuffer(bytes: chunk[0..<Int(n)]))
            }
            while let reply = try channel.readOutbound(as: ByteBuffer.self) {
                _ = reply.withUnsafeReadableBytes { BIO_write(readBIO, $0.baseAddress, Int32($0.count)) }
            }
            if clientResult == 1 || !channel.isActive {
                break
            }
        }
        #expect(clientResult != 1)
        #expect(SSL_do_handshake(ssl) != 1, "the client sees the server's alert")
        #expect(recorder.tlsErrorCodes == [.handshakeFailed])
        let error = try #require(recorder.errors.first as? TLSError)
        #expect(error.message.contains("protocol"), "\(error.message)")
        #expect(!channel.isActive)
    }

    @Test func writesAfterCloseFail() throws {
        let server = try TLSServerContext(certificates: [self.localhost.source], alpnProtocols: ["http/1.1"])
        let client = try TLSClientContext(trustRootsPath: self.localhost.certificatePath)
        var pair = try ChannelPair(server: server, client: client, serverHostname: "localhost")
        defer { pair.finish() }
        try pair.connect()
        pair.client.close(promise: nil)
        let late = pair.client.writeAndFlush(ByteBuffer(string: "late"))
        #expect(throws: ChannelError.ioOnClosedChannel) { try late.wait() }
    }
}

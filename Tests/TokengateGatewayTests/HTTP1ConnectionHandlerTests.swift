//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Prometheus
import Testing
import TokengateConfig
import TokengateHTTP
import TokengateHTTPTestSupport
import TokengateTokens

@testable import TokengateGateway

/// The HTTP/1.1 codec and the exchange's own answers on an EmbeddedChannel: no sockets, no backend
/// (the upstream is never reached in these cases), time and bytes under the test's control.
@Suite struct HTTP1ConnectionHandlerTests {
    /// A channel with the gateway's HTTP/1.1 pipeline (without TLS) and a generation built from a small
    /// configuration; the keys are generated in a temp directory.
    private func makeChannel() throws -> (EmbeddedChannel, TokenSigner, () -> Void) {
        let directory = NSTemporaryDirectory() + "tokengate-h1-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only")
        try keys.publicJWKS.write(toFile: directory + "/public.jwks", atomically: true, encoding: .utf8)
        let yaml = """
            listen:
              - address: 127.0.0.1:8443
                tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
            keys: [ { jwks: public.jwks } ]
            cutoffs: { file: cutoffs.json }
            realm: unit
            upstreams:
              api: { targets: [ "http://127.0.0.1:9" ] }
            routes:
              - { path_prefix: /api/, upstream: api, accept: [api], sources: [authorization, "form:access_token"] }
            """
        let configuration = try GatewayConfiguration(yaml: yaml, sourcePath: directory + "/tokengate.yaml", checkFiles: false)
        let channel = EmbeddedChannel()
        let runtime = try GatewayRuntime.build(from: configuration, cutoffs: CutoffSnapshotHolder(.empty), redeemedCodes: .forTest())
        let generation = GatewayGenerationHolder(
            GatewayGeneration(
                runtime: runtime,
                configuration: configuration,
                group: channel.embeddedEventLoop,
                logger: Logger(label: "test")
            )
        )
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(
            GatewayServer.http1Handler(limits: configuration.limits) { readDeadlines in
                HTTP1ConnectionHandler(generations: generation, clientAddress: "192.0.2.1", readDeadlines: readDeadlines, logger: Logger(label: "test"))
            }
        )
        // An EmbeddedChannel is inactive until connected; the close checks below need a live one.
        try channel.connect(to: try SocketAddress(ipAddress: "192.0.2.1", port: 40000)).wait()
        #expect(channel.isActive)
        let signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        return (channel, signer, { try? FileManager.default.removeItem(atPath: directory) })
    }

    private func send(_ channel: EmbeddedChannel, _ text: String) throws {
        try channel.writeInbound(ByteBuffer(string: text))
    }

    private func output(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
            text += buffer.readString(length: buffer.readableBytes) ?? ""
        }
        return text
    }

    @Test func anAnswerWithoutBodyKeepsTheConnectionForTheNextRequest() throws {
        let (channel, _, cleanup) = try self.makeChannel()
        defer { cleanup(); _ = try? channel.finish() }
        try self.send(channel, "GET /api/a HTTP/1.1\r\nHost: x\r\n\r\nGET /api/a?access_token=t HTTP/1.1\r\nHost: x\r\n\r\n")
        let text = try self.output(channel)
        #expect(text.components(separatedBy: "HTTP/1.1 401").count == 2, "\(text)")
        #expect(text.contains("HTTP/1.1 400"), "the pipelined second request is answered on the same connection")
        #expect(text.contains("tokens must not be sent in the URL"))
        #expect(channel.isActive, "\(text)")
    }

    @Test func anAnswerBeforeAnUnreadBodyClosesTheConnection() throws {
        let (channel, _, cleanup) = try self.makeChannel()
        defer { cleanup(); _ = try? channel.finish() }
        try self.send(channel, "POST /api/a HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nabc")
        let text = try self.output(channel)
        #expect(text.hasPrefix("HTTP/1.1 401"), "\(text)")
        #expect(text.lowercased().contains("connection: close"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive, "the refused body is never read to its end")
    }

    @Test func framingProblemsGet400AndClose() throws {
        for request in [
            "GET /api/a HTTP/1.1\r\n\r\n",
            "GET /api/a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "POST /api/a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            "POST /api/a HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        ] {
            let (channel, _, cleanup) = try self.makeChannel()
            defer { cleanup(); _ = try? channel.finish() }
            try? self.send(channel, request)
            let text = try self.output(channel)
            #expect(text.hasPrefix("HTTP/1.1 400"), "\(request.debugDescription): \(text)")
            #expect(!channel.isActive, "\(request.debugDescription) left the connection open")
        }
    }

    @Test func aHeadOverItsLimitGets431OrForItsTarget414AndNothingIsForwarded() throws {
        // The defaults: max_header_bytes 16 KiB (request line and fields), max_uri_bytes 8 KiB.
        for (request, status) in [
            ("GET /api/a HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 20_000))\r\n\r\n", "431"),
            ("GET /api/\(String(repeating: "a", count: 20_000)) HTTP/1.1\r\nHost: x\r\n\r\n", "414"),
            ("GET /api/\(String(repeating: "a", count: 9_000)) HTTP/1.1\r\nHost: x\r\n\r\n", "414"),
            ("GET /api/a HTTP/1.1\r\n" + String(repeating: "A: 1\r\n", count: 300) + "\r\n", "431"),
        ] {
            let (channel, _, cleanup) = try self.makeChannel()
            defer { cleanup(); _ = try? channel.finish() }
            // In pieces, as a client dribbling a large head would send it.
            let bytes = Array(request.utf8)
            for start in stride(from: 0, to: bytes.count, by: 4096) {
                try? channel.writeInbound(ByteBuffer(bytes: bytes[start..<min(start + 4096, bytes.count)]))
            }
            let text = try self.output(channel)
            #expect(text.hasPrefix("HTTP/1.1 \(status)"), "\(request.prefix(40)): \(text.prefix(200))")
            #expect(!channel.isActive, "\(request.prefix(40)) left the connection open")
        }
    }

    @Test func aLongPipelineAnsweredByTheGatewayItselfComesBackInOrderOnTheSameConnection() throws {
        let (channel, _, cleanup) = try self.makeChannel()
        defer { cleanup(); _ = try? channel.finish() }
        // 500 requests in one read, each refused (401) inside the read that brought it: answered one after the
        // other without the parse loop nesting once per request.
        var pipeline = ""
        for index in 0..<500 {
            pipeline += "GET /api/\(index) HTTP/1.1\r\nHost: x\r\n\r\n"
        }
        try self.send(channel, pipeline + "GET /api/last HTTP/1.1\r\nHo")
        var text = try self.output(channel)
        #expect(text.components(separatedBy: "HTTP/1.1 401").count == 501, "\(text.prefix(300))")
        #expect(channel.isActive)
        // The head split across reads is taken up where it stopped.
        try self.send(channel, "st: x\r\n\r\n")
        text = try self.output(channel)
        #expect(text.hasPrefix("HTTP/1.1 401"), "\(text.prefix(200))")
        #expect(channel.isActive)
    }

    @Test func aClientThatSendsRequestsButTakesNoAnswersHasNoMoreAnswersQueuedForIt() throws {
        let (channel, _, cleanup) = try self.makeChannel()
        defer { cleanup(); _ = try? channel.finish() }
        let reads = ReadCounter()
        try channel.pipeline.syncOperations.addHandler(reads, position: .first)
        // Refused by the gateway itself, each answered at once: nothing but the client's reading bounds them.
        let pipeline = String(repeating: "GET /api/a HTTP/1.1\r\nHost: x\r\n\r\n", count: 50)
        try self.send(channel, pipeline)
        #expect(try self.output(channel).components(separatedBy: "HTTP/1.1 401").count == 51)
        // The answers pile up unread (the socket's buffer is over its high watermark): NIO says so with a
        // writability event, from inside the write that crossed the watermark.
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        try self.send(channel, pipeline)
        #expect(try self.output(channel).isEmpty, "no answer is queued for a client that takes none")
        channel.read()
        #expect(reads.count == 0, "nor is more read from it")
        try self.send(channel, pipeline)  // What a TLS handler still had decrypted.
        #expect(try self.output(channel).isEmpty)
        // The client reads again: everything it sent is answered, in order, and reading resumes.
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(try self.output(channel).components(separatedBy: "HTTP/1.1 401").count == 101)
        #expect(reads.count == 1, "the read held back is passed on")
        #expect(channel.isActive)
    }

    @Test func bytesThatAreNotHTTPGet400WithWhatIsWrongAndAClose() throws {
        for (request, what) in [
            ("GET / HTTP/1.1\nHost: x\n\n", "a bare LF"),
            ("GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", "request line"),
            ("FROB /api/a HTTP/1.1\r\nHost: x\r\n\r\n", "unknown method"),
            ("GET /api/a HTTP/2.0\r\nHost: x\r\n\r\n", "unsupported HTTP version"),
            ("\u{16}\u{3}\u{1}\u{0}", "not valid HTTP/1.1"),  // A TLS record: refused at once, not at the header timeout.
            ("\u{16}\u{3}\u{1}", "method"),
            ("GET /api/a HTTP/1.1\r\nX-A: a\u{0}", "NUL"),  // An unfinished head: refused at once too.
        ] {
            let (channel, _, cleanup) = try self.makeChannel()
            defer { cleanup(); _ = try? channel.finish() }
            try? self.send(channel, request)
            let text = try self.output(channel)
            #expect(text.hasPrefix("HTTP/1.1 400") && text.contains(what), "\(request.debugDescription): \(text)")
            #expect(!channel.isActive)
        }
    }

    @Test func aFormTokenThatIsBadIsReadFromTheBodyAndRefused() throws {
        let (channel, signer, cleanup) = try self.makeChannel()
        defer { cleanup(); _ = try? channel.finish() }
        var token = try signer.mint(
            TokenClaims(subject: "u", issuedAt: Int64(Date().timeIntervalSince1970), apiOnly: true, expiresAt: nil, notBefore: nil, issuer: nil, audience: nil)
        )
        token.removeLast(3)
        token += "AAA"
        let body = "access_token=\(token)"
        try self.send(
            channel,
            "POST /api/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
        )
        #expect(try self.output(channel).isEmpty, "nothing is answered before the body is read")
        try self.send(channel, body)
        let text = try self.output(channel)
        #expect(text.hasPrefix("HTTP/1.1 401"), "\(text)")
        #expect(text.contains("error=\"invalid_token\""))
        #expect(!text.lowercased().contains("connection: close"), "the body was read whole: keep-alive goes on")
    }

    @Test func aDribbledRequestHeadIsCutOffAtTheHeaderTimeout() throws {
        let (channel, _, cleanup) = try self.makeChannel()
        defer { cleanup(); _ = try? channel.finish() }
        try self.send(channel, "GET /api/a HTTP/1.1\r\nHost: x\r\n")
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        try self.send(channel, "X-Slow: 1\r\n")
        #expect(channel.isActive, "still within the deadline")
        channel.embeddedEventLoop.advanceTime(by: .seconds(6))
        #expect(!channel.isActive, "a head still incomplete after the header timeout ends the connection")
    }

    @Test func aKeepAliveConnectionMayWaitQuietlyBetweenRequests() throws {
        let (channel, _, cleanup) = try self.makeChannel()
        defer { cleanup(); _ = try? channel.finish() }
        try self.send(channel, "GET /api/a HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try self.output(channel).hasPrefix("HTTP/1.1 401"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        #expect(channel.isActive, "between requests the idle timeout applies, not the header timeout")
        try self.send(channel, "GET /api/b HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try self.output(channel).hasPrefix("HTTP/1.1 401"))
    }

    @Test func theIdleTimeoutClosesAQuietConnectionAndEveryReadRestartsIt() throws {
        let (channel, _, cleanup) = try self.makeChannel()
        defer { cleanup(); _ = try? channel.finish() }
        channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        #expect(channel.isActive, "the default idle timeout is 60 s")
        try self.send(channel, "GET /api/a HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try self.output(channel).hasPrefix("HTTP/1.1 401"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        #expect(channel.isActive, "the request restarted the idle period")
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive, "60 s without a byte from the client")
    }

    /// The idle timer holds the handler strongly (a weak reference would put every retain of it on the slow path):
    /// the cycle must end when the connection does, whether it closes while idle, mid-head or mid-exchange.
    @Test(arguments: ["", "GET /api/a HTTP/1.1\r\nHost: x\r\n", "POST /api/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 40\r\n\r\nacc"])
    func theHandlerIsFreedWhenItsConnectionCloses(sent: String) throws {
        weak var freed: HTTP1ConnectionHandler?
        do {
            let (channel, _, cleanup) = try self.makeChannel()
            defer { cleanup() }
            freed = try channel.pipeline.syncOperations.handler(type: HTTP1ConnectionHandler.self)
            if !sent.isEmpty {
                try self.send(channel, sent)
            }
            try channel.close().wait()
            _ = try? channel.finish()
            channel.embeddedEventLoop.run()
        }
        #expect(freed == nil, "the connection handler outlived its connection")
    }

    @Test func aClientThatStopsSendingItsBodyIsCutOffAtTheIdleTimeout() throws {
        let (channel, _, cleanup) = try self.makeChannel()
        defer { cleanup(); _ = try? channel.finish() }
        // The route may find its token in a form body: the exchange reads the body before anything goes upstream.
        try self.send(
            channel,
            "POST /api/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 40\r\n\r\naccess"
        )
        channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        #expect(channel.isActive, "a whole head: the header timeout is over, and 59 s is within the idle timeout")
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive, "60 s without a byte of the announced body ends the connection")
    }
}

/// Counts the reads that reach the channel from the handlers after it.
private final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = Never
    var count = 0

    func read(context: ChannelHandlerContext) {
        self.count += 1
        context.read()
    }
}

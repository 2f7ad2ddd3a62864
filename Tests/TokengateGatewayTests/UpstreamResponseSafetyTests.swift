//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOPosix
import Testing
import TokengateHTTP
import TokengateHTTPTestSupport

@testable import TokengateGateway

/// A pooled upstream connection serves many users in turn: whatever a backend sends, one client's request
/// must never be answered with bytes meant for another, and a response the gateway cannot frame for sure is
/// a 502, never a guess.
@Suite struct UpstreamResponseSafetyTests {
    private func withScriptedGateway(_ script: @escaping ScriptedBackend.Script, _ body: (GatewayHarness, ScriptedBackend) async throws -> Void) async throws {
        try await self.withReplyingGateway({ index, head in
            let (response, close) = script(index, head)
            return ScriptedBackend.Reply(response: response, close: close)
        }, body)
    }

    /// `options` go into the upstream's YAML mapping after its settings (`, keep_alive: false`).
    private func withReplyingGateway(
        options: String = "",
        _ replies: @escaping ScriptedBackend.ReplyScript,
        _ body: (GatewayHarness, ScriptedBackend) async throws -> Void
    ) async throws {
        let harness = GatewayHarness()
        let backend = try await ScriptedBackend.start(group: harness.group, replies: replies)
        do {
            try await harness.start(
                upstreams: "  api: { targets: [ \"http://127.0.0.1:\(backend.port)\" ], connect_timeout: 1s, response_timeout: 2s\(options) }"
            )
            try await body(harness, backend)
        } catch {
            // The backend runs on the harness's event loops: it stops first.
            try? await backend.stop()
            await harness.stop()
            throw error
        }
        try? await backend.stop()
        await harness.stop()
    }

    @Test func bytesBeyondTheResponseNeverReachTheNextRequest() async throws {
        let smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"
        try await self.withScriptedGateway({ index, _ in
            // The first answer carries a second response behind it; every later answer is honest.
            let honest = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nreq-\(index)\n"
            return (index == 0 ? honest + smuggled : honest, false)
        }) { gateway, backend in
            let first = try Curl.run(["--http1.1", "\(gateway.baseURL)/pub/a"], caFile: gateway.certificatePath)
            #expect(first.status == 200 && first.body == "req-0\n", "\(first.body)")
            for _ in 0..<3 {
                let next = try Curl.run(["--http1.1", "\(gateway.baseURL)/pub/b"], caFile: gateway.certificatePath)
                #expect(next.status == 200 && !next.body.contains("SMUGGLED"), "\(next.body)")
                #expect(next.body.hasPrefix("req-"))
            }
            #expect(backend.connections >= 2, "the desynchronized connection was not reused")
        }
        // Pipelined: the second request starts while the first response's read is still being handled, the
        // moment the pooled connection would be handed on — it must not get the bytes behind the first answer.
        try await self.withScriptedGateway({ index, _ in
            let honest = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nreq-\(index)\n"
            return (index == 0 ? honest + smuggled : honest, false)
        }) { gateway, backend in
            let output = try OpenSSLClient.exchange(
                port: gateway.tlsPort,
                send: "GET /pub/a HTTP/1.1\r\nHost: a\r\n\r\nGET /pub/b HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
            )
            #expect(!output.contains("SMUGGLED"), "\(output)")
            #expect(output.contains("req-0") && output.contains("req-1"), "\(output)")
            #expect(backend.connections == 2)
        }
    }

    @Test(arguments: [
        ("both framings", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde"),
        ("obs-fold", "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n"),
        ("not HTTP", "SSH-2.0-OpenSSH_9.2\r\n\r\n"),
    ])
    func anAmbiguousResponseIsA502(_ name: String, _ response: String) async throws {
        try await self.withScriptedGateway({ _, _ in (response, false) }) { gateway, _ in
            let result = try Curl.run(["--http1.1", "\(gateway.baseURL)/pub/a"], caFile: gateway.certificatePath)
            #expect(result.status == 502, "\(name): \(result.status) \(result.body)")
            #expect(result.body.contains("malformed response"), "\(name): \(result.body)")
            #expect(gateway.logLines.all.contains { $0.contains("upstream sent a malformed response") }, "\(name)")
        }
    }

    /// A head and a malformed chunk in the backend's first segment: nothing of the response has reached the
    /// client yet, so it gets a 502 over either protocol (not a connection closed without a status line), and
    /// the access log says 502 too.
    @Test(arguments: ["--http1.1", "--http2"])
    func aBrokenChunkBehindTheHeadInTheFirstReadIsA502(_ version: String) async throws {
        try await self.withScriptedGateway({ _, _ in
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", false)
        }) { gateway, _ in
            let result = try Curl.run([version, "-H", "X-Request-Id: broken-chunk", "\(gateway.baseURL)/pub/a"], caFile: gateway.certificatePath)
            #expect(result.exitCode == 0 && result.status == 502, "\(version): \(result.status) \(result.stderr)")
            #expect(result.body.contains("malformed response"), "\(version): \(result.body)")
            let access = gateway.logLines.all.filter { $0.hasPrefix("info request ") && $0.contains("request_id=broken-chunk") }
            #expect(access.count == 1, "\(version): \(access)")
            #expect(access.first?.contains("status=502") == true && access.first?.contains("reason=upstream_malformed_response") == true, "\(access)")
            // The gateway's own 502 (the backend's head was held, never sent): one of its rejections.
            let metrics = gateway.server.metrics.render()
            #expect(metrics.contains(#"tokengate_rejections_total{route="/",reason="upstream_malformed_response"} 1"#), "\(metrics)")
        }
    }

    @Test func aBodyThatRunsUntilTheCloseArrivesWholeAndTheConnectionIsNotReused() async throws {
        let body = String(repeating: "0123456789", count: 5000)
        try await self.withScriptedGateway({ index, _ in
            ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + body + "-\(index)", true)
        }) { gateway, backend in
            for index in 0..<2 {
                for version in ["--http1.1", "--http2"] {
                    let result = try Curl.run([version, "\(gateway.baseURL)/pub/a"], caFile: gateway.certificatePath)
                    #expect(result.exitCode == 0 && result.status == 200, "\(version) \(result.stderr)")
                    #expect(result.body.hasPrefix(body) && result.body.count == body.count + 2, "\(version) #\(index)")
                }
            }
            #expect(backend.connections == 4)
        }
    }

    /// A backend that sends a head and part of the body, then nothing (without closing): the response timeout
    /// bounds its silence between reads too, so neither connection is held for ever.
    @Test func aBackendThatFallsSilentMidBodyIsCutOffAfterTheResponseTimeout() async throws {
        try await self.withScriptedGateway({ _, _ in
            ("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b", false)
        }) { gateway, _ in
            let start = ContinuousClock.now
            let result = try Curl.run(["--http1.1", "--max-time", "15", "\(gateway.baseURL)/pub/a"], caFile: gateway.certificatePath, timeout: 20)
            let elapsed = ContinuousClock.now - start
            #expect(result.status == 200 && result.exitCode != 0, "the client sees a cut-off response, never a clean end")
            #expect(elapsed >= .milliseconds(1500) && elapsed < .seconds(8), "response_timeout is 2 s in the harness: \(elapsed)")
            #expect(gateway.logLines.all.contains { $0.contains("upstream_timeout") }, "the access log says why")
        }
    }

    @Test func aResponseToHEADHasNoBodyWhateverItsLengthSays() async throws {
        try await self.withScriptedGateway({ index, head in
            head.hasPrefix("HEAD")
                ? ("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", false)
                : ("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nget\(index)", false)
        }) { gateway, backend in
            let head = try Curl.run(["--http1.1", "-I", "\(gateway.baseURL)/pub/a"], caFile: gateway.certificatePath)
            #expect(head.status == 200 && head.header("content-length") == "100")
            let get = try Curl.run(["--http1.1", "\(gateway.baseURL)/pub/a"], caFile: gateway.certificatePath)
            #expect(get.body == "get1", "the next request gets its own answer")
            // The 100 bytes the HEAD's head announced may still come: that connection was closed, not pooled.
            #expect(backend.connections == 2)
        }
    }

    /// A backend that answers before the request body is over: the client gets the answer with
    /// `Connection: close` and the connection closes without waiting for the rest of the body (which the
    /// gateway would otherwise have to read and discard), and the backend connection that saw part of a
    /// request is never reused.
    @Test func aBackendsEarlyAnswerClosesTheClientConnectionAndIsNotReused() async throws {
        try await self.withScriptedGateway({ index, _ in ("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nearly\(index)", false) }) { gateway, backend in
            // The body's first 3 bytes go with the head, the other 97 three seconds later; the client keeps
            // the connection open (-ign_eof) until the gateway closes it.
            let rest = String(repeating: "r", count: 97)
            // The shell notes when s_client ends: the pipeline itself lasts as long as the sleeping sender.
            let output = try OpenSSLClient.sh(
                "t0=$(date +%s%N); (printf 'POST /pub/a HTTP/1.1\\r\\nHost: a\\r\\nContent-Length: 100\\r\\n\\r\\nabc'; sleep 3; printf '\(rest)')"
                    + " | { timeout 10 openssl s_client -connect 127.0.0.1:\(gateway.tlsPort) -quiet -ign_eof -servername localhost 2>/dev/null;"
                    + " echo; echo \"closed after $(( ($(date +%s%N) - t0) / 1000000 )) ms\"; }"
            )
            let lines = output.split(separator: "\n")
            let closedAfter = lines.last.flatMap { Int($0.split(separator: " ").dropFirst(2).first ?? "") }
            #expect(output.hasPrefix("HTTP/1.1 200") && output.contains("\r\n\r\nearly0\n"), "\(output)")
            #expect(output.lowercased().contains("connection: close"), "\(output)")
            #expect((closedAfter ?? .max) < 2500, "the connection waited for the body it will not use: \(output)")
            let next = try Curl.run(["--http1.1", "\(gateway.baseURL)/pub/b"], caFile: gateway.certificatePath)
            #expect(next.status == 200 && next.body == "early1", "\(next.body)")
            #expect(backend.connections == 2, "the backend connection that saw part of a request was reused")
        }
    }

    /// A head that announces a body HTTP says is absent (`HEAD` with a length or none, `204` with one, `304` chunked), its
    /// body sent anyway a second later, once the next request is out: the connection was closed after the
    /// bodiless response, so that body (here a whole response) never becomes the next client's answer.
    @Test(arguments: [
        ("HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 48\r\n\r\n"),
        ("HEAD", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"),
        ("GET", "HTTP/1.1 204 No Content\r\nContent-Length: 48\r\n\r\n"),
        ("GET", "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"),
    ])
    func aBodyAnnouncedWhereNoneMayBeNeverBecomesTheNextResponse(_ method: String, _ head: String) async throws {
        let smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"
        try await self.withReplyingGateway({ index, _ in
            index == 0
                ? ScriptedBackend.Reply(response: head, later: (.seconds(1), smuggled))
                : ScriptedBackend.Reply(response: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nreq-\(index)\n")
        }) { gateway, backend in
            let first = try Curl.run(
                ["--http1.1"] + (method == "HEAD" ? ["-I"] : []) + ["\(gateway.baseURL)/pub/a"],
                caFile: gateway.certificatePath
            )
            // The bodiless answer itself, as before (`-I` writes the head where the body would go).
            #expect(first.exitCode == 0 && first.status == Int(head.dropFirst(9).prefix(3)), "\(method): \(first.status) \(first.stderr)")
            #expect(method == "HEAD" || first.body.isEmpty, "\(first.body)")
            // At once, while the backend is still to send the body it announced.
            let next = try Curl.run(["--http1.1", "\(gateway.baseURL)/pub/b"], caFile: gateway.certificatePath)
            #expect(next.status == 200 && next.body == "req-1\n", "\(method) \(head.prefix(12)): \(next.body)")
            #expect(backend.connections == 2, "the connection was reused after a head that announced a body")
        }
    }

    /// A backend that answers before it has the whole body, and ends its answer only after the rest went out:
    /// it may still read that rest as a request of its own (CL.0), so its connection is not reused either.
    @Test func aResponseBegunBeforeTheBodyWasSentIsNotReusedWhenItEndsAfter() async throws {
        try await self.withReplyingGateway({ index, _ in
            index == 0
                ? ScriptedBackend.Reply(response: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nearly", later: (.milliseconds(1500), "-done"))
                : ScriptedBackend.Reply(response: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nnext-\(index)")
        }) { gateway, backend in
            // Half the body with the head, the rest half a second later (after the backend's head, before its end).
            // The head says `connection: close` (the request had not ended): the gateway closes once the response
            // is out, about 1.5 s in, and the client ends then; the command ends when its input does, at 3.5 s.
            // Without that close the client runs until it is stopped at 6 s (KILL: TERM may be ignored in the test's
            // children).
            let started = ContinuousClock.now
            let output = try OpenSSLClient.sh(
                "(printf 'POST /pub/a HTTP/1.1\\r\\nHost: a\\r\\nContent-Length: 6\\r\\n\\r\\nabc'; sleep 0.5; printf 'def'; sleep 3)"
                    + " | timeout -s KILL 6 openssl s_client -connect 127.0.0.1:\(gateway.tlsPort) -quiet -servername localhost 2>/dev/null"
            )
            let elapsed = ContinuousClock.now - started
            #expect(output.hasPrefix("HTTP/1.1 200") && output.contains("\r\n\r\nearly-done"), "\(output)")
            #expect(elapsed < .seconds(5), "the gateway kept the connection after a head that said close: \(elapsed)")
            let next = try Curl.run(["--http1.1", "\(gateway.baseURL)/pub/b"], caFile: gateway.certificatePath)
            #expect(next.status == 200 && next.body == "next-1", "\(next.body)")
            #expect(backend.connections == 2, "the connection of a backend that answered before it had the body was reused")
        }
    }

    /// `keep_alive: false`: every request goes on a connection of its own, saying `Connection: close`, so even
    /// bytes a backend sends late behind an ordinary response (which no HTTP/1.1 proxy can tell from the next
    /// response on a pooled connection) reach no other request.
    @Test func anUpstreamWithoutKeepAliveGivesEveryRequestAConnectionOfItsOwn() async throws {
        let heads = NIOLockedValueBox<[String]>([])
        let smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"
        try await self.withReplyingGateway(options: ", keep_alive: false") { index, head in
            heads.withLockedValue { $0.append(head) }
            return ScriptedBackend.Reply(
                response: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nreq-\(index)\n",
                later: (.milliseconds(300), smuggled)
            )
        } _: { gateway, backend in
            for index in 0..<3 {
                let version = index == 1 ? "--http2" : "--http1.1"
                let result = try Curl.run([version, "\(gateway.baseURL)/pub/\(index)"], caFile: gateway.certificatePath)
                #expect(result.status == 200 && result.body == "req-\(index)\n", "\(version): \(result.body)")
            }
            #expect(backend.connections == 3)
            let sent = heads.withLockedValue { $0 }
            #expect(sent.count == 3 && sent.allSatisfy { $0.contains("\r\nconnection: close") }, "\(sent)")
        }
    }

    /// The client's `Content-Length` reaches the backend as the number the gateway read it as, from either
    /// protocol: `0010` read as octal by a backend would frame the body differently.
    @Test(arguments: ["--http1.1", "--http2"])
    func theBackendGetsTheLengthAsTheNumberTheGatewayRead(_ version: String) async throws {
        let heads = NIOLockedValueBox<[String]>([])
        try await self.withScriptedGateway({ _, head in
            heads.withLockedValue { $0.append(head) }
            return ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true)
        }) { gateway, _ in
            let result = try Curl.run(
                [version, "-H", "Content-Length: 0010", "--data-binary", "0123456789", "\(gateway.baseURL)/pub/a"],
                caFile: gateway.certificatePath
            )
            #expect(result.status == 200 && result.body == "ok", "\(version): \(result.status) \(result.stderr)")
            let head = heads.withLockedValue { $0.first } ?? ""
            #expect(head.contains("\r\ncontent-length: 10\r\n") && !head.contains("0010"), "\(version): \(head)")
        }
    }
}

/// The upstream handler and the pool between two exchanges, on an EmbeddedChannel: what the next exchange on
/// a pooled connection inherits from the previous one.
@Suite struct UpstreamConnectionReuseTests {
    final class Recorder: UpstreamResponseReceiver {
        var parts: [String] = []
        var onEnd: (() -> Void)?
        func upstreamReceived(_ part: UpstreamResponsePart) {
            switch part {
            case .head(let head): self.parts.append("head \(head.status.code)")
            case .body(let body): self.parts.append("body \(String(buffer: body))")
            case .end:
                self.parts.append("end")
                self.onEnd?()
            }
        }
        func upstreamReadComplete() {}
        func upstreamFailed(_ error: any Error) { self.parts.append("failed") }
        func upstreamWritabilityChanged(isWritable: Bool) {}
        func upstreamTimedOut() {}
    }

    final class ReadCounter: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        var reads = 0
        func read(context: ChannelHandlerContext) {
            self.reads += 1
            context.read()
        }
    }

    private static func request(_ path: String = "/", method: HTTPMethod = .GET) -> UpstreamRequestHead {
        let client = ClientRequestHead(version: .http1_1, method: method, uri: path, headers: ["host": "a"])
        let forwarding = RequestRewriter.Forwarding(clientAddress: nil, requestID: "r", scheme: "https")
        // Plain values: the rewriter never refuses this head.
        return RequestRewriter.upstreamHead(from: client, identity: nil, strip: nil, withheldCookies: [], newBodyLength: nil, forwarding: forwarding)!
    }

    /// Request heads are written into the connection's own buffer when they go out: the next request over the
    /// same connection writes over the last one's bytes once nothing else holds them, and never while they are
    /// still held (here by the test, as by a write still on its way out).
    @Test func aConnectionWritesItsRequestHeadsIntoOneBufferWithoutOverwritingHeldBytes() throws {
        let (channel, handler, _, _) = try self.makeConnection()
        func exchange(_ path: String) throws -> ByteBuffer {
            handler.receiver = Recorder()
            handler.send(Self.request(path))
            handler.flush()
            let written = try #require(try channel.readOutbound(as: ByteBuffer.self))
            try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
            handler.detach()
            return written
        }
        func storage(_ buffer: ByteBuffer) -> UnsafeRawPointer? {
            buffer.withUnsafeReadableBytes { UnsafeRawPointer($0.baseAddress) }
        }
        let held = try exchange("/one")
        let second = try exchange("/two")
        #expect(String(buffer: held).hasPrefix("GET /one HTTP/1.1\r\nhost: a\r\n"), "the held head is intact")
        #expect(String(buffer: second).hasPrefix("GET /two HTTP/1.1\r\nhost: a\r\n"))
        #expect(storage(held) != storage(second), "a held head is never written over")
        let secondStorage = storage(second)
        _ = consume second
        let third = try exchange("/three")
        #expect(String(buffer: third).hasPrefix("GET /three HTTP/1.1\r\nhost: a\r\n") && String(buffer: third).hasSuffix("\r\n\r\n"))
        #expect(storage(third) == secondStorage, "the bytes nobody holds are written over")
        _ = try? channel.finish()
    }

    /// A connected EmbeddedChannel ending in an upstream handler (after `extra` handlers), a pool on its loop,
    /// and the connection the pool would have made.
    private func makeConnection(
        extra: [any ChannelHandler] = []
    ) throws -> (EmbeddedChannel, UpstreamResponseHandler, UpstreamPool, UpstreamConnection) {
        let (loop, channel, handler) = try self.connectedHandler(extra: extra)
        let pool = self.makePool(on: loop)
        return (channel, handler, pool, UpstreamConnection(channel: channel, targetIndex: 0, handler: handler))
    }

    /// A connected upstream channel with its response handler last, on a loop of its own.
    private func connectedHandler(
        extra: [any ChannelHandler] = []
    ) throws -> (EmbeddedEventLoop, EmbeddedChannel, UpstreamResponseHandler) {
        let loop = EmbeddedEventLoop()
        let handler = UpstreamResponseHandler()
        let channel = EmbeddedChannel(handlers: extra + [handler], loop: loop)
        try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        return (loop, channel, handler)
    }

    private func makePool(on loop: EmbeddedEventLoop, keepAlive: Bool = true) -> UpstreamPool {
        var settings = UpstreamSettings(
            name: "api",
            targets: [.init(host: "127.0.0.1", port: 9, useTLS: false, display: "http://127.0.0.1:9")],
            connectTimeout: .seconds(1),
            responseTimeout: .seconds(1),
            idleTimeout: .seconds(60),
            maxConnectionsPerTarget: 8,
            retries: 1,
            failuresBeforeEjection: 5,
            ejectionTime: .seconds(1),
            tlsContext: nil
        )
        settings.keepAlive = keepAlive
        return UpstreamPool(
            settings: settings,
            eventLoop: loop,
            logger: Logger(label: "test"),
            connectFailures: MetricsRegistry().counter("test_connect_failures_total", help: "test"),
            failureLog: UpstreamConnectFailureLog(upstream: "api", targets: settings.targets.map(\.display), logger: Logger(label: "test")),
            flushBatch: UpstreamFlushBatch(eventLoop: loop)
        )
    }

    /// Bytes behind a response that NIO delivers in a second read of the same batch (the first buffer came
    /// back full): the connection must not have been handed to a pipelined next exchange in between.
    @Test func aConnectionIsNotHandedOutInsideTheReadBatchThatEndedItsResponse() throws {
        let (channel, handler, pool, connection) = try self.makeConnection()
        let first = Recorder()
        var handedOut: UpstreamConnection?
        first.onEnd = {
            pool.release(connection, reusable: handler.keepsConnection)
            handedOut = pool.acquireIdle()  // A pipelined next request, synchronously.
        }
        handler.receiver = first
        handler.send(Self.request())
        channel.pipeline.fireChannelRead(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        #expect(first.parts == ["head 200", "body ok", "end"])
        #expect(handedOut == nil, "still inside the read batch")
        channel.pipeline.fireChannelRead(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"))
        channel.pipeline.fireChannelReadComplete()
        #expect(!channel.isActive, "the bytes nobody asked for closed the connection")
        #expect(pool.acquireIdle() == nil)
        _ = try? channel.finish()
    }

    /// A `HEAD` answered with a length: the exchange gets the bodiless response, and the connection is closed
    /// when given back, so the body the backend announced, should it come later, reaches no other exchange.
    @Test func aConnectionWhoseHEADAnswerAnnouncedABodyIsNotPooled() throws {
        let (channel, handler, pool, connection) = try self.makeConnection()
        let first = Recorder()
        first.onEnd = { pool.release(connection, reusable: handler.keepsConnection) }
        handler.receiver = first
        handler.send(Self.request(method: .HEAD))
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 48\r\n\r\n"))
        #expect(first.parts == ["head 200", "end"])
        #expect(!channel.isActive, "the connection was kept")
        #expect(pool.acquireIdle() == nil)
        _ = try? channel.finish()
    }

    /// `keep_alive: false`: the pool closes every connection given back, whatever the response said.
    @Test func aPoolOfAnUpstreamWithoutKeepAliveKeepsNoConnection() throws {
        let (loop, channel, handler) = try self.connectedHandler()
        let pool = self.makePool(on: loop, keepAlive: false)
        let connection = UpstreamConnection(channel: channel, targetIndex: 0, handler: handler)
        handler.receiver = Recorder()
        handler.send(Self.request())
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        #expect(handler.keepsConnection, "the response itself would allow another request")
        pool.release(connection, reusable: handler.keepsConnection)
        #expect(!channel.isActive)
        #expect(pool.acquireIdle() == nil)
        _ = try? channel.finish()
    }

    @Test func anHonestConnectionIsHandedOutOnceItsReadBatchIsOver() throws {
        let (channel, handler, pool, connection) = try self.makeConnection()
        let first = Recorder()
        first.onEnd = { pool.release(connection, reusable: handler.keepsConnection) }
        handler.receiver = first
        handler.send(Self.request())
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        #expect(pool.acquireIdle() === connection)
        _ = try? channel.finish()
    }

    /// Nothing refers to a connection weakly (that would put every retain of it on the slow path); its timers
    /// hold it strongly instead, so the cycles must be broken when its channel closes — also when nothing but its
    /// own callbacks holds the pool any more (a configuration reload drops the generation's reference first).
    @Test(arguments: [true, false])
    func aConnectionIsFreedOnceItsChannelCloses(poolOutlivesIt: Bool) throws {
        weak var freed: UpstreamConnection?
        do {
            let (loop, channel, handler) = try self.connectedHandler()
            var pool: UpstreamPool? = self.makePool(on: loop)
            let connection = try #require(pool).adopt(channel, index: 0, handler: handler)
            freed = connection
            handler.receiver = Recorder()
            handler.send(Self.request())
            connection.responseTimer.arm(at: loop.now + .seconds(5))
            try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
            handler.receiver = nil
            try #require(pool).release(connection, reusable: handler.keepsConnection)  // Idle: its timer armed.
            if !poolOutlivesIt {
                pool = nil
            }
            _ = try? channel.finish()
            loop.run()
            withExtendedLifetime(pool) {}
        }
        #expect(freed == nil, "the connection outlived its channel")
    }

    /// The pool and the exchange read the handler's view of its channel (kept from NIO's events, so that a request
    /// makes no existential call into the channel for it) instead of asking the channel: it must follow the
    /// channel, including for a handler added to a channel that is already active.
    @Test func theHandlersViewOfItsChannelFollowsTheChannel() throws {
        let (loop, channel, handler) = try self.connectedHandler()
        #expect(handler.isOpen && handler.isWritable)
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(!handler.isWritable)
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(handler.isWritable)
        let pool = self.makePool(on: loop)
        let connection = pool.adopt(channel, index: 0, handler: handler)
        handler.receiver = Recorder()
        handler.send(Self.request())
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        handler.receiver = nil
        pool.release(connection, reusable: handler.keepsConnection)
        try channel.close().wait()
        #expect(!handler.isOpen)
        #expect(pool.acquireIdle() == nil, "a closed connection is never handed out")

        let late = EmbeddedChannel(loop: EmbeddedEventLoop())
        try late.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        late.isWritable = false
        let added = UpstreamResponseHandler()
        try late.pipeline.syncOperations.addHandler(added)
        #expect(added.isOpen && !added.isWritable)
        _ = try? late.finish()
    }

    /// A pool's connections hold it strongly (a weak reference would put every retain of the pool on the slow
    /// path): a pool whose generation was replaced (`closeAll()`) closes a connection given back to it instead
    /// of keeping it, and is freed with its last connection.
    @Test func aClosedPoolKeepsNoConnectionAndGoesWithItsLast() throws {
        weak var freedPool: UpstreamPool?
        weak var freedConnection: UpstreamConnection?
        do {
            let (loop, channel, handler) = try self.connectedHandler()
            var pool: UpstreamPool? = self.makePool(on: loop)
            freedPool = pool
            let connection = try #require(pool).adopt(channel, index: 0, handler: handler)
            freedConnection = connection
            handler.receiver = Recorder()
            handler.send(Self.request())
            try #require(pool).closeAll()  // The configuration was reloaded while the exchange was in flight.
            try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
            handler.receiver = nil
            try #require(pool).release(connection, reusable: handler.keepsConnection)
            #expect(!channel.isActive, "a connection given back to a closed pool is closed, not kept idle")
            #expect(try #require(pool).acquireIdle() == nil)
            pool = nil
            loop.run()
            _ = try? channel.finish()
        }
        #expect(freedConnection == nil, "the connection outlived its channel")
        #expect(freedPool == nil, "the pool outlived its last connection")
    }

    /// An exchange whose client stopped reading paused the connection's reads; released to the pool, the
    /// connection reads again, or the next exchange would never see its response (and an idle connection
    /// would never see the backend's close).
    @Test func readsPausedForOneExchangeAreNotHeldForTheNext() throws {
        let counter = ReadCounter()
        let (channel, handler, pool, connection) = try self.makeConnection(extra: [counter])
        let first = Recorder()
        handler.receiver = first
        handler.send(Self.request())
        handler.pauseReading()  // The client went unwritable during the last body read.
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        channel.read()
        let held = counter.reads
        pool.release(connection, reusable: handler.keepsConnection)
        #expect(counter.reads == held + 1, "the held read is replayed on release")
        let next = try #require(pool.acquireIdle())
        next.handler.receiver = Recorder()
        next.handler.send(Self.request())
        channel.read()
        #expect(counter.reads == held + 2)
        _ = try? channel.finish()
    }
}

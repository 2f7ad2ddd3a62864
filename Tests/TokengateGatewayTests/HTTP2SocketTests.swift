//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import NIOPosix
import Testing
import TokengateHTTP
import TokengateTLS
import TokengateTestSupport

@testable import TokengateGateway

/// Wires the codec in after the TLS handshake when ALPN chose `h2`, the way the gateway does: the TLS
/// handler fires ``TLSUserEvent/handshakeCompleted(negotiatedProtocol:serverName:version:)`` before any
/// application byte, so adding the codec right here loses nothing.
final class H2TestALPNRouter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .handshakeCompleted(let negotiated, _, _) = event as? TLSUserEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        guard negotiated == "h2" else {
            context.close(promise: nil)  // This test server speaks HTTP/2 only.
            return
        }
        var logger = Logger(label: "h2-socket-test")
        logger.logLevel = .critical
        let log = H2ResponderLog()
        let codec = HTTP2ServerCodec(logger: logger, makeHandler: H2TestResponder.factory(log))
        do {
            try context.pipeline.syncOperations.addHandler(codec, position: .after(self))
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        } catch {
            context.close(promise: nil)
        }
    }
}

/// A TLS server on 127.0.0.1 with the codec and the test responder, driven by curl, nghttp, h2load and the
/// Python attack scripts.
final class H2SocketServer: Sendable {
    let group: MultiThreadedEventLoopGroup
    let channel: any Channel
    let directory: String

    var port: Int { self.channel.localAddress!.port! }

    init() async throws {
        self.directory = NSTemporaryDirectory() + "tokengate-h2-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
        let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost", "127.0.0.1"])
        try certificate.certificatePEM.write(toFile: self.directory + "/cert.pem", atomically: true, encoding: .utf8)
        try certificate.privateKeyPEM.write(toFile: self.directory + "/key.pem", atomically: true, encoding: .utf8)
        let tls = try TLSServerContext(
            certificates: [TLSCertificateSource(certificatePath: self.directory + "/cert.pem", privateKeyPath: self.directory + "/key.pem")],
            alpnProtocols: ["h2", "http/1.1"]
        )
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var logger = Logger(label: "h2-socket-tls")
        logger.logLevel = .critical
        let tlsLogger = logger
        self.channel = try await ServerBootstrap(group: self.group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(context: tls, logger: tlsLogger))
                    try channel.pipeline.syncOperations.addHandler(H2TestALPNRouter())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    func stop() async throws {
        try await self.channel.close()
        try await self.group.shutdownGracefully()
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    var url: String { "https://127.0.0.1:\(self.port)" }
}

@Suite(.serialized) struct HTTP2SocketTests {
    private static let attacks = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/h2-attacks").path

    /// `curl --http2` GET against the server: 200 over HTTP/2, the echo body.
    private func expectHealthy(_ server: H2SocketServer, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try ChildProcess.run(
            "/usr/bin/curl",
            ["-sS", "-k", "--http2", "--max-time", "10", "-w", "\n%{http_version} %{http_code}", server.url + "/health"]
        )
        #expect(result.status == 0, "curl: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout == "GET /health 127.0.0.1:\(server.port)\n\n2 200", sourceLocation: sourceLocation)
    }

    @Test func curlGetAndPost() async throws {
        let server = try await H2SocketServer()
        try self.expectHealthy(server)
        let post = try ChildProcess.run(
            "/usr/bin/curl",
            ["-sS", "-k", "--http2", "--max-time", "10", "-D", "-", "--data-binary", "hello body", server.url + "/echo?a=1"]
        )
        #expect(post.status == 0, "curl: \(post.stderr)")
        #expect(post.stdout.hasPrefix("HTTP/2 200 \r\n"))
        #expect(post.stdout.contains("x-upper: A\r\n"))
        #expect(!post.stdout.lowercased().contains("connection:"))
        #expect(post.stdout.hasSuffix("\r\n\r\nPOST /echo?a=1 127.0.0.1:\(server.port)\nhello body"))
        // A large upload crosses many windows: WINDOW_UPDATEs follow consumption.
        let upload = String(repeating: "u", count: 3_000_000)
        let big = try ChildProcess.run(
            "/usr/bin/curl",
            ["-sS", "-k", "--http2", "--max-time", "20", "--data-binary", "@-", server.url + "/upload"],
            input: Data(upload.utf8)
        )
        #expect(big.status == 0, "curl: \(big.stderr)")
        #expect(big.stdout.utf8.count == "POST /upload 127.0.0.1:\(server.port)\n".utf8.count + 3_000_000)
        try await server.stop()
    }

    @Test func curlDownloadsALargeBodyThroughFlowControl() async throws {
        let server = try await H2SocketServer()
        let result = try ChildProcess.run(
            "/usr/bin/curl",
            ["-sS", "-k", "--http2", "--max-time", "20", "-o", "/dev/null", "-w", "%{size_download}", server.url + "/big?5000000"]
        )
        #expect(result.status == 0, "curl: \(result.stderr)")
        #expect(result.stdout == "5000000")
        try await server.stop()
    }

    @Test func nghttpClient() async throws {
        let server = try await H2SocketServer()
        let result = try ChildProcess.run("/usr/bin/nghttp", ["-v", "-n", server.url + "/trailers", server.url + "/a", server.url + "/b"])
        #expect(result.status == 0, "nghttp: \(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("x-checksum: 42"))
        #expect(result.stdout.components(separatedBy: ":status: 200").count - 1 == 3)
        try await server.stop()
    }

    @Test func h2loadSmokeRunHasNoErrors() async throws {
        let server = try await H2SocketServer()
        let result = try ChildProcess.run("/usr/bin/h2load", ["-n", "2000", "-c", "10", "-m", "10", server.url + "/load"])
        #expect(result.status == 0, "h2load: \(result.stderr)")
        #expect(
            result.stdout.contains("requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored, 0 timeout"),
            "h2load: \(result.stdout)"
        )
        #expect(result.stdout.contains("status codes: 2000 2xx"), "h2load: \(result.stdout)")
        try await server.stop()
    }

    @Test(arguments: [
        "ping_flood.py", "window_update_flood.py", "empty_data_flood.py", "made_you_reset.py", "rapid_reset.py",
        "continuation_flood.py", "oversized_headers.py",
    ])
    func attackScript(_ script: String) async throws {
        let server = try await H2SocketServer()
        let result = try ChildProcess.run("/usr/bin/env", ["python3", Self.attacks + "/" + script, "127.0.0.1", String(server.port)])
        #expect(result.status == 0, "\(script): \(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("\"ok\": true"), "\(script): \(result.stdout)")
        print("h2-attack", result.stdout, terminator: "")
        try self.expectHealthy(server)
        try await server.stop()
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import NIOPosix
import Testing
import TokengateTLS

/// Answers any request with a fixed HTTP/1.1 response once the header block has arrived, then closes.
private final class TinyHTTPResponder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var request = ByteBuffer()
    private var answered = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = self.unwrapInboundIn(data)
        self.request.writeBuffer(&buffer)
        guard !self.answered, self.request.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8)) != nil else {
            return
        }
        self.answered = true
        let body = "hello over tls\n"
        let response = "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        context.writeAndFlush(self.wrapOutboundOut(ByteBuffer(string: response))).assumeIsolated().whenComplete {
            _ in context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS errors were logged by the handler; the handler closes the channel itself.
    }
}

/// Collects a client connection's plaintext and TLS events; completes `done` when the channel goes inactive.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    struct Result: Sendable {
        var body = ""
        var handshake: TLSUserEvent?
        var sawShutdown = false
        var errors: [String] = []
    }

    private var result = Result()
    private let done: EventLoopPromise<Result>

    init(done: EventLoopPromise<Result>) {
        self.done = done
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.result.body += String(buffer: self.unwrapInboundIn(data))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event as? TLSUserEvent {
        case .handshakeCompleted?:
            self.result.handshake = event as? TLSUserEvent
            context.writeAndFlush(NIOAny(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")), promise: nil)
        case .shutdownCompleted?:
            self.result.sawShutdown = true
        case nil:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.result.errors.append("\(error)")
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.done.succeed(self.result)
    }
}

/// Real sockets on 127.0.0.1 driven by the real `openssl s_client` and `curl`.
@Suite(.serialized) struct TLSSocketTests {
    let certificate: TestCertificate
    let other: TestCertificate

    init() throws {
        self.certificate = try TestCertificate.make(["localhost", "127.0.0.1"])
        self.other = try TestCertificate.make(["api.example.com"])
    }

    private func withServer(_ body: (Int) throws -> Void) throws {
        let context = try TLSServerContext(
            certificates: [self.certificate.source, self.other.source],
            alpnProtocols: ["http/1.1"]
        )
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let logger = Logger(label: "tokengate.tls.socket-tests")
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(context: context, logger: logger))
                    try channel.pipeline.syncOperations.addHandler(TinyHTTPResponder())
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .wait()
        defer { try? channel.close().wait() }
        try body(try #require(channel.localAddress?.port))
    }

    @Test func opensslClientNegotiatesTLS13WithALPNAndSNI() throws {
        try self.withServer { port in
            let result = try run(
                "/usr/bin/openssl",
                [
                    "s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost", "-alpn", "http/1.1",
                    "-CAfile", self.certificate.certificatePath, "-verify_return_error", "-ign_eof",
                ],
                input: "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
            )
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.contains("TLSv1.3"))
            #expect(result.output.contains("ALPN protocol: http/1.1"))
            #expect(result.output.contains("Verify return code: 0 (ok)"))
            #expect(result.output.contains("hello over tls"))
        }
    }

    @Test func opensslClientGetsTheSecondCertificateBySNI() throws {
        try self.withServer { port in
            let result = try run(
                "/usr/bin/openssl",
                [
                    "s_client", "-connect", "127.0.0.1:\(port)", "-servername", "api.example.com",
                    "-verify_hostname", "api.example.com", "-CAfile", self.other.certificatePath,
                    "-verify_return_error", "-ign_eof",
                ],
                input: "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
            )
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.contains("Verify return code: 0 (ok)"))
            #expect(result.output.contains("hello over tls"))
        }
    }

    @Test func opensslClientWithTLS12UsesAnAEADCipher() throws {
        try self.withServer { port in
            let result = try run(
                "/usr/bin/openssl",
                ["s_client", "-connect", "127.0.0.1:\(port)", "-tls1_2", "-ign_eof"],
                input: "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
            )
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.contains("Protocol  : TLSv1.2"))
            #expect(result.output.contains("Cipher    : ECDHE-ECDSA-AES128-GCM-SHA256"))
            #expect(result.output.contains("hello over tls"))
        }
    }

    @Test func renegotiationIsRefused() throws {
        try self.withServer { port in
            // `R` on its own line asks s_client to renegotiate (TLS 1.2 only; commands need no -ign_eof).
            let result = try run(
                "/usr/bin/openssl",
                ["s_client", "-connect", "127.0.0.1:\(port)", "-tls1_2"],
                input: "R\n"
            )
            #expect(result.output.contains("RENEGOTIATING"), "\(result.output)")
            #expect(result.output.contains("no renegotiation"), "\(result.output)")
        }
    }

    @Test func opensslClientWithTLS11IsRefused() throws {
        try self.withServer { port in
            let result = try run(
                "/usr/bin/openssl",
                ["s_client", "-connect", "127.0.0.1:\(port)", "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"],
                input: ""
            )
            #expect(result.status != 0)
            #expect(result.output.contains("alert protocol version"), "\(result.output)")
        }
    }

    @Test func opensslClientOfferingOnlyCBCIsRefused() throws {
        try self.withServer { port in
            let result = try run(
                "/usr/bin/openssl",
                ["s_client", "-connect", "127.0.0.1:\(port)", "-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-SHA256"],
                input: ""
            )
            #expect(result.status != 0)
            #expect(result.output.contains("handshake failure"), "\(result.output)")
        }
    }

    @Test func tokengateClientTalksToTokengateServer() throws {
        try self.withServer { port in
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            defer { try? group.syncShutdownGracefully() }
            let clientContext = try TLSClientContext(trustRootsPath: self.certificate.certificatePath)
            let done = group.next().makePromise(of: ResponseCollector.Result.self)
            let logger = Logger(label: "tokengate.tls.socket-tests.client")
            _ = try ClientBootstrap(group: group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            TLSHandler(context: clientContext, serverHostname: "localhost", logger: logger)
                        )
                        try channel.pipeline.syncOperations.addHandler(ResponseCollector(done: done))
                    }
                }
                .connect(host: "127.0.0.1", port: port)
                .wait()
            let result = try done.futureResult.wait()
            #expect(result.errors.isEmpty, "\(result.errors)")
            #expect(
                result.handshake
                    == .handshakeCompleted(negotiatedProtocol: "http/1.1", serverName: "localhost", version: "TLSv1.3")
            )
            #expect(result.body.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(result.body.hasSuffix("hello over tls\n"))
            #expect(result.sawShutdown, "the server's close_notify was answered")
        }
    }

    @Test func curlInsecureAndWithCACert() throws {
        try self.withServer { port in
            let insecure = try run("/usr/bin/curl", ["-sS", "-k", "https://127.0.0.1:\(port)/"], input: nil)
            #expect(insecure.status == 0, "\(insecure.output)")
            #expect(insecure.output == "hello over tls\n")

            let verified = try run(
                "/usr/bin/curl",
                [
                    "-sS", "--cacert", self.certificate.certificatePath, "--resolve", "localhost:\(port):127.0.0.1",
                    "-w", "%{http_version} %{ssl_verify_result}", "https://localhost:\(port)/",
                ],
                input: nil
            )
            #expect(verified.status == 0, "\(verified.output)")
            #expect(verified.output == "hello over tls\n1.1 0")

            // The wrong trust root must fail: proves curl really verified.
            let wrong = try run(
                "/usr/bin/curl",
                [
                    "-sS", "--cacert", self.other.certificatePath, "--resolve", "localhost:\(port):127.0.0.1",
                    "https://localhost:\(port)/",
                ],
                input: nil
            )
            #expect(wrong.status == 60, "\(wrong.output)")
        }
    }
}

/// Runs a command with a 20 s limit and returns its exit status and combined output.
///
/// The limit is a SIGKILL from here rather than `timeout(1)`: children spawned from the test runner's
/// threads inherit a signal mask with SIGALRM/SIGTERM blocked, so `timeout` could never fire.
private func run(_ executable: String, _ arguments: [String], input: String?) throws -> (status: Int32, output: String)
{
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    let stdin = Pipe()
    process.standardInput = stdin
    try process.run()
    let pid = process.processIdentifier
    let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
    DispatchQueue.global().asyncAfter(deadline: .now() + 20, execute: watchdog)
    defer { watchdog.cancel() }
    if let input {
        stdin.fileHandleForWriting.write(Data(input.utf8))
    }
    try stdin.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

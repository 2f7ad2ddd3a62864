//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import NIOEmbedded
import TokengateTLS

/// Certificates generated at test time (nothing is committed) in a fresh temporary directory.
struct TestCertificate {
    let certificatePath: String
    let privateKeyPath: String
    let certificatePEM: String

    var source: TLSCertificateSource {
        TLSCertificateSource(certificatePath: self.certificatePath, privateKeyPath: self.privateKeyPath)
    }

    static func make(_ hostnames: [String], validityDays: Int = 30) throws -> TestCertificate {
        let generated = try SelfSignedCertificate.generate(hostnames: hostnames, validityDays: validityDays)
        let directory = try TestDirectory.make()
        let certificatePath = directory + "/cert.pem"
        let keyPath = directory + "/key.pem"
        try generated.certificatePEM.write(toFile: certificatePath, atomically: true, encoding: .utf8)
        try generated.privateKeyPEM.write(toFile: keyPath, atomically: true, encoding: .utf8)
        return TestCertificate(
            certificatePath: certificatePath,
            privateKeyPath: keyPath,
            certificatePEM: generated.certificatePEM
        )
    }
}

enum TestDirectory {
    static func make() throws -> String {
        let path = NSTemporaryDirectory() + "tokengate-tls-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

/// Records what reaches the end of the pipeline: plaintext, TLS events, errors, inactivity.
final class EventRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    var received = ByteBuffer()
    var readEvents = 0
    var readCompleteEvents = 0
    var userEvents: [TLSUserEvent] = []
    var errors: [any Error] = []
    var inactive = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = self.unwrapInboundIn(data)
        self.readEvents += 1
        self.received.writeBuffer(&buffer)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.readCompleteEvents += 1
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent {
            self.userEvents.append(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.errors.append(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.inactive = true
    }

    var tlsErrorCodes: [TLSError.Code] {
        self.errors.compactMap { ($0 as? TLSError)?.code }
    }

    var handshake: (protocol: String?, serverName: String?, version: String)? {
        for event in self.userEvents {
            if case .handshakeCompleted(let negotiated, let serverName, let version) = event {
                return (negotiated, serverName, version)
            }
        }
        return nil
    }
}

/// A client and a server EmbeddedChannel, each with a TLSHandler and a recorder, wired back to back.
struct ChannelPair {
    let client: EmbeddedChannel
    let server: EmbeddedChannel
    let clientRecorder = EventRecorder()
    let serverRecorder = EventRecorder()
    /// How many network writes each side made, counted while shuttling bytes.
    var clientWrites: [Int] = []
    var serverWrites: [Int] = []

    static let logger = Logger(label: "tokengate.tls.tests")

    init(
        server serverContext: TLSServerContext,
        client clientContext: TLSClientContext,
        serverHostname: String?
    ) throws {
        self.client = EmbeddedChannel()
        self.server = EmbeddedChannel()
        try self.client.pipeline.syncOperations.addHandler(
            TLSHandler(context: clientContext, serverHostname: serverHostname, logger: Self.logger)
        )
        try self.client.pipeline.syncOperations.addHandler(self.clientRecorder)
        try self.server.pipeline.syncOperations.addHandler(TLSHandler(context: serverContext, logger: Self.logger))
        try self.server.pipeline.syncOperations.addHandler(self.serverRecorder)
    }

    /// Activates both channels (the client sends its ClientHello) and runs the exchange to quiescence.
    mutating func connect() throws {
        try self.server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try self.client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try self.interactInMemory()
    }

    /// Moves bytes from each side's outbound buffer into the other's inbound until neither has anything.
    mutating func interactInMemory() throws {
        var rounds = 0
        while true {
            rounds += 1
            precondition(rounds < 1000, "interactInMemory did not settle")
            var moved = false
            if let bytes = try self.client.readOutbound(as: ByteBuffer.self) {
                self.clientWrites.append(bytes.readableBytes)
                if self.server.isActive {
                    try self.server.writeInbound(bytes)
                }
                moved = true
            }
            if let bytes = try self.server.readOutbound(as: ByteBuffer.self) {
                self.serverWrites.append(bytes.readableBytes)
                if self.client.isActive {
                    try self.client.writeInbound(bytes)
                }
                moved = true
            }
            if !moved {
                return
            }
        }
    }

    /// Closes both sides the TLS way (close_notify exchange, then the bounded wait runs out on the embedded
    /// clocks) so that `finish()` never waits on a close that would need real time.
    mutating func finish() {
        self.client.close(promise: nil)
        self.server.close(promise: nil)
        try? self.interactInMemory()
        self.client.embeddedEventLoop.advanceTime(by: .seconds(10))
        self.server.embeddedEventLoop.advanceTime(by: .seconds(10))
        _ = try? self.client.finish(acceptAlreadyClosed: true)
        _ = try? self.server.finish(acceptAlreadyClosed: true)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Logging
import NIOCore
import NIOPosix
import TokengateTLS

/// `nio-floor-proxy`: the cheapest TLS-terminating HTTP/1.1 proxy that can be built on SwiftNIO with the
/// gateway's TLS handler, for `scripts/bench-compare.sh --proxies "... nio-floor ..."` (docs/performance.md, "The
/// floor"). It answers how much of the gateway's CPU per request is the gateway's own work and how much any
/// proxy of this construction pays. **Not a proxy to deploy**: it checks nothing (see ``FloorClientHandler``).
struct NIOFloorProxy: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nio-floor-proxy",
        abstract: "A benchmark floor: TLS in, bodiless HTTP/1.1 requests passed to one backend unchecked."
    )

    @Option(help: "Address to listen on (loopback only).")
    var listen = "127.0.0.1:8443"

    @Option(help: "The backend, plain HTTP/1.1 (loopback only).")
    var backend = "127.0.0.1:9100"

    @Option(help: "PEM certificate.")
    var cert: String

    @Option(help: "PEM private key.")
    var key: String

    func validate() throws {
        for (name, value) in [("--listen", self.listen), ("--backend", self.backend)] {
            guard value.hasPrefix("127.") else { throw ValidationError("\(name) must be a loopback address") }
        }
    }

    func run() throws {
        let listen = try Self.address(self.listen)
        let backend = try Self.address(self.backend)
        let tls = try TLSServerContext(
            certificates: [TLSCertificateSource(certificatePath: self.cert, privateKeyPath: self.key)],
            alpnProtocols: ["http/1.1"]
        )
        let logger = Logger(label: "nio-floor-proxy")
        // One event loop, as the gateway runs in the benchmark (`event_loops: 1`).
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let sendableBatch = try loop.submit { NIOLoopBound(FloorFlushBatch(eventLoop: loop), eventLoop: loop) }.wait()
        let server = try ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(TLSHandler(context: tls, logger: logger))
                    try sync.addHandler(FloorClientHandler(backend: backend, flushBatch: sendableBatch.value))
                }
            }
            .bind(to: listen)
            .wait()
        print("nio-floor-proxy listening on \(self.listen), backend \(self.backend)")
        try server.closeFuture.wait()
    }

    private static func address(_ text: String) throws -> SocketAddress {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else {
            throw ValidationError("'\(text)' is not HOST:PORT")
        }
        return try SocketAddress(ipAddress: String(text[..<colon]), port: port)
    }
}

NIOFloorProxy.main()

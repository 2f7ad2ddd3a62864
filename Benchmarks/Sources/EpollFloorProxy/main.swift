//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import TokengateEventLoop
import TokengateTLS

#if canImport(Glibc)
import Glibc
#endif

/// `epoll-floor-proxy`: the same do-nothing TLS-terminating HTTP/1.1 proxy as `nio-floor-proxy`, on an epoll event
/// loop of its own instead of SwiftNIO's channels, with the gateway's TLS code (``TLSConnection``) over the system
/// OpenSSL. For `scripts/bench-compare.sh --proxies "... epoll-floor ..."` (docs/performance.md, "The floors"): the
/// two floors differ only in their construction, so their CPU per request says what the construction costs.
/// **Not a proxy to deploy**: it checks nothing (see ``FloorClientConnection``).
struct EpollFloorProxy: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "epoll-floor-proxy",
        abstract: "A benchmark floor on epoll: TLS in, bodiless HTTP/1.1 requests passed to one backend unchecked."
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
            guard value.hasPrefix("127."), sockaddr_in(ipv4: value) != nil else {
                throw ValidationError("\(name) must be a loopback address, 127.x.y.z:PORT")
            }
        }
    }

    func run() throws {
        let listen = sockaddr_in(ipv4: self.listen)!
        let backend = sockaddr_in(ipv4: self.backend)!
        let context = try TLSServerContext(
            certificates: [TLSCertificateSource(certificatePath: self.cert, privateKeyPath: self.key)],
            alpnProtocols: ["http/1.1"]
        )
        // A peer that closes while we write must fail that write (EPIPE), not end the process.
        signal(SIGPIPE, SIG_IGN)
        // One event loop on this thread, as the gateway runs in the benchmark (`event_loops: 1`).
        let loop = try EpollEventLoop()
        let listener = try FloorListener(
            socket: Socket.listen(on: listen, backlog: 1024),
            context: context,
            backend: backend,
            loop: loop
        )
        print("epoll-floor-proxy listening on \(self.listen), backend \(self.backend)")
        fflush(nil)
        try withExtendedLifetime(listener) { try loop.run() }
    }
}

EpollFloorProxy.main()

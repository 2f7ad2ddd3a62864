//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOCore
import Synchronization
import Testing
import TokengateEventLoop
import TokengateLoopDriver
import TokengateTLS
import TokengateTestSupport

/// TLS client connections on the event loop against the real `openssl s_client` over loopback: the handshake
/// with the listener's certificate, ALPN `http/1.1` and SNI, plaintext both ways, close_notify after the last
/// write, and the handshake deadline for a peer that never finishes one. The server side is an echo of one
/// line, running on a loop thread as the data plane's would.
@Suite struct LoopTLSConnectionTests {
    /// What the loop's side saw, read by the test thread.
    final class Seen: Sendable {
        let port = Mutex<UInt16?>(nil)
        let established = Mutex<[(alpn: String?, serverName: String?)]>([])
        let closedByPeer = Mutex(0)
        let failures = Mutex<[String]>([])
    }

    /// A certificate for `localhost` and `127.0.0.1` in a scratch directory, and the context over it.
    static func context(in directory: String) throws -> TLSServerContext {
        let (certificate, key) = try SelfSignedCertificate.generate(hostnames: ["localhost", "127.0.0.1"])
        try certificate.write(toFile: directory + "/cert.pem", atomically: true, encoding: .utf8)
        try key.write(toFile: directory + "/key.pem", atomically: true, encoding: .utf8)
        return try TLSServerContext(
            certificates: [TLSCertificateSource(certificatePath: directory + "/cert.pem", privateKeyPath: directory + "/key.pem")],
            alpnProtocols: ["http/1.1"]
        )
    }

    /// Starts a one-line echo server on a loop thread; returns the threads and the port.
    static func startEcho(context: TLSServerContext, handshakeTimeout: UInt64, seen: Seen) throws -> (EpollLoopThreads, UInt16) {
        let threads = try EpollLoopThreads(count: 1, pinned: false)
        threads.submit(toLoop: 0) { loop in
            do {
                let listener = try LoopTLSListener(
                    socket: Socket.listen(on: sockaddr_in(ipv4: "127.0.0.1:0")!, backlog: 16, reusePort: true),
                    context: context,
                    handshakeTimeout: handshakeTimeout,
                    loop: loop,
                    onConnection: { connection, _ in
                        var line = ByteBuffer()
                        connection.onEstablished = { connection, _ in
                            seen.established.withLock { $0.append((connection.negotiatedProtocol, connection.serverName)) }
                        }
                        connection.onPlaintext = { [unowned connection] bytes, loop in
                            var bytes = bytes
                            line.writeBuffer(&bytes)
                            guard line.readableBytesView.contains(UInt8(ascii: "\n")) else { return }
                            connection.send(ByteBuffer(string: "echo: "), loop: loop)
                            connection.send(line, loop: loop)
                            connection.closeAfterSending(loop: loop)
                        }
                        connection.onClosed = { _ in seen.closedByPeer.withLock { $0 += 1 } }
                    },
                    onFailure: { error in seen.failures.withLock { $0.append("\(error)") } }
                )
                let port = try listener.localAddress().sin_port.bigEndian
                seen.port.withLock { $0 = port }
            } catch {
                seen.failures.withLock { $0.append("\(error)") }
                seen.port.withLock { $0 = 0 }
            }
        }
        let deadline = Date().addingTimeInterval(10)
        while seen.port.withLock({ $0 }) == nil, Date() < deadline { usleep(1000) }
        return (threads, seen.port.withLock { $0 } ?? 0)
    }

    static func sClient(port: UInt16, alpn: String, input: String) throws -> ChildProcess.Result {
        try ChildProcess.run(
            "/usr/bin/timeout",
            ["20", "openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost",
             "-alpn", alpn, "-quiet", "-ign_eof"],
            input: Data(input.utf8))
    }

    @Test func echoesOverTLSWithALPNAndSNIThenClosesWithCloseNotify() throws {
        let directory = try TemporaryDirectory()
        let seen = Seen()
        let (threads, port) = try Self.startEcho(
            context: Self.context(in: directory.path), handshakeTimeout: 10_000_000_000, seen: seen)
        defer { threads.stopAndJoin() }
        #expect(port != 0, "\(seen.failures.withLock { $0 })")

        let result = try Self.sClient(port: port, alpn: "http/1.1", input: "hello loop\n")
        // s_client -ign_eof ends only when the server closes: status 0 and the echo show the close came after it.
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "echo: hello loop\n", "\(result.stdout) \(result.stderr)")
        let established = seen.established.withLock { $0 }
        #expect(established.count == 1)
        #expect(established.first?.alpn == "http/1.1")
        #expect(established.first?.serverName == "localhost")
        // The server closed after its answer, so it was never told of a close it did not ask for.
        #expect(seen.closedByPeer.withLock { $0 } == 0)
        #expect(seen.failures.withLock { $0 }.isEmpty)
    }

    @Test func aClientOfferingOnlyH2IsNeverAnsweredH2() throws {
        let directory = try TemporaryDirectory()
        let seen = Seen()
        let (threads, port) = try Self.startEcho(
            context: Self.context(in: directory.path), handshakeTimeout: 10_000_000_000, seen: seen)
        defer { threads.stopAndJoin() }
        _ = try Self.sClient(port: port, alpn: "h2", input: "hello\n")
        // The loop's context offers http/1.1 only, as the listener's does with HTTP/2 off: the same OpenSSL
        // selection callback (without a match the handshake goes on without ALPN, which HTTP/1.1 allows).
        let established = seen.established.withLock { $0 }
        #expect(!established.contains { $0.alpn == "h2" }, "\(established)")
        #expect(established.allSatisfy { $0.alpn == nil }, "\(established)")
    }

    @Test func aPeerThatNeverHandshakesIsClosedAtTheDeadline() throws {
        let directory = try TemporaryDirectory()
        let seen = Seen()
        let (threads, port) = try Self.startEcho(
            context: Self.context(in: directory.path), handshakeTimeout: 200_000_000, seen: seen)
        defer { threads.stopAndJoin() }
        for sends in ["", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"] {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(descriptor) }
            var address = sockaddr_in(ipv4: "127.0.0.1:\(port)")!
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            #expect(connected == 0)
            // A bound on the wait, not a timing check: the deadline is 0.2 s, the test gives up after 10.
            var bound = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &bound, socklen_t(MemoryLayout<timeval>.size))
            if !sends.isEmpty { _ = sends.withCString { send(descriptor, $0, strlen($0), 0) } }
            var buffer = [UInt8](repeating: 0, count: 4096)
            var ended = false
            while true {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count == 0 || (count < 0 && errno == ECONNRESET) {
                    ended = true
                    break
                }
                if count < 0 { break }  // the bound passed
                // Plain HTTP gets at most a TLS alert, never an HTTP answer.
                #expect(buffer[0] == 0x15, "\(buffer[0])")
            }
            #expect(ended, "sent \(sends.count) bytes: the connection was still open after 10 s")
        }
        #expect(seen.established.withLock { $0 }.isEmpty)
        #expect(seen.closedByPeer.withLock { $0 } == 2)
    }
}

/// A scratch directory removed when the value goes away.
final class TemporaryDirectory {
    let path: String

    init() throws {
        self.path = NSTemporaryDirectory() + "tokengate-loop-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}

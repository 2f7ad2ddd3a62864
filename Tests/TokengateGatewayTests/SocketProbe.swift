//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOCore

/// Raw TCP probes for the read-deadline tests, run as a Python script so that the pauses between sends are
/// real pauses on a real socket.
///
/// `calls` is Python that calls `probe(parts, pause=0)` (and may use `socket`, `time` and `port`): each call
/// sends `parts` with `pause` seconds after each, reads until the server closes or `timeout` seconds pass,
/// and yields one line: the first response line with spaces as `_` (or `closed` when nothing came, `open`
/// when the server kept the connection past the timeout), the number of responses, and the seconds taken.
enum SocketProbe {
    static func run(port: Int, timeout: Int = 6, _ calls: String) throws -> [[Substring]] {
        let script = """
            import socket, time
            port = \(port)
            def probe(parts, pause=0):
                s = socket.create_connection(('127.0.0.1', port), timeout=\(timeout))
                start = time.monotonic()
                data = b''
                state = 'closed'
                try:
                    for part in parts:
                        s.sendall(part)
                        time.sleep(pause)
                    while True:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                except socket.timeout:
                    state = 'open'
                except OSError:
                    pass
                first = data.split(b'\\r\\n')[0].decode().replace(' ', '_')
                print('%s %d %.1f' % (first or state, data.count(b'HTTP/1.1 '), time.monotonic() - start))
            \(calls)
            """
        let output = try Curl.process("/usr/bin/python3", ["-c", script]).1
        return output.split(separator: "\n").map { $0.split(separator: " ") }
    }

    /// A TCP connection to 127.0.0.1:`port` that sends nothing (the caller closes the descriptor): a
    /// client that never begins its TLS handshake, or one that just holds a connection slot.
    static func connectSilently(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        // The address through NIO's `SocketAddress`: `sockaddr_in`'s members are declared by whichever C module
        // the compiler loads first (Glibc or NIO's CNIOLinux), which a fresh build and an incremental one
        // disagree on.
        let connected = try SocketAddress(ipAddress: "127.0.0.1", port: port).withSockAddr { address, length in
            connect(descriptor, address, socklen_t(length))
        }
        guard descriptor >= 0, connected == 0 else {
            if descriptor >= 0 { close(descriptor) }
            throw SocketProbeError(message: "cannot connect to 127.0.0.1:\(port): errno \(errno)")
        }
        return descriptor
    }

    /// A TCP socket listening on 127.0.0.1:`port` that never accepts: connections complete into its backlog
    /// and are never answered (a backend that hangs). The caller closes the descriptor.
    static func listenSilently(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let listening = try SocketAddress(ipAddress: "127.0.0.1", port: port).withSockAddr { address, length in
            bind(descriptor, address, socklen_t(length)) == 0 && listen(descriptor, 16) == 0
        }
        guard descriptor >= 0, listening else {
            if descriptor >= 0 { close(descriptor) }
            throw SocketProbeError(message: "cannot listen on 127.0.0.1:\(port): errno \(errno)")
        }
        return descriptor
    }
}

struct SocketProbeError: Error {
    let message: String
}

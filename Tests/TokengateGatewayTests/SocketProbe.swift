//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Glibc

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
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard descriptor >= 0, connected == 0 else {
            if descriptor >= 0 { close(descriptor) }
            throw SocketProbeError(message: "cannot connect to 127.0.0.1:\(port): errno \(errno)")
        }
        return descriptor
    }
}

struct SocketProbeError: Error {
    let message: String
}

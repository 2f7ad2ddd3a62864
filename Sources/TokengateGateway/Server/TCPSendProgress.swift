//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#endif
import CTokengateShims
import NIOCore

/// What a client's TCP has taken of what the gateway wrote to its socket, from the kernel (`TCP_INFO`): the
/// bytes it acknowledged, and the bytes still in the socket's send buffer that the kernel has not sent.
///
/// Bytes that left the gateway's buffer for the socket are not bytes the client took: Linux grows a socket's
/// send buffer (up to `net.ipv4.tcp_wmem`'s maximum, 4 MiB by default) while the peer's window is shut, so a
/// client that reads a few bytes a second still seems to take megabytes. What it acknowledged is what its
/// receive window let in, which is what its application read plus a receive buffer that does not grow for a
/// reader that slow. Read only while a client that fell behind is looked at (``SlowClientWatch``), once a
/// second; never on the request path.
struct TCPSendProgress {
    /// Bytes the client's TCP acknowledged on this connection (TLS records and the handshake included).
    let acknowledged: Int
    /// Bytes written to the socket that wait in the kernel for the client's window.
    let notSent: Int

    /// The connection's figures; `nil` when the channel is not a TCP socket (or the option fails).
    static func read(_ channel: any Channel) -> TCPSendProgress? {
        guard let socket = channel as? any SocketOptionProvider else { return nil }
        var progress: TCPSendProgress?
        // A socket channel on its own event loop runs the `getsockopt` at once and completes the future there.
        let future: EventLoopFuture<CTokengateShims_tcp_info_buffer> = socket.unsafeGetSocketOption(
            level: SocketOptionLevel(IPPROTO_TCP),
            name: SocketOptionName(TCP_INFO)
        )
        future.assumeIsolated().whenSuccess { info in
            var acknowledged: UInt64 = 0
            var notSent: UInt32 = 0
            withUnsafePointer(to: info) { CTokengateShims_tcp_send_progress($0, &acknowledged, &notSent) }
            progress = TCPSendProgress(acknowledged: Int(truncatingIfNeeded: acknowledged), notSent: Int(notSent))
        }
        return progress
    }
}

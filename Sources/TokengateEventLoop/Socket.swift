//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateEpoll
public import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// One non-blocking TCP socket over IPv4: a listener, an accepted client, or an outgoing connection.
///
/// Non-copyable so that exactly one owner closes the descriptor (on ``close()`` or when the value goes away).
/// Every call returns what happened as a value (``IOResult``) instead of throwing: "would block" is the normal
/// end of every read and write on an edge-triggered loop, not an error.
public struct Socket: ~Copyable {
    /// What one read or write did.
    public enum IOResult {
        /// This many bytes moved (a read of 0 is ``closed``).
        case bytes(Int)
        /// Nothing to read, or no room to write: wait for the next edge.
        case wouldBlock
        /// The peer ended the stream (a read returned 0).
        case closed
        case failed(SystemCallError)
    }

    public private(set) var descriptor: Int32

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        if self.descriptor >= 0 { _ = Glibc.close(self.descriptor) }
    }

    /// Closes the descriptor now (which also takes it out of its epoll set); later calls fail with EBADF.
    public mutating func close() {
        if self.descriptor >= 0 { _ = Glibc.close(self.descriptor) }
        self.descriptor = -1
    }

    // MARK: Making sockets.

    /// A listening socket on `address` (SO_REUSEADDR, the given backlog).
    ///
    /// - Parameter reusePort: `SO_REUSEPORT`, so that each event loop binds a listener of its own to the same
    ///   address and the kernel spreads new connections across them (by a hash of the connection's addresses).
    ///   One shared listener would wake every loop on each connection, or need a lock around `accept`; one per
    ///   loop keeps a connection on the loop that accepted it, with no hand-off between threads. Every socket
    ///   bound to the address must ask for it, and the kernel only lets sockets of the same user share it.
    public static func listen(
        on address: sockaddr_in,
        backlog: Int32,
        reusePort: Bool = false
    ) throws(SystemCallError) -> Socket {
        let socket = try Self.make()
        var one: Int32 = 1
        guard setsockopt(socket.descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size)) == 0
        else { throw SystemCallError("setsockopt(SO_REUSEADDR)") }
        if reusePort {
            guard
                setsockopt(socket.descriptor, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) == 0
            else { throw SystemCallError("setsockopt(SO_REUSEPORT)") }
        }
        var address = address
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket.descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw SystemCallError("bind") }
        guard Glibc.listen(socket.descriptor, backlog) == 0 else { throw SystemCallError("listen") }
        return socket
    }

    /// Starts a connection to `address`. It is usually still in progress when this returns: the socket turns
    /// writable when it is done, and ``pendingError()`` then says whether it worked.
    public static func connect(to address: sockaddr_in) throws(SystemCallError) -> Socket {
        let socket = try Self.make()
        var address = address
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(socket.descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 || errno == EINPROGRESS else { throw SystemCallError("connect") }
        try socket.setNoDelay()
        return socket
    }

    /// The next pending connection, or nil when there is none (`EAGAIN`) or it failed before we took it.
    public func accept() throws(SystemCallError) -> Socket? {
        let descriptor = CTokengateEpoll_accept4(self.descriptor, Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue))
        guard descriptor >= 0 else {
            switch errno {
            case EAGAIN, EWOULDBLOCK, ECONNABORTED, EINTR: return nil
            default: throw SystemCallError("accept4")
            }
        }
        let socket = Socket(descriptor: descriptor)
        try socket.setNoDelay()
        return socket
    }

    private static func make() throws(SystemCallError) -> Socket {
        let kind = Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
        let descriptor = Glibc.socket(AF_INET, kind, 0)
        guard descriptor >= 0 else { throw SystemCallError("socket") }
        return Socket(descriptor: descriptor)
    }

    /// Nagle off: a proxy's small writes (a request head, a response) must leave at once.
    private func setNoDelay() throws(SystemCallError) {
        var one: Int32 = 1
        guard setsockopt(self.descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            == 0
        else { throw SystemCallError("setsockopt(TCP_NODELAY)") }
    }

    /// `SO_ERROR`: 0 once a connection started by ``connect(to:)`` is up, else why it failed.
    public func pendingError() -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(self.descriptor, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return errno }
        return error
    }

    /// The address the socket is bound to (`getsockname`): a listener's port when it was bound to port 0.
    public func localAddress() throws(SystemCallError) -> sockaddr_in {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(self.descriptor, $0, &length) }
        }
        guard result == 0 else { throw SystemCallError("getsockname") }
        return address
    }

    // MARK: Bytes.

    /// Reads into the writable space of `buffer`, at least `minimumBytes` of it (the buffer grows if needed).
    public func read(into buffer: inout ByteBuffer, minimumBytes: Int) -> IOResult {
        var result = IOResult.wouldBlock
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: minimumBytes) { space in
            let count = Glibc.read(self.descriptor, space.baseAddress, space.count)
            if count > 0 {
                result = .bytes(count)
                return count
            }
            result = count == 0 ? .closed : Self.classify("read")
            return 0
        }
        return result
    }

    /// Writes the readable bytes of `buffer` (without moving its reader index).
    public func write(_ buffer: ByteBuffer) -> IOResult {
        buffer.withUnsafeReadableBytes { bytes -> IOResult in
            let count = Glibc.write(self.descriptor, bytes.baseAddress, bytes.count)
            return count >= 0 ? .bytes(count) : Self.classify("write")
        }
    }

    private static func classify(_ call: String) -> IOResult {
        switch errno {
        case EAGAIN, EWOULDBLOCK, EINTR: return .wouldBlock
        default: return .failed(SystemCallError(call))
        }
    }
}

extension sockaddr_in {
    /// `a.b.c.d:port` (an IPv4 address and a port), or nil.
    public init?(ipv4 text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        var address = in_addr()
        guard inet_pton(AF_INET, String(text[..<colon]), &address) == 1 else { return nil }
        self.init()
        self.sin_family = sa_family_t(AF_INET)
        self.sin_port = port.bigEndian
        self.sin_addr = address
    }
}

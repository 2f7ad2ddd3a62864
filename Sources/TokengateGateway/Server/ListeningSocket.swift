//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Glibc
import NIOCore

/// A listening TCP socket as a descriptor the gateway holds itself: bound here, or passed in by systemd or
/// by the process handing over (``PassedSockets``), then given to NIO with `ServerBootstrap.withBoundSocket`.
///
/// The gateway binds its listeners itself, rather than through `ServerBootstrap.bind(host:port:)`, because
/// a binary hand-over needs the descriptors: the new process inherits them, so connections waiting in the
/// kernel's accept queue are accepted by the new process instead of being dropped with the old listener.
package enum ListeningSocket {
    /// The accept queue's length: NIO's default of 128 fills under a burst and the kernel drops SYNs (retried by
    /// clients only after a second).
    package static let backlog: CInt = 1024

    /// A stream socket bound to `address` with `SO_REUSEADDR` (a restart rebinds while the old process's
    /// connections are in `TIME_WAIT`), close-on-exec, not yet listening: NIO's channel calls `listen`, and
    /// ``setBacklog(_:)`` sets the queue's length after it. Throws NIO's `IOError` with the call that failed.
    package static func bind(_ address: SocketAddress) throws -> CInt {
        let family = address.protocol == .inet6 ? AF_INET6 : AF_INET
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw IOError(errnoCode: errno, reason: "socket") }
        var one: CInt = 1
        guard setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<CInt>.size)) == 0 else {
            let error = IOError(errnoCode: errno, reason: "setsockopt(SO_REUSEADDR)")
            close(descriptor)
            throw error
        }
        let bound = address.withSockAddr { pointer, length in Glibc.bind(descriptor, pointer, socklen_t(length)) }
        guard bound == 0 else {
            let error = IOError(errnoCode: errno, reason: "bind")
            close(descriptor)
            throw error
        }
        return descriptor
    }

    /// Resolves `host` (an address or a name, as NIO's `bind(host:port:)` does) and binds it.
    package static func bind(host: String, port: Int) throws -> CInt {
        try self.bind(SocketAddress.makeAddressResolvingHost(host, port: port))
    }

    /// Sets the accept queue's length of a listening socket (`listen` again, which Linux allows): NIO's channel
    /// listens with 128 when it takes a bound socket, whatever its bootstrap's backlog option says.
    package static func setBacklog(_ descriptor: CInt) {
        _ = listen(descriptor, self.backlog)
    }

    /// The address `descriptor` is bound to, when it is a listening TCP socket (IPv4 or IPv6); otherwise why not.
    package static func listeningAddress(_ descriptor: CInt) -> Result<SocketAddress, InspectionFailure> {
        var type: CInt = 0
        var accepting: CInt = 0
        var length = socklen_t(MemoryLayout<CInt>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_TYPE, &type, &length) == 0 else {
            return .failure(.init("not a socket (\(String(cString: strerror(errno))))"))
        }
        length = socklen_t(MemoryLayout<CInt>.size)
        guard type == Int32(SOCK_STREAM.rawValue),
            getsockopt(descriptor, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0, accepting == 1
        else {
            return .failure(.init("not a listening stream socket (a socket unit needs ListenStream=, Accept=no)"))
        }
        var storage = sockaddr_storage()
        length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0 else { return .failure(.init("getsockname: \(String(cString: strerror(errno)))")) }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let port: Int
        switch Int32(storage.ss_family) {
        case AF_INET:
            var address = withUnsafeBytes(of: storage) { $0.load(as: sockaddr_in.self) }
            inet_ntop(AF_INET, &address.sin_addr, &text, socklen_t(text.count))
            port = Int(UInt16(bigEndian: address.sin_port))
        case AF_INET6:
            var address = withUnsafeBytes(of: storage) { $0.load(as: sockaddr_in6.self) }
            inet_ntop(AF_INET6, &address.sin6_addr, &text, socklen_t(text.count))
            port = Int(UInt16(bigEndian: address.sin6_port))
        default:
            return .failure(.init("not a TCP socket (family \(storage.ss_family); the gateway listens on IPv4 and IPv6 only)"))
        }
        let host = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        do {
            return .success(try SocketAddress(ipAddress: host, port: port))
        } catch {
            return .failure(.init("bound to \(host), which is not an address: \(error)"))
        }
    }

    /// Why a passed descriptor cannot serve as a listener.
    package struct InspectionFailure: Error, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }
}

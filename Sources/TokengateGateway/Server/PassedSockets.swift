//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Glibc
import NIOCore
import TokengateConfig

/// The listening sockets the process was started with, passed the way systemd passes them
/// (`sd_listen_fds(3)`): descriptors 3, 4, ... counted by `$LISTEN_FDS`, for the process `$LISTEN_PID`
/// names, with `$LISTEN_FDNAMES` (colon-separated) naming them. systemd's socket activation passes them
/// (`tokengate.socket`), and so does a gateway handing over to a new binary (``BinaryHandover``): one way in.
///
/// Each socket is matched to a configured listener ``assign(listeners:admin:)``: by name when it is named
/// `listen[N]` (the N-th public listener, configuration order) or `admin`, otherwise by the address it is bound
/// to. Every public listener must get one (a socket unit that forgets a port would otherwise leave the
/// gateway binding it itself, outside systemd's view); the admin listener binds itself when none is passed.
/// A socket that matches no listener, or a listener whose address does not match its named socket, is a
/// startup error that names both: serving on a socket the configuration does not describe fails closed.
package struct PassedSockets: Sendable {
    package struct Socket: Sendable, Equatable {
        package var descriptor: CInt
        /// Its `$LISTEN_FDNAMES` entry; systemd's default is the socket unit's name.
        package var name: String?
        package var address: SocketAddress
    }

    package var sockets: [Socket]

    /// Which passed descriptor each listener takes.
    package struct Assignment: Sendable, Equatable {
        /// Public listener index → descriptor (every public listener has one).
        package var listeners: [Int: CInt]
        package var admin: CInt?
    }

    /// `$LISTEN_FDS` above this is refused (systemd passes at most a few per unit; a garbage value must not
    /// make the gateway inspect thousands of descriptors).
    package static let maximumCount = 64
    /// The first passed descriptor (`SD_LISTEN_FDS_START`).
    package static let firstDescriptor: CInt = 3

    /// Reads the environment as `sd_listen_fds(unset_environment: true)` does: nil when `$LISTEN_FDS` is unset
    /// or `$LISTEN_PID` is another process's (the variables were inherited, not meant for this process).
    /// The descriptors are marked close-on-exec and the variables removed, so nothing this process starts
    /// inherits them unasked.
    package static func fromEnvironment() throws -> PassedSockets? {
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        let count = try self.count(
            fds: SystemdNotifier.environment("LISTEN_FDS"), pid: SystemdNotifier.environment("LISTEN_PID"), ownPID: getpid())
        guard let count else { return nil }
        let names = try self.names(SystemdNotifier.environment("LISTEN_FDNAMES"), count: count)
        var sockets: [Socket] = []
        for offset in 0..<count {
            let descriptor = Self.firstDescriptor + CInt(offset)
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            let name = names?[offset]
            switch ListeningSocket.listeningAddress(descriptor) {
            case .success(let address):
                sockets.append(Socket(descriptor: descriptor, name: name, address: address))
            case .failure(let failure):
                throw GatewayStartupError("passed socket \(descriptor)\(name.map { " (\($0))" } ?? ""): \(failure)")
            }
        }
        return PassedSockets(sockets: sockets)
    }

    /// `$LISTEN_FDS` as a count: nil when it is unset or `$LISTEN_PID` is not `ownPID` (as `sd_listen_fds`,
    /// a missing `$LISTEN_PID` passes nothing); throws for a value that is not a small count.
    package static func count(fds: String?, pid: String?, ownPID: pid_t) throws -> Int? {
        guard let fds else { return nil }
        guard let pid, let number = pid_t(pid), number == ownPID else { return nil }
        guard let count = Int(fds), count >= 0, count <= Self.maximumCount else {
            throw GatewayStartupError("LISTEN_FDS=\(fds.prefix(20)) is not a count of passed sockets (0 to \(Self.maximumCount))")
        }
        return count
    }

    /// `$LISTEN_FDNAMES` split at colons; nil when unset. A list of another length than the count is refused:
    /// the names would be matched to the wrong descriptors.
    package static func names(_ value: String?, count: Int) throws -> [String]? {
        guard let value else { return nil }
        let names = value.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard names.count == count else {
            throw GatewayStartupError("LISTEN_FDNAMES names \(names.count) sockets, LISTEN_FDS passes \(count)")
        }
        return names
    }

    /// Matches every passed socket to a listener (see the type's description). `listeners` and `admin` are the
    /// configured addresses, resolved (`resolve`, by default as NIO's `bind(host:port:)` resolves them).
    package func assign(
        listeners: [SocketAddressSpec],
        admin: SocketAddressSpec?,
        resolve: (SocketAddressSpec) throws -> SocketAddress = { try SocketAddress.makeAddressResolvingHost($0.host, port: $0.port) }
    ) throws -> Assignment {
        enum Target: Hashable { case listener(Int), admin }
        func key(_ target: Target) -> String {
            switch target {
            case .listener(let index): "listen[\(index)] (\(listeners[index]))"
            case .admin: "admin (\(admin!))"
            }
        }
        func resolved(_ spec: SocketAddressSpec, _ target: Target) throws -> SocketAddress {
            do { return try resolve(spec) } catch {
                throw GatewayStartupError("\(key(target)): cannot resolve the address to match it to a passed socket: \(error)")
            }
        }
        var targets: [(Target, SocketAddressSpec)] = listeners.enumerated().map { (.listener($0.offset), $0.element) }
        if let admin { targets.append((.admin, admin)) }
        let addresses = try targets.map { try resolved($0.1, $0.0) }
        var taken: [Target: Socket] = [:]
        for socket in self.sockets {
            let described = "passed socket \(socket.descriptor)\(socket.name.map { " (\($0))" } ?? "") on \(Self.text(socket.address))"
            let target: Target
            if let name = socket.name, let named = Self.namedTarget(name) {
                switch named {
                case .admin:
                    guard admin != nil else { throw GatewayStartupError("\(described) is named admin, and no admin listener is configured") }
                    target = .admin
                case .listener(let index):
                    guard index < listeners.count else {
                        throw GatewayStartupError("\(described) is named \(name), and the configuration has \(listeners.count) listener\(listeners.count == 1 ? "" : "s")")
                    }
                    target = .listener(index)
                }
                let index = targets.firstIndex { $0.0 == target }!
                guard Self.matches(socket.address, configured: addresses[index]) else {
                    throw GatewayStartupError("\(key(target)) does not match the \(described): its address changed (restart the gateway to change it)")
                }
            } else {
                guard let index = addresses.firstIndex(where: { $0 == socket.address }) else {
                    let configured = targets.map { key($0.0) }.joined(separator: ", ")
                    throw GatewayStartupError("\(described) matches no configured listener (\(configured))")
                }
                target = targets[index].0
            }
            if let earlier = taken[target] {
                throw GatewayStartupError("\(key(target)) is passed twice (sockets \(earlier.descriptor) and \(socket.descriptor))")
            }
            taken[target] = socket
        }
        var assignment = Assignment(listeners: [:], admin: taken[.admin]?.descriptor)
        for index in listeners.indices {
            guard let socket = taken[.listener(index)] else {
                let passed = self.sockets.map { Self.text($0.address) }.joined(separator: ", ")
                throw GatewayStartupError(
                    "\(key(.listener(index))) has no passed socket (passed: \(passed.isEmpty ? "none" : passed)); "
                        + "with socket activation every public listener needs a ListenStream= in the socket unit")
            }
            assignment.listeners[index] = socket.descriptor
        }
        return assignment
    }

    /// The names the gateway itself gives the sockets it hands over: `listen[N]` and `admin`.
    package static func name(listener index: Int) -> String { "listen[\(index)]" }
    package static let adminName = "admin"

    /// `127.0.0.1:8443`, `[::1]:8443`: as the configuration writes addresses (NIO's description adds `[IPv4]`).
    static func text(_ address: SocketAddress) -> String {
        let host = address.ipAddress ?? "\(address)"
        let port = address.port.map { ":\($0)" } ?? ""
        return (host.contains(":") ? "[\(host)]" : host) + port
    }

    private enum NamedTarget { case listener(Int), admin }

    private static func namedTarget(_ name: String) -> NamedTarget? {
        if name == Self.adminName { return .admin }
        guard name.hasPrefix("listen["), name.hasSuffix("]"),
            let index = Int(name.dropFirst("listen[".count).dropLast()), index >= 0
        else { return nil }
        return .listener(index)
    }

    /// A named socket fits its listener when the addresses are equal, or when the listener asks for port 0
    /// (any port: the port the socket already has) on the same host.
    private static func matches(_ socket: SocketAddress, configured: SocketAddress) -> Bool {
        if socket == configured { return true }
        guard configured.port == 0 else { return false }
        var anyPort = socket
        anyPort.port = 0
        return anyPort == configured
    }
}

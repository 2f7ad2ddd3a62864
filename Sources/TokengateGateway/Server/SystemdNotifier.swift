//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Glibc
import TokengateHTTP

/// Tells systemd (a `Type=notify` unit) how the gateway is doing, the way `sd_notify(3)` does, without
/// linking libsystemd: a datagram of `KEY=value` lines sent to the unix socket `$NOTIFY_SOCKET` names (a
/// path, or `@name` for the abstract namespace).
///
/// The gateway says `READY=1` once the cutoff snapshot is loaded and every listener is bound (so `systemctl
/// start` returns, and units ordered after it start, only when it serves), `RELOADING=1` with
/// `MONOTONIC_USEC` when a reload begins and `READY=1` when it ended (applied or refused), `STOPPING=1` when
/// the drain begins, and `WATCHDOG=1` at half of `$WATCHDOG_USEC` while every event loop answers
/// (``SystemdWatchdog``). Without `$NOTIFY_SOCKET` (not under systemd, or `Type=exec`) nothing is sent.
///
/// A failed send is ignored, as `sd_notify` callers do: the gateway serves whether or not its supervisor
/// listens.
package struct SystemdNotifier: Sendable {
    /// The socket address's bytes as they go into `sun_path`: a leading NUL for the abstract namespace.
    private let path: [UInt8]

    /// The process's notifier, from its environment at start; `nil` when `$NOTIFY_SOCKET` is unset or unusable.
    package static let process: SystemdNotifier? = SystemdNotifier(socket: Self.environment("NOTIFY_SOCKET"))

    /// `value` is `$NOTIFY_SOCKET`: an absolute path or `@` and an abstract name, shorter than `sun_path`.
    package init?(socket value: String?) {
        guard let value, let first = value.utf8.first else { return nil }
        var path = Array(value.utf8)
        switch first {
        case UInt8(ascii: "/"): break
        case UInt8(ascii: "@"): path[0] = 0
        default: return nil  // Not a form sd_notify knows (a vsock address, say): nothing is sent.
        }
        guard path.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path), !path.dropFirst().contains(0) else { return nil }
        self.path = path
    }

    /// Sends `state` (newline-separated `KEY=value` lines). Returns whether the datagram went out.
    @discardableResult
    package func notify(_ state: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
            sunPath.copyBytes(from: self.path)
        }
        // An abstract address is exactly as long as its name (no terminating NUL); a path's length includes one.
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        let length = pathOffset + self.path.count + (self.path.first == 0 ? 0 : 1)
        var bytes = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bytes.withUnsafeMutableBytes { buffer in
                    sendto(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL), socketAddress, socklen_t(length))
                }
            }
        }
        return sent == bytes.count
    }

    package func ready() { self.notify("READY=1") }

    /// Sent when a reload begins; `READY=1` (``ready()``) says it ended.
    package func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let microseconds = Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1_000
        self.notify("RELOADING=1\nMONOTONIC_USEC=\(microseconds)")
    }

    package func stopping() { self.notify("STOPPING=1") }

    /// How often systemd wants `WATCHDOG=1`: half of `$WATCHDOG_USEC` (as `sd_watchdog_enabled(3)` advises),
    /// when it is set for this process (`$WATCHDOG_PID` unset or this process's id).
    package static func watchdogInterval(usec: String?, pid: String?, ownPID: Int32 = getpid()) -> Duration? {
        guard let usec, let microseconds = UInt64(usec), microseconds > 0 else { return nil }
        if let pid, Int32(pid) != ownPID { return nil }
        return .microseconds(Int64(clamping: microseconds / 2))
    }

    package static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}

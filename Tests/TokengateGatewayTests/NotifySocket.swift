//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Glibc

/// The service manager's end of `sd_notify`: a unix datagram socket bound where `$NOTIFY_SOCKET` will say (a
/// path, or `@name` in the abstract namespace), receiving what the gateway process sends, as systemd would.
final class NotifySocket {
    let address: String
    private let descriptor: CInt

    /// Binds `address` (`/path` or `@name`).
    init(address: String) throws {
        self.address = address
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var path = Array(address.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: path) }
        let length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count + (path.first == 0 ? 0 : 1)
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(length)) }
        }
        guard bound == 0 else {
            close(descriptor)
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        // The kernel attaches each sender's credentials, as systemd asks it to: `NotifyAccess=main` accepts a
        // message only from the main process (``lastSender``).
        var one: CInt = 1
        guard setsockopt(descriptor, SOL_SOCKET, SO_PASSCRED, &one, socklen_t(MemoryLayout<CInt>.size)) == 0 else {
            close(descriptor)
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        self.descriptor = descriptor
    }

    deinit {
        close(self.descriptor)
        if self.address.hasPrefix("/") { unlink(self.address) }
    }

    /// The process that sent the datagram ``receive(timeout:)`` returned last, from the kernel's credentials.
    private(set) var lastSender: pid_t?

    /// The next datagram, or `nil` when none came within `timeout` seconds.
    func receive(timeout: Int32 = 20) -> String? {
        var poller = pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, timeout * 1000) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        // One `SCM_CREDENTIALS` control message: a `cmsghdr` (length, level, type: 16 bytes on 64-bit Linux),
        // then a `ucred` (pid, uid, gid).
        var control = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { data in
            control.withUnsafeMutableBytes { controlBytes in
                var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    message.msg_control = controlBytes.baseAddress
                    message.msg_controllen = controlBytes.count
                    return recvmsg(self.descriptor, &message, 0)
                }
            }
        }
        guard count >= 0 else { return nil }
        let header = MemoryLayout<Int>.size + 2 * MemoryLayout<CInt>.size
        let level = control.withUnsafeBytes { $0.load(fromByteOffset: MemoryLayout<Int>.size, as: CInt.self) }
        let type = control.withUnsafeBytes { $0.load(fromByteOffset: MemoryLayout<Int>.size + MemoryLayout<CInt>.size, as: CInt.self) }
        let scmCredentials: CInt = 2  // <bits/socket.h>; not exported by Glibc's module
        self.lastSender = level == SOL_SOCKET && type == scmCredentials
            ? control.withUnsafeBytes { $0.load(fromByteOffset: header, as: pid_t.self) } : nil
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    /// The next datagram that is not a `WATCHDOG=1` (those come at their own pace, between any others).
    func receiveSkippingWatchdog(timeout: Int32 = 20) -> String? {
        while let message = self.receive(timeout: timeout) {
            if message != "WATCHDOG=1" { return message }
        }
        return nil
    }

    /// `CLOCK_MONOTONIC` now, in microseconds: the clock `MONOTONIC_USEC` is on, shared by every process.
    static func monotonicMicroseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1_000
    }
}

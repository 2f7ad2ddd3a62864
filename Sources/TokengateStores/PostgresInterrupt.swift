//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NIOConcurrencyHelpers

/// Ends a thread's wait on a libpq socket early: for ``PostgresCutoffStore/close()``, cancellation, and the LISTEN
/// thread's stop.
///
/// A pipe rather than a flag alone: the waiting thread sits in `poll()` on the connection's socket, and a flag
/// would be seen only when that poll times out. Every wait in ``PostgresConnection`` polls the pipe's read end
/// next to the socket, so ``fire()`` wakes it at once. The byte written is never read, so the pipe stays readable
/// and every later wait ends at once too: once fired, an interrupt stays fired.
final class PostgresInterrupt: Sendable {
    private let readEnd: Int32
    private let writeEnd: Int32
    private let fired = NIOLockedValueBox(false)

    /// - Throws: ``PostgresFailure/Kind/interrupted`` when no pipe can be made (out of file descriptors).
    init() throws(PostgresFailure) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            throw PostgresFailure(.interrupted, "no file descriptors left for a pipe (errno \(errno))")
        }
        for end in ends {
            // Non-blocking: fire() must never block on a full pipe (it is full only if fired 64 KiB times).
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        self.readEnd = ends[0]
        self.writeEnd = ends[1]
    }

    deinit {
        close(self.readEnd)
        close(self.writeEnd)
    }

    /// The descriptor to poll for `POLLIN` next to the socket.
    var descriptor: Int32 {
        self.readEnd
    }

    var isFired: Bool {
        self.fired.withLockedValue { $0 }
    }

    /// Wakes the waiting thread, now and in every later wait. Safe from any thread, any number of times.
    func fire() {
        let first = self.fired.withLockedValue { fired in
            defer { fired = true }
            return !fired
        }
        if first {
            var byte: UInt8 = 1
            _ = write(self.writeEnd, &byte, 1)
        }
    }

    /// Sleeps for `duration` unless fired first; returns whether it was fired. Blocking: pool threads only.
    func sleep(for duration: Duration) -> Bool {
        let deadline = ContinuousClock.now.advanced(by: duration)
        var descriptors = [pollfd(fd: self.readEnd, events: Int16(POLLIN), revents: 0)]
        while !self.isFired {
            let remaining = ContinuousClock.now.duration(to: deadline)
            if remaining <= .zero {
                return false
            }
            _ = poll(&descriptors, 1, remaining.pollMilliseconds)
        }
        return true
    }
}

extension Duration {
    /// Whole milliseconds for `poll()`, rounded up so a wait never ends before its deadline, and at least 1.
    var pollMilliseconds: Int32 {
        let (seconds, attoseconds) = self.components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: max(1, milliseconds))
    }
}

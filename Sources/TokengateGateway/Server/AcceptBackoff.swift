//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
    import Glibc
#endif
import Logging
import NIOConcurrencyHelpers
import NIOCore
import TokengateHTTP

/// What a listening socket does when `accept` fails: it stops accepting for ``pause`` and logs the failure,
/// at most once a second with the number of failures since the last line (``FailureLogThrottle``).
///
/// Out of file descriptors (`EMFILE`, `ENFILE`), the pending connection stays in the kernel's queue and the
/// listening socket stays readable: NIO's accept loop retried at once and forever, a core at 100 % and not a
/// line in the log (tens of thousands of failed `accept4` a second), until clients gave up.
///
/// A pause alone does not stop that: NIO clears its "read pending" mark only when an `accept` succeeds, so
/// after a failed one the listening socket stays registered and every wake-up reads again, whatever the
/// pause says. So one descriptor is held in reserve (on `/dev/null`). When `accept` fails for lack of
/// descriptors the reserve is given up; the next `accept` then succeeds, ``admit(_:)`` closes that
/// connection at once (the oldest client in the queue learns now, rather than after its own timeout) and
/// takes the reserve back, and NIO, its mark cleared, waits for the paused read. One queued connection is
/// refused per pause while descriptors are short; connections that are open finish and free theirs.
package final class AcceptBackoff: Sendable {
    package static let pause = TimeAmount.milliseconds(250)

    private struct State {
        var reports = FailureLogThrottle(interval: .seconds(1))
        /// The reserve descriptor, or -1 while it is given up (or could not be opened).
        var reserve: CInt = -1
        /// The reserve was given up for the next accepted connection, which is to be closed.
        var refuseNext = false
    }

    private let state = NIOLockedValueBox(State())
    private let listener: String
    private let logger: Logger

    package init(listener: String, logger: Logger) {
        self.listener = listener
        self.logger = logger
        self.state.withLockedValue { $0.reserve = open("/dev/null", O_RDONLY | O_CLOEXEC) }
    }

    deinit {
        self.state.withLockedValue { state in
            if state.reserve >= 0 { close(state.reserve) }
        }
    }

    /// Called first for every accepted connection: `false` when it is the one the given-up reserve let in,
    /// which is then closed (and the reserve taken back); the caller stops there.
    package func admit(_ channel: any Channel) -> Bool {
        let refuse = self.state.withLockedValue { state -> Bool in
            guard state.refuseNext else { return false }
            state.refuseNext = false
            return true
        }
        guard refuse else { return true }
        // The reserve is taken back with the descriptor this close frees (there may be no other).
        channel.close().whenComplete { _ in
            self.state.withLockedValue { state in
                if state.reserve < 0 { state.reserve = open("/dev/null", O_RDONLY | O_CLOEXEC) }
            }
        }
        return false
    }

    /// NIO's handler that holds back reads on the listening socket, with this pause and report.
    package func handler() -> AcceptBackoffHandler {
        AcceptBackoffHandler(shouldForwardIOErrorCaught: false) { error in
            self.failed(error)
            return Self.pause
        }
    }

    private func failed(_ error: IOError, now: NIODeadline = .now()) {
        let outOfDescriptors = error.errnoCode == EMFILE || error.errnoCode == ENFILE
        let failures = self.state.withLockedValue { state -> Int? in
            if outOfDescriptors, state.reserve >= 0 {
                close(state.reserve)
                state.reserve = -1
                state.refuseNext = true
            }
            return state.reports.failed(now: now)
        }
        guard let failures else { return }
        let hint = outOfDescriptors ? " (out of file descriptors: raise LimitNOFILE / ulimit -n, or lower limits.max_connections)" : ""
        self.logger.error(
            "cannot accept connections\(hint); pausing accept",
            metadata: [
                "listener": "\(self.listener)", "error": "\(error)", "failures": "\(failures)",
                "pause_ms": "\(Self.pause.nanoseconds / 1_000_000)",
            ]
        )
    }
}

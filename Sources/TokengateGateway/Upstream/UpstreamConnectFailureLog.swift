//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOConcurrencyHelpers
import NIOCore
import TokengateHTTP

/// The log lines about connects to the targets of one upstream: a warning for a failed connect (TCP or TLS),
/// at most one per target per ``FailureLogThrottle/interval`` with the count since the last line, and one
/// notice when the target connects again. Both carry `failures`: the failed connects since the previous line.
///
/// Shared by every event loop's pool of the upstream (the pools, their failure counts and ejections are per
/// loop; the log is not, so a dead target does not get a line per loop). A lock, taken on connects only —
/// never for a request served on a pooled connection — like ``ConnectionRegistry``'s.
final class UpstreamConnectFailureLog: Sendable {
    private let upstream: String
    private let targets: [String]
    private let logger: Logger
    private let throttles: NIOLockedValueBox<[FailureLogThrottle]>

    /// - Parameter targets: each target's `scheme://host:port`, indexed like ``UpstreamSettings/targets``.
    init(upstream: String, targets: [String], logger: Logger, interval: TimeAmount = .seconds(1)) {
        self.upstream = upstream
        self.targets = targets
        self.logger = logger
        self.throttles = NIOLockedValueBox(Array(repeating: FailureLogThrottle(interval: interval), count: targets.count))
    }

    /// A connect to target `index` failed for the request `requestID`; `cause` says why, in words (never a
    /// secret: an address, an errno text, an OpenSSL reason).
    func failed(target index: Int, cause: String, requestID: String, now: NIODeadline = .now()) {
        guard let failures = self.throttles.withLockedValue({ $0[index].failed(now: now) }) else { return }
        self.logger.warning(
            "upstream connect failed",
            metadata: [
                "upstream": "\(self.upstream)", "target": "\(self.targets[index])", "error": "\(cause)",
                "request_id": "\(requestID)", "failures": "\(failures)",
            ]
        )
    }

    /// A connect to target `index` succeeded (with its TLS handshake, for `https://`).
    func connected(target index: Int, now: NIODeadline = .now()) {
        guard let unreported = self.throttles.withLockedValue({ $0[index].succeeded(now: now) }) else { return }
        self.logger.notice(
            "upstream target connected again",
            metadata: [
                "upstream": "\(self.upstream)", "target": "\(self.targets[index])",
                "failures": "\(unreported)",
            ]
        )
    }
}

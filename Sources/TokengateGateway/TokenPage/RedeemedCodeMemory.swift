//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOConcurrencyHelpers
import NIOCore
import TokengateTokens
import TokengateHTTP

/// The process's memory of redeemed PKCE codes (``RedeemedCodes`` under a lock), and the log lines about it
/// being full.
///
/// One for the whole process (``GatewayServer`` hands it to every configuration generation, as it does
/// ``TokenBodyMemory``): a memory per generation would forget every redeemed code at each reload, and a code
/// redeemed before a SIGHUP could be redeemed again after it. All token pages share it (a code names its page,
/// and nonces are unique across pages). Instances of the gateway do not share it: a code redeemed at two
/// instances within its 60 seconds gives two tokens (docs/mobile.md says so).
///
/// The lock is taken once per redemption that passed every other check, never on the proxy path.
final class RedeemedCodeMemory: Sendable {
    private struct State {
        var codes: RedeemedCodes
        /// Refusals because the memory is full: a warning at once, then at most one a second with the count.
        var fullLog = FailureLogThrottle()
    }

    private let state: NIOLockedValueBox<State>
    private let capacity: Int
    private let logger: Logger

    /// A memory for a runtime that serves no request (`check-config`, the configuration warnings): it is never
    /// asked, so it forgets nothing that matters. Named, so that no serving path makes one by accident.
    static func unused() -> RedeemedCodeMemory {
        RedeemedCodeMemory(capacity: 1, logger: Logger(label: "tokengate"))
    }

    /// - Parameter logger: where the warning about a full memory goes (throttled).
    init(capacity: Int = RedeemedCodes.defaultCapacity, logger: Logger) {
        self.state = NIOLockedValueBox(State(codes: RedeemedCodes(capacity: capacity)))
        self.capacity = capacity
        self.logger = logger
    }

    /// Remembers a redeemed code (``RedeemedCodes/admit(_:keepUntil:now:)``). A refusal because the memory is full
    /// is logged as a warning (throttled: ``FailureLogThrottle``), and the next admission after such warnings says
    /// the memory has room again. Nothing of the code is logged.
    ///
    /// - Parameters:
    ///   - keepUntil: the code's `exp` plus the clock skew the redemption allows (UNIX seconds).
    ///   - now: the clock codes expire by (UNIX seconds, the redemption's).
    ///   - logTime: the clock the log throttle counts by.
    func admit(
        _ nonce: TokenPageCodeNonce,
        keepUntil: Int64,
        now: Int64,
        logTime: NIODeadline = .now()
    ) -> RedeemedCodes.Admission {
        let (admission, logLine) = self.state.withLockedValue { state -> (RedeemedCodes.Admission, Int?) in
            let admission = state.codes.admit(nonce, keepUntil: keepUntil, now: now)
            switch admission {
            case .full: return (admission, state.fullLog.failed(now: logTime))
            case .first: return (admission, state.fullLog.succeeded(now: logTime))
            case .reused: return (admission, nil)
            }
        }
        // Logged outside the lock.
        switch (admission, logLine) {
        case (.full, let refused?):
            self.logger.warning(
                "token page code redemptions refused: the memory of redeemed codes is full",
                metadata: ["capacity": "\(self.capacity)", "refused": "\(refused)"]
            )
        case (.first, let refused?):
            self.logger.notice(
                "token page code redemptions accepted again: the memory of redeemed codes has room",
                metadata: ["capacity": "\(self.capacity)", "refused": "\(refused)"]
            )
        default:
            break
        }
        return admission
    }
}

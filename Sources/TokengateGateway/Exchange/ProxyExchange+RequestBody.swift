//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CoreMetrics
import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

// MARK: The request body's pace and memory.

extension ProxyExchange {
    /// Pauses or resumes reading the client's body, and keeps the time the gateway held it back (a connect under
    /// way, a backend that takes the body slowly) out of the body's pace. A request without a body, or whose
    /// body has ended, reads no clock here.
    func setReadingPaused(_ paused: Bool) {
        self.client.setRequestReadingPaused(paused)
        if self.machine.pacesBody {
            self.machine.requestReadingPaused(paused, now: .now())
        }
    }

    /// Starts the body's pace (``RequestBodyPace``) when the gateway begins to take a body: past its deadline an
    /// unfinished body is answered `408` and its connection closed. One task per request with a body, scheduled
    /// here and moved only when it fires.
    func startBodyDeadline() {
        guard self.machine.needsBodyDeadline, let deadline = self.machine.startBodyDeadline(now: .now()) else { return }
        self.scheduleBodyDeadline(at: deadline)
    }

    private func scheduleBodyDeadline(at deadline: NIODeadline) {
        self.bodyDeadline = self.client.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.bodyDeadline = nil
            // The client is asked only while the exchange takes the body: one that ended may have no client any more.
            let heldBack = self.machine.isReadingRequestBody && self.client.isRequestBodyHeldBack
            switch self.machine.bodyDeadlinePassed(now: .now(), heldBack: heldBack) {
            case .none: break
            case .reschedule(let deadline): self.scheduleBodyDeadline(at: deadline)
            case .end(let outcome): self.run(outcome)
            }
        }
    }

    func cancelBodyDeadline() {
        self.bodyDeadline?.cancel()
        self.bodyDeadline = nil
    }

    /// Starts reading a body the gateway needs whole to look for the token in it: takes `initial` bytes of the
    /// token-body memory for its buffer first (`503` when they are not there), then reads at the body's pace,
    /// answering an `Expect: 100-continue` now that the body is wanted.
    func beginReadingBody(initial: Int, limit: Int) {
        guard self.holdTokenBodyMemory(initial) else {
            self.answer(.tokenBodyMemoryFull())
            return
        }
        let action = self.machine.readBodyForToken(into: self.client.allocator.buffer(capacity: initial), limit: limit)
        self.beganReadingBody(action)
    }

    /// Does what the machine said when a body the gateway reads itself begins.
    func beganReadingBody(_ action: ProxyExchangeStateMachine.BodyReadingAction) {
        if action.startBodyDeadline {
            self.startBodyDeadline()
        }
        if action.sendContinue {
            self.sendContinue()
        }
    }

    /// Takes from ``GatewayRuntime/tokenBodyMemory`` what this exchange's token body needs beyond what it holds,
    /// up to `bytes` in all; false when that does not fit.
    func holdTokenBodyMemory(_ bytes: Int) -> Bool {
        guard bytes > self.tokenBodyBytesHeld else { return true }
        guard self.runtime.tokenBodyMemory.take(bytes - self.tokenBodyBytesHeld) else { return false }
        self.tokenBodyBytesHeld = bytes
        self.runtime.metrics.tokenBodyMemory.record(self.runtime.tokenBodyMemory.inUse)
        return true
    }

    func releaseTokenBodyMemory() {
        guard self.tokenBodyBytesHeld > 0 else { return }
        self.runtime.tokenBodyMemory.giveBack(self.tokenBodyBytesHeld)
        self.tokenBodyBytesHeld = 0
        self.runtime.metrics.tokenBodyMemory.record(self.runtime.tokenBodyMemory.inUse)
    }
}

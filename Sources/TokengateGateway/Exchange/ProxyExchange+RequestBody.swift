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
        guard self.bodyPace != nil, !self.requestEnded else { return }
        if paused {
            self.bodyPace?.pause(at: .now())
        } else {
            self.bodyPace?.resume(at: .now())
        }
    }

    /// Starts the body's pace (``RequestBodyPace``) when the gateway begins to take a body: past its deadline an
    /// unfinished body is answered `408` and its connection closed (``bodyDeadlinePassed()``). One task per
    /// request with a body, scheduled here and moved only when it fires.
    func startBodyDeadline() {
        guard self.hasBody, !self.requestEnded, self.bodyDeadline == nil else { return }
        let limits = self.runtime.limits
        if self.bodyPace == nil {
            self.bodyPace = RequestBodyPace(
                start: self.start,
                timeout: TimeAmount(limits.requestBodyTimeout),
                minimumRate: limits.requestBodyMinRate
            )
        }
        guard let pace = self.bodyPace else { return }  // `request_body_min_rate: 0`.
        self.scheduleBodyDeadline(at: pace.deadline(at: .now()))
    }

    private func scheduleBodyDeadline(at deadline: NIODeadline) {
        self.bodyDeadline = self.client.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.bodyDeadlinePassed()
        }
    }

    private func bodyDeadlinePassed() {
        self.bodyDeadline = nil
        // A backend that has answered already decides how the exchange ends.
        guard !self.requestEnded, !self.responseStarted, var pace = self.bodyPace else { return }
        switch self.state {
        case .readingBody, .awaitingUpstream, .forwarding:
            break
        case .tokenPage(let page):
            guard page.isReadingBody else { return }
        case .answered, .finished:
            return
        }
        let now = NIODeadline.now()
        if pace.deadline(at: now) <= now, self.client.isRequestBodyHeldBack {
            pace.heldBack(at: now)
            self.bodyPace = pace
        }
        let deadline = pace.deadline(at: now)
        if deadline > now {
            self.scheduleBodyDeadline(at: deadline)
            return
        }
        self.answer(.requestBodyTooSlow())
    }

    func cancelBodyDeadline() {
        self.bodyDeadline?.cancel()
        self.bodyDeadline = nil
    }

    /// Starts reading a body the gateway needs whole to look for the token in it: takes `initial` bytes of the
    /// token-body memory for its buffer first (`503` when they are not there), then reads at the body's pace,
    /// answering an `Expect: 100-continue` now that the body is wanted.
    func beginReadingBody(route routeIndex: Int, initial: Int, limit: Int) {
        guard self.holdTokenBodyMemory(initial) else {
            self.answer(.tokenBodyMemoryFull())
            return
        }
        self.state = .readingBody(route: routeIndex, body: self.client.allocator.buffer(capacity: initial), limit: limit)
        self.startBodyDeadline()
        self.sendContinueIfExpected()
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

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateHTTP

/// A client that has fallen behind its response, watched by the codec that serves it (an HTTP/1.1 connection,
/// an HTTP/2 stream): the grant of buffer it holds from ``ResponseBufferBudget``, its pace
/// (``ResponseSendPace``), and a look at it every second for as long as bytes wait for it.
///
/// Made only once a client falls behind (its connection's write buffer or its stream's queue passed 64 KiB),
/// so a client that keeps up costs nothing. The owner says at each look what the client took and what still
/// waits; once nothing waits, the watch stops and its grant goes back.
final class SlowClientWatch {
    private let eventLoop: any EventLoop
    private let budget: ResponseBufferBudget
    private var pace: ResponseSendPace?
    private var timer: Scheduled<Void>?
    /// Bytes of ``budget`` this client holds.
    private(set) var granted = 0

    static let lookInterval: TimeAmount = .seconds(1)
    /// What a connection (NIO's default write-buffer high mark) or a stream (the codec's queue limit) buffers
    /// for its client before it is said to fall behind; grants come on top of it.
    static let ownBuffer = 64 * 1024

    init(eventLoop: any EventLoop, budget: ResponseBufferBudget, timeout: TimeAmount, minimumRate: Int) {
        self.eventLoop = eventLoop
        self.budget = budget
        self.pace = ResponseSendPace(timeout: timeout, minimumRate: minimumRate)
    }

    /// Takes a grant of `bytes` when none is held and the budget has them; says whether one is held now.
    func takeGrant(_ bytes: Int) -> Bool {
        if self.granted == 0, bytes > 0, self.budget.take(bytes) {
            self.granted = bytes
        }
        return self.granted > 0
    }

    func giveBackGrant() {
        guard self.granted > 0 else { return }
        self.budget.giveBack(self.granted)
        self.granted = 0
    }

    private(set) var isLooking = false

    /// Looks at the client every second from now, calling `look` each time (``observe(sent:waiting:)`` from
    /// there), until ``stop()``; `look` is held strongly until then. The first look only starts the count: what
    /// the client took before it is the first window's worth (an HTTP/2 stream's, the kernel's socket buffer),
    /// sent before the client fell behind, and must not earn it time.
    func start(look: @escaping () -> Void) {
        guard !self.isLooking else { return }
        self.isLooking = true
        self.schedule(look)
    }

    private func schedule(_ look: @escaping () -> Void) {
        self.timer = self.eventLoop.assumeIsolated().scheduleTask(in: Self.lookInterval) {
            self.timer = nil
            look()
            if self.isLooking {
                self.schedule(look)
            }
        }
    }

    /// Records a look; returns whether the client is behind its minimum rate.
    func observe(sent: Int, waiting: Bool) -> Bool {
        self.pace?.observe(at: self.eventLoop.now, sent: sent, waiting: waiting) ?? false
    }

    /// No more looks (nothing waits, the client was cut, or it went away); the grant goes back. The pace is
    /// kept: a client that falls behind again goes on from what it had.
    func stop() {
        self.isLooking = false
        self.timer?.cancel()
        self.timer = nil
        self.giveBackGrant()
    }
}

@available(*, unavailable)
extension SlowClientWatch: Sendable {}

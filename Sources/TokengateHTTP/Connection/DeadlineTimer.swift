//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// A deadline that is moved on every request without scheduling a task every time.
///
/// Scheduling and cancelling a NIO task per request (a heap allocation, a heap-ordered insert and removal
/// in the event loop's timer queue) was a measurable share of the gateway's per-request cost, for timers that
/// almost never fire: the upstream response timeout and the idle timeout of a pooled connection. This timer
/// keeps at most one task scheduled. ``arm(at:)`` only records the new deadline when the scheduled task fires
/// no later than it; when the task fires it checks the deadline recorded *now*: none (``disarm()`` was
/// called) ends it, a later one schedules the task again for that deadline, a passed one runs the action.
/// With a constant timeout and back-to-back requests that is one scheduled task per timeout period instead
/// of one per request, and the action still runs exactly at the recorded deadline.
///
/// Event-loop bound: every method must be called on `eventLoop`, and the action runs there.
package final class DeadlineTimer {
    private let eventLoop: any EventLoop
    private let action: () -> Void
    private var deadline: NIODeadline?
    private var scheduled: Scheduled<Void>?
    /// When the scheduled task runs; only meaningful while `scheduled` is set.
    private var scheduledFor: NIODeadline = .uptimeNanoseconds(0)

    /// - Parameter action: runs on the event loop when a recorded deadline passes. It should not hold the
    ///   timer's owner strongly: the scheduled task holds this timer until it fires or ``cancel()``.
    package init(eventLoop: any EventLoop, action: @escaping () -> Void) {
        self.eventLoop = eventLoop
        self.action = action
    }

    /// Whether a deadline is recorded.
    package var isArmed: Bool { self.deadline != nil }

    /// Records `deadline`, replacing any earlier one.
    package func arm(at deadline: NIODeadline) {
        self.deadline = deadline
        if let scheduled = self.scheduled {
            // The task fires first and re-schedules itself for the new deadline: nothing to do now.
            if self.scheduledFor <= deadline { return }
            scheduled.cancel()
        }
        self.schedule(for: deadline)
    }

    /// Forgets the deadline. A task already scheduled stays and finds nothing to do when it fires.
    package func disarm() {
        self.deadline = nil
    }

    /// Forgets the deadline and cancels the scheduled task (the owner is going away).
    package func cancel() {
        self.deadline = nil
        self.scheduled?.cancel()
        self.scheduled = nil
    }

    private func schedule(for deadline: NIODeadline) {
        self.scheduledFor = deadline
        self.scheduled = self.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.fired()
        }
    }

    private func fired() {
        self.scheduled = nil
        guard let deadline = self.deadline else { return }
        if deadline > self.eventLoop.now {
            self.schedule(for: deadline)
            return
        }
        self.deadline = nil
        self.action()
    }
}

@available(*, unavailable)
extension DeadlineTimer: Sendable {}

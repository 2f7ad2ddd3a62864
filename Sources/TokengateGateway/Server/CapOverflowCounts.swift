//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateHTTP

/// The connections a listener's cap turned away (refused, or for the admin listener also evicted), counted and
/// handed out for one warning at most once per ``reportInterval``.
///
/// A flood past the cap is thousands of connections a second, and one warning each would bury the log (and cost
/// more than the refusal) exactly when an operator needs to read it. Kept inside the lock of its owner
/// (``ConnectionRegistry``, ``AdminConnectionSlots``), which counts as connections arrive and asks for a report
/// after each.
package struct CapOverflowCounts: Sendable {
    package static let reportInterval = TimeAmount.seconds(1)

    package var evicted = 0
    package var refused = 0
    private var lastReport: NIODeadline?

    package init() {}

    /// The counts since the last report, when there are some and the last report is at least ``reportInterval``
    /// old (they start again from 0); `nil` otherwise.
    package mutating func report(now: NIODeadline) -> (evicted: Int, refused: Int)? {
        guard self.evicted + self.refused > 0 else { return nil }
        if let last = self.lastReport, now - last < Self.reportInterval { return nil }
        defer {
            self.evicted = 0
            self.refused = 0
            self.lastReport = now
        }
        return (self.evicted, self.refused)
    }
}

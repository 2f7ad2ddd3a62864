//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOEmbedded
import Testing
import TokengateAdmin

@testable import TokengateGateway

/// The admin cap's choice on its own: who makes room for a new connection, who never does, and how often a
/// flood is logged.
@Suite struct AdminConnectionSlotsTests {
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func theLongestWaitingConnectionMakesRoom() throws {
        let slots = AdminConnectionSlots(limit: 3)
        let (a, b, c) = (EmbeddedChannel(), EmbeddedChannel(), EmbeddedChannel())
        for (offset, channel) in [a, b, c].enumerated() {
            guard case .admitted = slots.admit(channel, now: self.start + .seconds(Int64(offset))) else {
                Issue.record("under the cap")
                return
            }
        }
        // `a` began a request later than the others arrived: `b` has now waited longest.
        slots.waiting(a, now: self.start + .seconds(5))
        let d = EmbeddedChannel()
        guard case .admittedInPlaceOf(let evicted) = slots.admit(d, now: self.start + .seconds(6)) else {
            Issue.record("at the cap, d takes a place")
            return
        }
        #expect(evicted === b)
        #expect(slots.count == 3)
        #expect(!slots.serving(b), "an evicted connection's request is not served")
        #expect(slots.serving(c))
        _ = try b.finish()
        #expect(slots.count == 3, "the evicted one's close frees nothing more: its place is d's")
        for channel in [a, c, d] { _ = try channel.finish() }
        #expect(slots.count == 0)
    }

    @Test func aConnectionBeingServedIsNeverEvicted() throws {
        let slots = AdminConnectionSlots(limit: 2)
        let (a, b) = (EmbeddedChannel(), EmbeddedChannel())
        _ = slots.admit(a, now: self.start)
        _ = slots.admit(b, now: self.start + .seconds(1))
        #expect(slots.serving(a) && slots.serving(b))
        guard case .refused = slots.admit(EmbeddedChannel(), now: self.start + .seconds(2)) else {
            Issue.record("every place is serving: refused")
            return
        }
        slots.waiting(b, now: self.start + .seconds(3))  // b's answer is written
        guard case .admittedInPlaceOf(let evicted) = slots.admit(EmbeddedChannel(), now: self.start + .seconds(4)) else {
            Issue.record("b waits again: it makes room")
            return
        }
        #expect(evicted === b)
        for channel in [a, b] { _ = try channel.finish() }
    }

    /// A flood gets one warning a second with both counts, not one line per connection.
    @Test func overflowIsReportedAtMostOncePerInterval() throws {
        let slots = AdminConnectionSlots(limit: 1)
        let serving = EmbeddedChannel()
        _ = slots.admit(serving, now: self.start)
        #expect(slots.overflowToReport(now: self.start) == nil, "nothing over the cap yet")
        _ = slots.serving(serving)
        _ = slots.admit(EmbeddedChannel(), now: self.start)
        #expect(slots.overflowToReport(now: self.start).map { [$0.evicted, $0.refused] } == [0, 1])
        slots.waiting(serving, now: self.start)
        for _ in 0..<500 { _ = slots.admit(EmbeddedChannel(), now: self.start + .milliseconds(10)) }
        #expect(slots.overflowToReport(now: self.start + .milliseconds(999)) == nil)
        #expect(slots.overflowToReport(now: self.start + .seconds(1)).map { [$0.evicted, $0.refused] } == [500, 0])
        #expect(slots.overflowToReport(now: self.start + .seconds(5)) == nil)
        _ = try serving.finish()
    }
}

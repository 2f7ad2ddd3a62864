//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import Testing
import TokengateHTTP


@Suite struct HTTP2DoSHeuristicsTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test(arguments: HTTP2DoSHeuristics.Event.allCases)
    func theBurstPassesAndTheNextEventTrips(_ event: HTTP2DoSHeuristics.Event) {
        var heuristics = HTTP2DoSHeuristics(now: self.start)
        let burst = heuristics.limits.limit(for: event).burst
        for _ in 0..<burst {
            #expect(heuristics.record(event, now: self.start) == .proceed)
        }
        #expect(heuristics.record(event, now: self.start) == .enhanceYourCalm(event))
    }

    @Test func bucketsAreIndependent() {
        var heuristics = HTTP2DoSHeuristics(now: self.start)
        for _ in 0..<heuristics.limits.ping.burst {
            _ = heuristics.record(.ping, now: self.start)
        }
        #expect(heuristics.record(.ping, now: self.start) == .enhanceYourCalm(.ping))
        #expect(heuristics.record(.windowUpdate, now: self.start) == .proceed)
        #expect(heuristics.record(.emptyData, now: self.start) == .proceed)
        #expect(heuristics.record(.serverReset, now: self.start) == .proceed)
    }

    @Test func tokensRefillAtTheConfiguredRate() {
        var limits = HTTP2DoSHeuristics.Limits()
        limits.ping = .init(burst: 3, perSecond: 2)
        var heuristics = HTTP2DoSHeuristics(limits: limits, now: self.start)
        for _ in 0..<3 { #expect(heuristics.record(.ping, now: self.start) == .proceed) }
        #expect(heuristics.record(.ping, now: self.start) == .enhanceYourCalm(.ping))
        // Half a second later: exactly one more token.
        let later = self.start + .milliseconds(500)
        #expect(heuristics.record(.ping, now: later) == .proceed)
        #expect(heuristics.record(.ping, now: later) == .enhanceYourCalm(.ping))
        // 499 ms later: not quite one token yet.
        #expect(heuristics.record(.ping, now: later + .milliseconds(499)) == .enhanceYourCalm(.ping))
        #expect(heuristics.record(.ping, now: later + .milliseconds(500)) == .proceed)
    }

    @Test func aSteadyRateBelowTheLimitNeverTrips() {
        var heuristics = HTTP2DoSHeuristics(now: self.start)
        let rate = heuristics.limits.ping.perSecond
        var now = self.start
        for _ in 0..<(rate * 600) {  // Ten minutes at exactly the allowed rate.
            now = now + .nanoseconds(1_000_000_000 / Int64(rate))
            #expect(heuristics.record(.ping, now: now) == .proceed)
        }
    }

    @Test func aLongPauseRefillsOnlyUpToTheBurst() {
        var limits = HTTP2DoSHeuristics.Limits()
        limits.emptyData = .init(burst: 4, perSecond: 1_000_000)
        var heuristics = HTTP2DoSHeuristics(limits: limits, now: self.start)
        let muchLater = self.start + .hours(24 * 365 * 10)
        for _ in 0..<4 { #expect(heuristics.record(.emptyData, now: muchLater) == .proceed) }
        #expect(heuristics.record(.emptyData, now: muchLater) == .enhanceYourCalm(.emptyData))
    }

    @Test func aClockGoingBackwardsRefillsNothing() {
        var limits = HTTP2DoSHeuristics.Limits()
        limits.ping = .init(burst: 1, perSecond: 1)
        var heuristics = HTTP2DoSHeuristics(limits: limits, now: self.start)
        #expect(heuristics.record(.ping, now: self.start + .seconds(5)) == .proceed)
        #expect(heuristics.record(.ping, now: self.start) == .enhanceYourCalm(.ping))
    }

    @Test func dataSentEarnsWindowUpdates() {
        var limits = HTTP2DoSHeuristics.Limits()
        limits.windowUpdate = .init(burst: 10, perSecond: 0)
        var heuristics = HTTP2DoSHeuristics(limits: limits, now: self.start)
        for _ in 0..<10 { #expect(heuristics.record(.windowUpdate, now: self.start) == .proceed) }
        #expect(heuristics.record(.windowUpdate, now: self.start) == .enhanceYourCalm(.windowUpdate))
        heuristics.sentDataFrame(now: self.start)
        #expect(heuristics.record(.windowUpdate, now: self.start) == .proceed)
        #expect(heuristics.record(.windowUpdate, now: self.start) == .proceed)
        #expect(heuristics.record(.windowUpdate, now: self.start) == .enhanceYourCalm(.windowUpdate))
        // Credits never exceed the burst.
        for _ in 0..<1000 { heuristics.sentDataFrame(now: self.start) }
        for _ in 0..<10 { #expect(heuristics.record(.windowUpdate, now: self.start) == .proceed) }
        #expect(heuristics.record(.windowUpdate, now: self.start) == .enhanceYourCalm(.windowUpdate))
    }
}

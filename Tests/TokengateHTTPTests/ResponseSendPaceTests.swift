//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import Testing

@testable import TokengateHTTP

@Suite struct ResponseSendPaceTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    func pace() throws -> ResponseSendPace {
        try #require(ResponseSendPace(timeout: .seconds(20), minimumRate: 1024))
    }

    func at(_ seconds: Int64) -> NIODeadline { self.start + .seconds(seconds) }

    @Test func offAtRateZero() {
        #expect(ResponseSendPace(timeout: .seconds(20), minimumRate: 0) == nil)
    }

    @Test func aTrickleWhileBytesWaitIsBehindSoonAfterTheTimeout() throws {
        var pace = try self.pace()
        var sent = 0
        var behindAt: Int64?
        for second in Int64(0)...60 {
            sent += 10  // 10 bytes a second, the rest of the response waiting.
            if pace.observe(at: self.at(second), sent: sent, waiting: true) {
                behindAt = second
                break
            }
        }
        // 20 s of waiting, plus what 10 bytes a second earn (under a second in all by then).
        #expect(behindAt == 21)
    }

    @Test func aSteadyReaderAboveTheRateIsNeverBehind() throws {
        var pace = try self.pace()
        var sent = 0
        for second in Int64(0)...7200 {
            sent += 1100
            let behind = pace.observe(at: self.at(second), sent: sent, waiting: true)
            #expect(!behind, "second \(second)")
            if behind { break }
        }
    }

    @Test func quietTimeWithNothingWaitingIsNotCounted() throws {
        var pace = try self.pace()
        // Waits 15 s while taking nothing, then has nothing waiting (a stream between events) for an hour.
        _ = pace.observe(at: self.at(0), sent: 0, waiting: true)
        let waited = pace.observe(at: self.at(15), sent: 0, waiting: false)
        #expect(!waited)
        let quiet = pace.observe(at: self.at(3615), sent: 0, waiting: false)
        #expect(!quiet)
        #expect(pace.waited == .seconds(15))
        // Falls behind again: the 15 s count, so 6 more seconds of nothing taken is over the 20.
        _ = pace.observe(at: self.at(3620), sent: 0, waiting: true)
        let five = pace.observe(at: self.at(3625), sent: 0, waiting: true)
        #expect(!five)
        let six = pace.observe(at: self.at(3626), sent: 0, waiting: true)
        #expect(six)
    }

    @Test func bytesTakenWhileWaitingEarnTimeAndOthersDoNot() throws {
        var pace = try self.pace()
        _ = pace.observe(at: self.at(0), sent: 0, waiting: false)
        // 1 MiB taken while nothing waited at the look before: not counted.
        _ = pace.observe(at: self.at(1), sent: 1 << 20, waiting: true)
        #expect(pace.sentWhileWaiting == 0)
        // 10 KiB taken while waiting: 10 s earned on top of the 20.
        _ = pace.observe(at: self.at(2), sent: (1 << 20) + 10 * 1024, waiting: true)
        #expect(pace.sentWhileWaiting == 10 * 1024)
        let at30 = pace.observe(at: self.at(31), sent: (1 << 20) + 10 * 1024, waiting: true)
        #expect(!at30)  // 30 s waited, 30 s allowed.
        let at31 = pace.observe(at: self.at(32), sent: (1 << 20) + 10 * 1024, waiting: true)
        #expect(at31)
    }

    @Test func aHugeDownloadAtATinyRateDoesNotOverflow() throws {
        var pace = try #require(ResponseSendPace(timeout: .seconds(1), minimumRate: 1))
        _ = pace.observe(at: self.at(0), sent: 0, waiting: true)
        let behind = pace.observe(at: self.at(1), sent: Int.max / 2, waiting: true)
        #expect(!behind)
    }
}

@Suite struct ResponseBufferBudgetTests {
    @Test func grantsFitUnderTheLimitAndComeBack() {
        let budget = ResponseBufferBudget(limit: 1000)
        #expect(budget.take(600))
        #expect(!budget.take(500))
        #expect(budget.take(400))
        #expect(budget.inUse == 1000)
        budget.giveBack(600)
        #expect(budget.take(500))
        #expect(budget.inUse == 900)
        budget.limit = 100  // Lowered: nothing taken back, nothing new fits.
        #expect(!budget.take(1))
        #expect(budget.inUse == 900)
    }

    @Test func concurrentTakersNeverExceedTheLimit() async {
        let budget = ResponseBufferBudget(limit: 10_000)
        let granted = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var mine = 0
                    for _ in 0..<1000 where budget.take(7) { mine += 7 }
                    return mine
                }
            }
            return await group.reduce(0, +)
        }
        #expect(granted == budget.inUse)
        #expect(granted <= 10_000)
        #expect(granted > 10_000 - 7)
    }
}

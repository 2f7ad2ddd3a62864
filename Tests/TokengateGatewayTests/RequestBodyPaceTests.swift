//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import Testing

@testable import TokengateGateway

@Suite struct RequestBodyPaceTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    func pace() throws -> RequestBodyPace {
        try #require(RequestBodyPace(start: self.start, timeout: .seconds(20), minimumRate: 512))
    }

    @Test func theTimeoutPlusASecondPerMinimumRateBytes() throws {
        var pace = try self.pace()
        #expect(pace.deadline(at: self.start) == self.start + .seconds(20))
        pace.received(512 * 10)
        #expect(pace.deadline(at: self.start) == self.start + .seconds(30))
        pace.received(256)
        #expect(pace.deadline(at: self.start) == self.start + .milliseconds(30_500))
    }

    @Test func aSteadyPaceAboveTheRateNeverRunsOut() throws {
        var pace = try self.pace()
        for second in 1...3600 {
            pace.received(600)
            let now = self.start + .seconds(Int64(second))
            #expect(pace.deadline(at: now) > now, "second \(second)")
        }
    }

    @Test func aTrickleRunsOutSoonAfterTheTimeout() throws {
        var pace = try self.pace()
        var cutAt: Int?
        for second in 1...120 {
            pace.received(1)
            let now = self.start + .seconds(Int64(second))
            if pace.deadline(at: now) <= now {
                cutAt = second
                break
            }
        }
        #expect(cutAt == 21)
    }

    @Test func timeTheGatewayHeldTheBodyIsNotCounted() throws {
        var pace = try self.pace()
        pace.pause(at: self.start + .seconds(5))
        // Still paused: the deadline moves with the clock.
        #expect(pace.deadline(at: self.start + .seconds(50)) == self.start + .seconds(65))
        pace.pause(at: self.start + .seconds(40))  // A second pause while paused changes nothing.
        pace.resume(at: self.start + .seconds(50))
        #expect(pace.deadline(at: self.start + .seconds(60)) == self.start + .seconds(65))
        pace.resume(at: self.start + .seconds(70))  // Not paused: nothing to add.
        #expect(pace.deadline(at: self.start + .seconds(70)) == self.start + .seconds(65))
    }

    @Test func heldBackByOthersGivesTheMissedTimeAndAGrace() throws {
        var pace = try self.pace()
        let late = self.start + .seconds(27)
        #expect(pace.deadline(at: late) < late)
        pace.heldBack(at: late)
        #expect(pace.deadline(at: late) == late + RequestBodyPace.heldBackGrace)
    }

    @Test func aHugeUploadWithATinyRateDoesNotOverflow() throws {
        var pace = try #require(RequestBodyPace(start: self.start, timeout: .seconds(1), minimumRate: 1))
        pace.received(Int.max / 2)
        #expect(pace.deadline(at: self.start) > self.start + .seconds(86_400))
    }

    @Test func rateZeroTurnsTheCheckOff() {
        #expect(RequestBodyPace(start: self.start, timeout: .seconds(20), minimumRate: 0) == nil)
    }
}

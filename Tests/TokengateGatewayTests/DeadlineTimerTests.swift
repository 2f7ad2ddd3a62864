//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOEmbedded
import Testing
import TokengateHTTP

@testable import TokengateGateway

/// The timer behind the response and pooled-idle timeouts: it must fire exactly at the deadline recorded
/// last, never for a disarmed one, and earlier when a deadline moves earlier.
@Suite struct DeadlineTimerTests {
    private final class Counter {
        var fired = 0
    }

    @Test func firesAtTheLastRecordedDeadlineNotTheFirst() {
        let loop = EmbeddedEventLoop()
        let counter = Counter()
        let timer = DeadlineTimer(eventLoop: loop) { counter.fired += 1 }
        let start = loop.now
        timer.arm(at: start + .seconds(10))
        loop.advanceTime(by: .seconds(5))
        timer.arm(at: start + .seconds(15))  // A new request on the same connection.
        loop.advanceTime(by: .seconds(6))
        #expect(counter.fired == 0, "the first deadline was replaced")
        #expect(timer.isArmed)
        loop.advanceTime(by: .seconds(3))
        #expect(counter.fired == 0, "14 s: still before the deadline")
        loop.advanceTime(by: .seconds(1))
        #expect(counter.fired == 1, "fires at 15 s")
        #expect(!timer.isArmed)
        loop.advanceTime(by: .seconds(60))
        #expect(counter.fired == 1, "fires once")
    }

    @Test func aDisarmedDeadlineNeverFires() {
        let loop = EmbeddedEventLoop()
        let counter = Counter()
        let timer = DeadlineTimer(eventLoop: loop) { counter.fired += 1 }
        timer.arm(at: loop.now + .seconds(1))
        timer.disarm()
        loop.advanceTime(by: .seconds(5))
        #expect(counter.fired == 0)
        timer.arm(at: loop.now + .seconds(1))
        timer.cancel()
        loop.advanceTime(by: .seconds(5))
        #expect(counter.fired == 0)
    }

    @Test func anEarlierDeadlineFiresEarly() {
        let loop = EmbeddedEventLoop()
        let counter = Counter()
        let timer = DeadlineTimer(eventLoop: loop) { counter.fired += 1 }
        timer.arm(at: loop.now + .seconds(60))
        timer.arm(at: loop.now + .seconds(2))
        loop.advanceTime(by: .seconds(2))
        #expect(counter.fired == 1, "the earlier deadline is not left waiting behind the later task")
    }

    @Test func reArmingAfterFiringWorks() {
        let loop = EmbeddedEventLoop()
        let counter = Counter()
        let timer = DeadlineTimer(eventLoop: loop) { counter.fired += 1 }
        timer.arm(at: loop.now + .seconds(1))
        loop.advanceTime(by: .seconds(1))
        timer.arm(at: loop.now + .seconds(1))
        loop.advanceTime(by: .milliseconds(999))
        #expect(counter.fired == 1)
        loop.advanceTime(by: .milliseconds(1))
        #expect(counter.fired == 2)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import Testing

@testable import TokengateGateway

/// The rules of ``FailureLogThrottle`` as a value with a hand-moved clock, and the lines
/// ``UpstreamConnectFailureLog`` writes by them.
@Suite struct FailureLogThrottleTests {
    private static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private static func at(_ milliseconds: Int64) -> NIODeadline {
        Self.start + .milliseconds(milliseconds)
    }

    @Test func theFirstFailureIsReportedThenOneLinePerIntervalWithTheCount() {
        var throttle = FailureLogThrottle(interval: .seconds(1))
        #expect(throttle.failed(now: Self.at(0)) == 1)
        #expect(throttle.failed(now: Self.at(10)) == nil)
        #expect(throttle.failed(now: Self.at(500)) == nil)
        #expect(throttle.failed(now: Self.at(999)) == nil)
        #expect(throttle.failed(now: Self.at(1000)) == 4, "the three held back and this one")
        #expect(throttle.failed(now: Self.at(1500)) == nil)
        #expect(throttle.failed(now: Self.at(5000)) == 2)
    }

    @Test func aSuccessAfterAReportedFailureIsReportedOnceWithTheFailuresHeldBack() {
        var throttle = FailureLogThrottle(interval: .seconds(1))
        #expect(throttle.succeeded(now: Self.at(0)) == nil, "nothing failed: nothing to say")
        #expect(throttle.failed(now: Self.at(0)) == 1)
        #expect(throttle.failed(now: Self.at(100)) == nil)
        #expect(throttle.failed(now: Self.at(200)) == nil)
        #expect(throttle.succeeded(now: Self.at(300)) == 2, "the recovery line at once, with the failures not yet logged")
        #expect(throttle.succeeded(now: Self.at(400)) == nil, "once")
    }

    @Test func aFlappingTargetGetsAboutTwoLinesPerInterval() {
        var throttle = FailureLogThrottle(interval: .seconds(1))
        var lines = 0
        // A failure and a success every 10 ms for 3 s.
        for step in 0..<300 {
            if throttle.failed(now: Self.at(Int64(step) * 10)) != nil { lines += 1 }
            if throttle.succeeded(now: Self.at(Int64(step) * 10 + 5)) != nil { lines += 1 }
        }
        #expect(lines <= 7, "\(lines) lines in 3 s")
        #expect(lines >= 2)
    }

    @Test func failuresHeldBackAfterARecoveryAreReportedByALaterLine() {
        var throttle = FailureLogThrottle(interval: .seconds(1))
        #expect(throttle.failed(now: Self.at(0)) == 1)
        #expect(throttle.succeeded(now: Self.at(100)) == 0)
        #expect(throttle.failed(now: Self.at(200)) == nil, "within a second of the last line")
        #expect(throttle.succeeded(now: Self.at(300)) == nil, "held back too")
        #expect(throttle.succeeded(now: Self.at(1100)) == 1, "the failure comes out with the next line")
        #expect(throttle.failed(now: Self.at(2200)) == 1)
    }

    @Test func theSharedLogWritesAWarningPerTargetAndANoticeOnRecovery() {
        let capture = LogCapture()
        var logger = Logger(label: "test") { label in capture.handler(label: label) }
        logger.logLevel = .info
        let log = UpstreamConnectFailureLog(upstream: "api", targets: ["http://10.0.0.1:80", "http://10.0.0.2:80"], logger: logger)
        log.failed(target: 0, cause: "connection refused", requestID: "r1", now: Self.at(0))
        log.failed(target: 0, cause: "connection refused", requestID: "r2", now: Self.at(10))
        log.failed(target: 1, cause: "connection refused", requestID: "r3", now: Self.at(20))
        log.failed(target: 0, cause: "connection refused", requestID: "r4", now: Self.at(1200))
        log.connected(target: 1, now: Self.at(1300))
        log.connected(target: 0, now: Self.at(1300))
        log.connected(target: 0, now: Self.at(1400))
        #expect(
            capture.all == [
                "warning upstream connect failed error=connection refused failures=1 request_id=r1 target=http://10.0.0.1:80 upstream=api",
                "warning upstream connect failed error=connection refused failures=1 request_id=r3 target=http://10.0.0.2:80 upstream=api",
                "warning upstream connect failed error=connection refused failures=2 request_id=r4 target=http://10.0.0.1:80 upstream=api",
                "notice upstream target connected again failures=0 target=http://10.0.0.2:80 upstream=api",
                "notice upstream target connected again failures=0 target=http://10.0.0.1:80 upstream=api",
            ],
            "\(capture.all)"
        )
    }
}

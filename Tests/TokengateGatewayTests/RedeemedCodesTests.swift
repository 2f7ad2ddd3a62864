//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import Testing
import TokengateTestSupport
import TokengateTokens

@testable import TokengateGateway

/// The memory of redeemed PKCE codes as a plain value: a code is admitted once, until it expires; the memory is
/// bounded, and when it is full of codes that have not expired a new one is refused (fail closed).
@Suite struct RedeemedCodesTests {
    static let now: Int64 = 1_700_000_000

    static func nonce(_ n: Int) -> TokenPageCodeNonce {
        TokenPageCodeNonce(high: UInt64(n), low: UInt32(truncatingIfNeeded: n &* 7))
    }

    @Test func aCodeIsAdmittedOnceUntilItExpires() {
        var codes = RedeemedCodes()
        #expect(codes.capacity == 100_000)
        #expect(codes.admit(Self.nonce(1), keepUntil: Self.now + 60, now: Self.now) == .first)
        #expect(codes.admit(Self.nonce(1), keepUntil: Self.now + 60, now: Self.now + 1) == .reused)
        #expect(codes.admit(Self.nonce(1), keepUntil: Self.now + 60, now: Self.now + 59) == .reused)
        #expect(codes.admit(Self.nonce(2), keepUntil: Self.now + 60, now: Self.now + 1) == .first)
        #expect(codes.count == 2)
    }

    @Test func fullOfUnexpiredCodesANewOneIsRefusedAndAnOldOneStillReused() {
        var codes = RedeemedCodes(capacity: 3)
        for n in 1...3 {
            #expect(codes.admit(Self.nonce(n), keepUntil: Self.now + 60 + Int64(n), now: Self.now) == .first)
        }
        #expect(codes.admit(Self.nonce(4), keepUntil: Self.now + 60, now: Self.now) == .full)
        #expect(codes.admit(Self.nonce(4), keepUntil: Self.now + 60, now: Self.now + 60) == .full, "none expired yet")
        #expect(codes.admit(Self.nonce(2), keepUntil: Self.now + 62, now: Self.now + 60) == .reused, "full, still refused as reused")
        #expect(codes.count == 3)
        // Code 1 expires at now + 61: room for one.
        #expect(codes.admit(Self.nonce(4), keepUntil: Self.now + 121, now: Self.now + 61) == .first)
        #expect(codes.admit(Self.nonce(5), keepUntil: Self.now + 121, now: Self.now + 61) == .full)
        #expect(codes.count == 3)
        // All but 4 expired.
        #expect(codes.admit(Self.nonce(5), keepUntil: Self.now + 123, now: Self.now + 63) == .first)
        #expect(codes.admit(Self.nonce(6), keepUntil: Self.now + 123, now: Self.now + 63) == .first)
        #expect(codes.admit(Self.nonce(7), keepUntil: Self.now + 123, now: Self.now + 63) == .full)
        #expect(codes.admit(Self.nonce(4), keepUntil: Self.now + 121, now: Self.now + 63) == .reused)
    }

    /// Below the capacity, expired codes are dropped once the count has doubled since the last sweep: an idle
    /// gateway does not keep a day's codes.
    @Test func expiredCodesAreSweptLongBeforeTheMemoryIsFull() {
        var codes = RedeemedCodes()
        let count = RedeemedCodes.minimumSweepCount
        for n in 0..<count {
            #expect(codes.admit(Self.nonce(n), keepUntil: Self.now + 60, now: Self.now) == .first)
        }
        #expect(codes.count == count)
        #expect(codes.admit(Self.nonce(count), keepUntil: Self.now + 120, now: Self.now + 59) == .first)
        #expect(codes.count == count + 1, "nothing had expired")
        #expect(codes.admit(Self.nonce(count + 1), keepUntil: Self.now + 120, now: Self.now + 60) == .first)
        #expect(codes.count == 2, "the first \(count) expired and were dropped")
        #expect(codes.admit(Self.nonce(count), keepUntil: Self.now + 120, now: Self.now + 60) == .reused)
    }

    @Test func theMemoryNeverHoldsMoreThanItsCapacity() {
        var codes = RedeemedCodes(capacity: 2000)
        var now = Self.now
        var admitted = 0
        var refused = 0
        for n in 0..<20_000 {
            if n % 100 == 0 { now += 1 }  // 100 redemptions a second: 6,000 live at any time, 2,000 fit.
            switch codes.admit(Self.nonce(n), keepUntil: now + 60, now: now) {
            case .first: admitted += 1
            case .full: refused += 1
            case .reused: Issue.record("code \(n) was never redeemed")
            }
            #expect(codes.count <= 2000)
        }
        #expect(admitted > 2000, "room came back as codes expired")
        #expect(refused > 0)
    }

    @Test func aFullMemoryLogsAThrottledWarningAndThenThatItHasRoomAgain() {
        let lines = RecordedLogLines()
        let memory = RedeemedCodeMemory(capacity: 1, logger: lines.logger())
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        #expect(memory.admit(Self.nonce(1), keepUntil: Self.now + 60, now: Self.now, logTime: start) == .first)
        #expect(lines.all.isEmpty)
        for n in 2...5 {
            let at = start + .milliseconds(Int64(n) * 100)
            #expect(memory.admit(Self.nonce(n), keepUntil: Self.now + 60, now: Self.now, logTime: at) == .full)
        }
        #expect(memory.admit(Self.nonce(1), keepUntil: Self.now + 60, now: Self.now, logTime: start) == .reused)
        #expect(lines.all.count == 1, "\(lines.all)")
        #expect(lines.all.first?.level == .warning)
        #expect(lines.all.first?.message.contains("memory of redeemed codes is full") == true)
        #expect(lines.all.first?.metadata["capacity"] == "1")
        #expect(lines.all.first?.metadata["refused"] == "1")
        // A second later, one more line with the refusals held back.
        #expect(memory.admit(Self.nonce(6), keepUntil: Self.now + 60, now: Self.now, logTime: start + .seconds(2)) == .full)
        #expect(lines.all.count == 2)
        #expect(lines.all.last?.metadata["refused"] == "4")
        // Code 1 expired: room again, and a line says so.
        #expect(memory.admit(Self.nonce(7), keepUntil: Self.now + 120, now: Self.now + 60, logTime: start + .seconds(3)) == .first)
        #expect(lines.all.count == 3)
        #expect(lines.all.last?.level == .notice)
        #expect(lines.all.last?.message.contains("accepted again") == true)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing

@testable import TokengateGateway

/// The counting behind `health_check`'s thresholds, and the table the pools read.
@Suite struct TargetHealthStateTests {
    @Test func failuresInARowEjectAndSuccessesInARowRestore() {
        var state = TargetHealthState(healthyThreshold: 2, unhealthyThreshold: 3)
        #expect(state.isHealthy)
        let first = [state.record(passed: false), state.record(passed: false)]
        #expect(first == [.none, .none] && state.isHealthy)
        let third = state.record(passed: false)
        #expect(third == .becameUnhealthy && !state.isHealthy)
        let more = state.record(passed: false)
        #expect(more == .none && state.failuresInARow == 3, "capped at the threshold")
        let one = state.record(passed: true)
        #expect(one == .none && !state.isHealthy)
        let two = state.record(passed: true)
        #expect(two == .becameHealthy && state.isHealthy && state.failuresInARow == 0)
    }

    @Test func aResultOfTheOtherKindResetsTheCount() {
        var state = TargetHealthState(healthyThreshold: 2, unhealthyThreshold: 2)
        var transitions: [TargetHealthState.Transition] = []
        for passed in [false, true, false, true, false] {
            transitions.append(state.record(passed: passed))
        }
        #expect(transitions.allSatisfy { $0 == .none } && state.isHealthy, "a flapping target stays where it is")
        let out = [state.record(passed: false)]
        #expect(out == [.becameUnhealthy])
        var back: [TargetHealthState.Transition] = []
        for passed in [true, false, true, true] {
            back.append(state.record(passed: passed))
        }
        #expect(back == [.none, .none, .none, .becameHealthy])
    }

    @Test func thresholdsOfOneActOnEveryResult() {
        var state = TargetHealthState(healthyThreshold: 1, unhealthyThreshold: 1)
        let results = [state.record(passed: false), state.record(passed: true), state.record(passed: true)]
        #expect(results == [.becameUnhealthy, .becameHealthy, .none])
    }

    @Test func whenEveryTargetIsDownEveryTargetIsUsable() {
        let health = UpstreamTargetHealth(upstream: "api", targets: ["a", "b"])
        var down = TargetHealthState(healthyThreshold: 1, unhealthyThreshold: 1)
        _ = down.record(passed: false)
        health.publish(0, state: down, result: "status 500", passed: false)
        #expect(!health.isUsable(0) && health.isUsable(1))
        health.publish(1, state: down, result: "connect failed", passed: false)
        #expect(health.isUsable(0) && health.isUsable(1), "all down: the checks are not obeyed")
        #expect(!health.isHealthy(0) && !health.isHealthy(1))
        var up = down
        _ = up.record(passed: true)
        health.publish(1, state: up, result: "status 200", passed: true)
        #expect(!health.isUsable(0) && health.isUsable(1))
        #expect(health.snapshot.map(\.lastResult) == ["status 500", "status 200"])
    }
}

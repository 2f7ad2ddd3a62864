//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The active health of one target: the results of its checks in a row, and whether it is in the rotation.
///
/// A value type that only counts and says what changed; the checker (``UpstreamHealthChecker``) publishes the
/// change and logs it. A target starts healthy (a start or a reload must not take targets out of the rotation
/// before they were checked); `unhealthyThreshold` failures in a row take it out, then `healthyThreshold`
/// successes in a row bring it back. A result of the other kind resets the count, so a target that flaps
/// between answers stays where it is.
struct TargetHealthState: Equatable {
    enum Transition: Equatable {
        case none
        case becameUnhealthy
        case becameHealthy
    }

    private(set) var isHealthy: Bool
    private(set) var successesInARow = 0
    private(set) var failuresInARow = 0
    let healthyThreshold: Int
    let unhealthyThreshold: Int

    init(healthy: Bool = true, healthyThreshold: Int, unhealthyThreshold: Int) {
        precondition(healthyThreshold >= 1 && unhealthyThreshold >= 1)
        self.isHealthy = healthy
        self.healthyThreshold = healthyThreshold
        self.unhealthyThreshold = unhealthyThreshold
    }

    /// Counts one check's result; says whether the target left or rejoined the rotation with it.
    mutating func record(passed: Bool) -> Transition {
        if passed {
            self.failuresInARow = 0
            // Capped: past the threshold the count only has to say "reached".
            self.successesInARow = min(self.successesInARow + 1, self.healthyThreshold)
            guard !self.isHealthy, self.successesInARow >= self.healthyThreshold else { return .none }
            self.isHealthy = true
            return .becameHealthy
        }
        self.successesInARow = 0
        self.failuresInARow = min(self.failuresInARow + 1, self.unhealthyThreshold)
        guard self.isHealthy, self.failuresInARow >= self.unhealthyThreshold else { return .none }
        self.isHealthy = false
        return .becameUnhealthy
    }
}

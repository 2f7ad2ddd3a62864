//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Which kinds of request to send and how often: weights such as `api=85,session=4,revoked=4`.
///
/// The weights are turned into a fixed schedule of 1,000 slots (largest-remainder rounding, then a seeded
/// shuffle), so every run sends the same proportions in the same order, and picking the next kind is an array
/// read rather than a random draw.
struct TokenMix: Sendable, CustomStringConvertible {
    static let scheduleLength = 1_000
    static let standard = "api=85,session=4,revoked=4,bad_signature=4,form=3"

    let weights: [BenchTokenKind: Int]
    /// Kind indices (BenchTokenKind/index), in sending order.
    let schedule: [UInt8]

    init(parsing text: String) throws {
        var weights: [BenchTokenKind: Int] = [:]
        for item in text.split(separator: ",") {
            let parts = item.split(separator: "=", maxSplits: 1).map { String($0).trimmingSpaces }
            guard parts.count == 2, let kind = BenchTokenKind(rawValue: parts[0]) else {
                let names = BenchTokenKind.allCases.map(\.rawValue).joined(separator: ", ")
                throw BenchError("invalid_mix", "--mix: '\(item)' is not KIND=WEIGHT with KIND one of \(names)")
            }
            guard let weight = Int(parts[1]), (0...1_000_000).contains(weight) else {
                throw BenchError("invalid_mix", "--mix: the weight of \(kind.rawValue) must be 0 through 1000000")
            }
            guard weights[kind] == nil else {
                throw BenchError("invalid_mix", "--mix: \(kind.rawValue) is given twice")
            }
            weights[kind] = weight
        }
        let total = weights.values.reduce(0, +)
        guard total > 0 else { throw BenchError("invalid_mix", "--mix: at least one weight must be positive") }
        let positive = weights.filter { $0.value > 0 }
        self.weights = positive
        self.schedule = Self.makeSchedule(positive, total: total)
    }

    var kinds: [BenchTokenKind] { BenchTokenKind.allCases.filter { self.weights[$0] != nil } }

    var description: String {
        self.kinds.map { "\($0.rawValue)=\(self.weights[$0]!)" }.joined(separator: ",")
    }

    private static func makeSchedule(_ weights: [BenchTokenKind: Int], total: Int) -> [UInt8] {
        let kinds = BenchTokenKind.allCases.filter { weights[$0] != nil }
        var counts = kinds.map { weights[$0]! * Self.scheduleLength / total }
        // Largest remainder: hand the slots lost to rounding to the kinds that lost the most.
        let remainders = kinds.enumerated().map { ($0.offset, weights[$0.element]! * Self.scheduleLength % total) }
        var missing = Self.scheduleLength - counts.reduce(0, +)
        for (offset, _) in remainders.sorted(by: { $0.1 > $1.1 }) where missing > 0 {
            counts[offset] += 1
            missing -= 1
        }
        var schedule: [UInt8] = []
        schedule.reserveCapacity(Self.scheduleLength)
        for (offset, kind) in kinds.enumerated() {
            schedule.append(contentsOf: repeatElement(UInt8(kind.index), count: counts[offset]))
        }
        var random = SplitMix64(seed: 0x7061_7373_6761_7465)
        schedule.shuffle(using: &random)
        return schedule
    }
}

/// A small deterministic generator (SplitMix64) so schedules and offsets repeat from run to run.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        self.state = seed
    }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension String {
    var trimmingSpaces: String {
        String(self.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}

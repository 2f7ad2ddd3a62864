//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing
import TokengateTokens

@testable import TokengateStores

@Suite("Cutoff times and the forward-only merge")
struct CutoffTimeTests {
    @Test("RFC 3339 and UNIX seconds parse to UNIX seconds", arguments: [
        ("1714564800", Int64(1_714_564_800)),
        ("0", 0),
        ("2024-05-01T12:00:00Z", 1_714_564_800),
        ("2024-05-01t12:00:00z", 1_714_564_800),
        ("2024-05-01T14:00:00+02:00", 1_714_564_800),
        ("2024-05-01T07:30:00-04:30", 1_714_564_800),
        ("2024-05-01T12:00:00.000Z", 1_714_564_800),
        ("2024-05-01T12:00:00.25Z", 1_714_564_801),  // fractions round up: fail closed
        ("1970-01-01T00:00:00Z", 0),
        ("2000-02-29T00:00:00Z", 951_782_400),
    ])
    func parses(text: String, seconds: Int64) throws {
        #expect(try CutoffTime.parse(text) == seconds)
    }

    @Test("malformed times are refused", arguments: [
        "", "now", "-5", "2024-05-01", "2024-05-01T12:00:00", "2024-05-01 12:00:00Z", "2024-13-01T00:00:00Z",
        "2023-02-29T00:00:00Z", "2024-05-01T24:00:00Z", "2024-05-01T12:00:00+2:00", "2024-05-01T12:00:00.Z",
        "2024-05-01T12:00:00Zjunk", "99999999999999999999", String(repeating: "1", count: 100),
    ])
    func refuses(text: String) {
        #expect(throws: CutoffStoreError(code: .invalidTime, message: "")) { try CutoffTime.parse(text) }
    }

    @Test("a reload merged onto the enforced table never moves a cutoff back and keeps users it lacks")
    func mergeForward() {
        let enforced = CutoffTable(
            globalRevokedBefore: 100,
            users: ["a": .init(revokedBefore: 50, apiRevokedBefore: nil), "gone": .init(revokedBefore: 7)]
        )
        let loaded = CutoffTable(
            globalRevokedBefore: 90,
            users: ["a": .init(revokedBefore: 40, apiRevokedBefore: 60), "new": .init(apiRevokedBefore: 3)]
        )
        #expect(loaded.mergedForward(onto: enforced) == CutoffTable(
            globalRevokedBefore: 100,
            users: [
                "a": .init(revokedBefore: 50, apiRevokedBefore: 60),
                "gone": .init(revokedBefore: 7),
                "new": .init(apiRevokedBefore: 3),
            ]
        ))
    }
}

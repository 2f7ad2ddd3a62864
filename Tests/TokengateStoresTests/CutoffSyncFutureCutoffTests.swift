//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import Testing
import TokengateTestSupport
import TokengateTokens

@testable import TokengateStores

/// A cutoff a store holds further ahead than a write may set (300 s): enforced as loaded (fail closed), logged,
/// and counted. Before, a JSON file written in milliseconds, or an RP table filled by a database whose clock is
/// ahead, locked the user out until a restart without a word anywhere.
@Suite("Cutoff sync service: cutoffs far in the future")
struct CutoffSyncFutureCutoffTests {
    static let now: Int64 = 1_714_564_800

    @Test("a loaded cutoff more than 300 s ahead is enforced, logged once naming the user, and counted until time catches up")
    func futureCutoffsAreEnforcedLoggedAndCounted() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.json")
        // alice in milliseconds; bob 100 s ahead, within the skew a write may use too.
        try writeFile(path, #"{"users": {"alice": {"revoked_before": \#(Self.now)000}, "bob": {"revoked_before": \#(Self.now + 100)}}}"#)
        let clock = ManualClock(Self.now)
        let lines = RecordedLogLines()
        let service = CutoffSyncService(
            store: JSONFileCutoffStore(path: path), logger: lines.logger(), now: clock.function, publish: { _ in })
        try await service.start()

        #expect(await service.snapshot.users[CutoffUserKey("alice")]?.revokedBefore == Self.now * 1000, "enforced as loaded")
        #expect(await service.futureCutoffCount(now: clock.now) == 1)
        func warnings() -> [RecordedLogLines.Line] {
            lines.all.filter { $0.level == .warning && $0.message.contains("in the future") }
        }
        #expect(warnings().count == 1, "\(lines.all)")
        let first = try #require(warnings().first)
        #expect(first.metadata["users"]?.contains("alice") == true && first.metadata["users"]?.contains("bob") == false, "\(first)")
        #expect(first.metadata["count"] == "1" && first.metadata["max_future_skew_s"] == "300", "\(first)")
        #expect(first.metadata["furthest_ahead_s"] == "\(Self.now * 1000 - Self.now)", "\(first)")
        #expect(await service.lastError == nil, "not a store failure")

        // Reloads that find the same ones again say nothing new within a minute.
        for _ in 0..<3 {
            clock.advance(by: 10)
            await service.resync()
        }
        #expect(warnings().count == 1)

        // A new one is told at once, with the global cutoff.
        try writeFile(path, #"{"global_revoked_before": \#(Self.now + 3600), "users": {"alice": {"revoked_before": \#(Self.now)000}}}"#)
        await service.resync()
        #expect(warnings().count == 2)
        #expect(warnings().last?.metadata["global"] == "true", "\(warnings())")
        #expect(await service.futureCutoffCount(now: clock.now) == 2)
        // Still there a minute later: told again at a reload.
        clock.advance(by: 61)
        await service.resync()
        #expect(warnings().count == 3)

        // The global one, an hour ahead, stops counting once it is within 300 s; enforcement does not change.
        #expect(await service.futureCutoffCount(now: Self.now + 3600) == 1)
        #expect(await service.snapshot.globalRevokedBefore == Self.now + 3600)
    }

    @Test("cutoffs within the skew, or in the past, are neither logged nor counted")
    func ordinaryCutoffsAreNotReported() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.json")
        try writeFile(path, #"{"global_revoked_before": \#(Self.now + 300), "users": {"alice": {"api_revoked_before": \#(Self.now - 5)}}}"#)
        let lines = RecordedLogLines()
        let service = CutoffSyncService(
            store: JSONFileCutoffStore(path: path), logger: lines.logger(), now: { Self.now }, publish: { _ in })
        try await service.start()
        #expect(await service.futureCutoffCount(now: Self.now) == 0)
        #expect(lines.all.isEmpty, "\(lines.all)")
    }
}

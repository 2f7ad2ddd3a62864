//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing
import TokengateTestSupport

@testable import TokengateStores

/// A store that stays down fails every poll: the log gets the first failure, then a line at most once a
/// minute with the count, and one when it recovers, not a line a second.
@Suite struct CutoffSyncOutageLogTests {
    @Test func anOutageIsLoggedWhenItBeginsOncePerMinuteAndWhenItEnds() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("c.json")
        try writeFile(path, "{}")
        let clock = ManualClock(1_714_564_800)
        let lines = RecordedLogLines()
        let service = CutoffSyncService(
            store: JSONFileCutoffStore(path: path),
            configuration: .init(pollInterval: .seconds(1), fullReloadInterval: .seconds(1)),
            logger: lines.logger(),
            now: clock.function,
            publish: { _ in }
        )
        try await service.start()
        try writeFile(path, "{ not json")
        for _ in 0..<130 {  // 130 polls a second apart
            clock.advance(by: 1)
            await service.poll()
        }
        try writeFile(path, "{}")
        clock.advance(by: 1)
        await service.poll()
        let logged = lines.all.filter { $0.message.hasPrefix("cutoff store") }
        #expect(logged.map(\.message) == [
            "cutoff store poll failed; keeping the last snapshot",
            "cutoff store poll still failing; keeping the last snapshot",
            "cutoff store poll still failing; keeping the last snapshot",
            "cutoff store recovered",
        ], "\(logged)")
        #expect(logged.map { $0.metadata["failures"] } == [nil, "60", "60", "130"], "\(logged)")
        #expect(logged.first?.level == .warning && logged.last?.level == .notice)
    }
}

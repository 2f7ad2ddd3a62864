//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import Testing
import TokengateTestSupport
import TokengateTokens

@testable import TokengateStores

/// A SQLite store whose file is overwritten in place (same inode) while the gateway runs: the sync service must
/// notice, say so once, let the snapshot go stale (so `/readyz` turns 503 and the lag grows), keep enforcing the
/// last snapshot, and recover when the file is good again.
///
/// Before, the connection kept answering from its page cache (WAL mode trusts it while the WAL index says no commit
/// happened): every poll succeeded, `/readyz` stayed ready, and the damage showed only at the next restart.
@Suite struct SQLiteCorruptionSyncTests {
    enum Damage: String, CaseIterable, Sendable {
        /// Every byte, the SQLite header included: "file is not a database" at the reopen.
        case wholeFile
        /// Every page after the first, the header and the schema page intact: "database disk image is malformed"
        /// once the tables are read.
        case pagesAfterTheFirst
    }

    @Test(arguments: Damage.allCases)
    func aDatabaseFileOverwrittenInPlaceFailsTheSyncUntilItIsGoodAgain(_ damage: Damage) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        // Written and closed first, so the rows are in the database file itself (the last close checkpoints the
        // WAL), with enough users for several pages.
        let writer = try await SQLiteCutoffStore.open(path: path)
        for index in 0..<300 {
            try await writer.passwordChanged(user: "user-\(index)-" + String(repeating: "x", count: 40), at: 1_000)
        }
        try await writer.passwordChanged(user: "alice", at: 2_000)
        try await writer.close()
        let good = try Data(contentsOf: URL(fileURLWithPath: path))
        try #require(good.count >= 4 * 4096, "\(good.count) bytes")

        let clock = ManualClock(1_714_564_800)
        let lines = RecordedLogLines()
        let store = try await SQLiteCutoffStore.open(path: path, createIfMissing: false)
        let service = CutoffSyncService(
            store: store,
            configuration: .init(pollInterval: .seconds(1), staleAfter: .seconds(30)),
            logger: lines.logger(),
            now: clock.function,
            publish: { _ in }
        )
        try await service.start()
        let generation = await service.snapshot.generation
        #expect(await service.snapshot.users[CutoffUserKey("alice")]?.revokedBefore == 2_000)
        let syncedAt = await service.lastSyncAt

        var garbage = [UInt8](repeating: 0, count: good.count)
        for index in garbage.indices { garbage[index] = UInt8.random(in: 0...255) }
        let offset = damage == .wholeFile ? 0 : 4096
        try Self.overwrite(path, at: offset, with: Array(garbage[offset...]))
        for _ in 0..<40 {
            clock.advance(by: 1)
            await service.poll()
        }
        let error = await service.lastError
        #expect(error?.code == .invalidStoreFile, "the damage must be seen, as damage: \(String(describing: error))")
        #expect(error?.message.contains(path) == true, "\(String(describing: error))")
        #expect(await service.lastSyncAt == syncedAt, "a poll on a damaged file is not a sync")
        #expect(await service.isStale(now: clock.now), "40 s without a sync is stale (stale_after 30 s): /readyz says 503")
        #expect(await service.snapshot.generation == generation, "the last snapshot stays in force")
        #expect(await service.snapshot.users[CutoffUserKey("alice")]?.revokedBefore == 2_000)
        let failures = lines.all.filter { $0.message.hasPrefix("cutoff store") }
        #expect(failures.count == 1, "logged once, not once a poll: \(failures)")
        #expect(failures.first?.level == .warning)
        #expect(failures.first?.metadata["error"]?.contains(path) == true, "the line names the file: \(failures)")

        try Self.overwrite(path, at: 0, with: Array(good))
        clock.advance(by: 1)
        await service.poll()
        #expect(await service.lastError == nil)
        #expect(await service.lastSyncAt == clock.now)
        #expect(!(await service.isStale(now: clock.now)))
        #expect(await service.snapshot.users[CutoffUserKey("alice")]?.revokedBefore == 2_000)
        #expect(lines.all.last?.message == "cutoff store recovered", "\(lines.all.suffix(2))")
        try await store.close()
    }

    /// Writes `bytes` into the file at `offset`, in place: the same inode, as `dd conv=notrunc` or a restore with
    /// `cp` over the file would.
    private static func overwrite(_ path: String, at offset: Int, with bytes: [UInt8]) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: bytes)
        try handle.synchronize()
    }
}

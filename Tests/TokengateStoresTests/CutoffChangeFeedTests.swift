//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateStores

/// The change feed against a real SQLite file written by another process (Python's `sqlite3`, as `tokengate revoke`
/// or an operator's own SQL would): what the sync service reads incrementally, and when it must reload everything.
@Suite("Cutoff change feed (SQLite)")
struct CutoffChangeFeedTests {
    /// A service that only syncs when told to (no run loop), with a full reload due only after an hour.
    static func service(
        _ store: FeedCountingStore,
        _ published: PublishedSnapshots,
        feedBatch: Int = 10_000,
        maxFeedBatches: Int = 20
    ) -> CutoffSyncService {
        CutoffSyncService(
            store: store,
            configuration: .init(fullReloadInterval: .seconds(3600), feedBatch: feedBatch, maxFeedBatches: maxFeedBatches),
            publish: published.publish
        )
    }

    @Test("another process's write is merged from the feed, without a full reload")
    func incrementalPicksUpAnotherProcess() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = FeedCountingStore(try await SQLiteCutoffStore.open(path: path))
        let published = PublishedSnapshots()
        let service = Self.service(store, published)
        try await service.start()
        #expect(await store.loads == 1)
        let first = try #require(published.latest)

        try pythonSQLite(path, "INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES ('zed', 500, 0)")
        await service.poll()
        #expect(published.latest?.users["zed"] == UserCutoffs(revokedBefore: 500))
        try pythonSQLite(path, "UPDATE user_cutoffs SET api_revoked_before = 700 WHERE user_id = 'zed'")
        try pythonSQLite(path, "UPDATE global_cutoff SET revoked_before = 100 WHERE id = 1")
        await service.poll()
        #expect(published.latest?.users["zed"] == UserCutoffs(revokedBefore: 500, apiRevokedBefore: 700))
        #expect(published.latest?.globalRevokedBefore == 100)
        #expect(await store.loads == 1, "followed the feed, never reloaded")
        #expect(await store.feedReads >= 2)
        // The first snapshot is a version of its own: requests holding it still see the table as it was.
        #expect(first.users["zed"] == nil && first.globalRevokedBefore == nil)

        // A poll with nothing new publishes nothing.
        let generation = published.latest?.generation
        await service.poll()
        #expect(published.latest?.generation == generation)
        try await store.close()
    }

    @Test("our own write, read back from the feed, publishes no second snapshot")
    func ownWritesNotRepublished() async throws {
        let directory = try TemporaryDirectory()
        let store = FeedCountingStore(try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db")))
        let published = PublishedSnapshots()
        let service = Self.service(store, published)
        try await service.start()
        let receipt = try await service.passwordChanged(user: "alice", at: 1_000)
        await service.poll()
        #expect(published.latest?.generation == receipt.generation)
        #expect(published.latest?.users["alice"]?.revokedBefore == 1_000)
        #expect(await store.loads == 1)
        try await store.close()
    }

    @Test("a deleted row (the force epoch moves) falls back to a full reload, taken as it is")
    func deletionReloadsWhole() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = FeedCountingStore(try await SQLiteCutoffStore.open(path: path))
        try await store.passwordChanged(user: "alice", at: 1_000)
        try await store.passwordChanged(user: "bob", at: 2_000)
        let published = PublishedSnapshots()
        let service = Self.service(store, published)
        try await service.start()
        try pythonSQLite(path, "DELETE FROM user_cutoffs WHERE user_id = 'alice'")
        await service.poll()
        #expect(published.latest?.users["alice"] == nil, "an operator's DELETE is taken at once")
        #expect(published.latest?.users["bob"]?.revokedBefore == 2_000)
        #expect(await store.loads >= 2)
        try await store.close()
    }

    @Test("a renumbered feed (another store id, a sequence gone back) falls back to a full reload that keeps every cutoff")
    func renumberedFeedReloads() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = FeedCountingStore(try await SQLiteCutoffStore.open(path: path))
        try await store.passwordChanged(user: "alice", at: 1_000)
        let published = PublishedSnapshots()
        let service = Self.service(store, published)
        try await service.start()

        // Another store's id: whatever its numbers say, they are not this feed's.
        try pythonSQLite(path, "UPDATE global_cutoff SET store_id = 'another' WHERE id = 1")
        await service.poll()
        #expect(await store.loads == 2)

        // The counter gone back below the position (a backup copied over the store, then written to): the new row's
        // number is one the feed has passed, so reading after the position would miss it; everything is read.
        try pythonSQLite(path, "INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES ('bob', 9, 0)")
        await service.poll()
        #expect(published.latest?.users["bob"]?.revokedBefore == 9)
        let loadsBefore = await store.loads
        try pythonSQLite(path, "UPDATE global_cutoff SET change_seq = 0 WHERE id = 1")
        try pythonSQLite(path, "UPDATE user_cutoffs SET change_seq = 0")
        try pythonSQLite(path, "INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES ('carol', 7, 0)")
        await service.poll()
        #expect(await store.loads == loadsBefore + 1)
        #expect(published.latest?.users["carol"]?.revokedBefore == 7, "a row numbered behind the position is found")
        #expect(published.latest?.users["alice"]?.revokedBefore == 1_000)

        // And the feed goes on from the new numbering.
        try pythonSQLite(path, "INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES ('dave', 3, 0)")
        await service.poll()
        #expect(published.latest?.users["dave"]?.revokedBefore == 3)
        #expect(await store.loads == loadsBefore + 1)
        try await store.close()
    }

    @Test("more changes than the feed reads at once fall back to a full reload; fewer are read in batches")
    func bulkChanges() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let rows = (0..<10).map { "('bulk\($0)', \(100 + $0), 0)" }.joined(separator: ",")

        let batched = FeedCountingStore(try await SQLiteCutoffStore.open(path: path))
        let published = PublishedSnapshots()
        let service = Self.service(batched, published, feedBatch: 3, maxFeedBatches: 5)
        try await service.start()
        try pythonSQLite(path, "INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES \(rows)")
        await service.poll()
        #expect(published.latest?.users.count == 10)
        #expect(published.latest?.users["bulk9"]?.revokedBefore == 109)
        #expect(await batched.loads == 1)
        #expect(await batched.feedReads == 4, "3 + 3 + 3 + 1 rows")
        try await batched.close()

        let other = directory.file("other.db")
        let bulk = FeedCountingStore(try await SQLiteCutoffStore.open(path: other))
        let published2 = PublishedSnapshots()
        let service2 = Self.service(bulk, published2, feedBatch: 2, maxFeedBatches: 2)
        try await service2.start()
        try pythonSQLite(other, "INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES \(rows)")
        await service2.poll()
        #expect(published2.latest?.users.count == 10)
        #expect(await bulk.loads == 2, "gave up after two batches and reloaded")
        try await bulk.close()
    }

    @Test("a version 1 store is upgraded on open: rows kept, a version 1 writer's rows numbered, a revoke CLI path too")
    func migratesVersion1() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        // The schema exactly as tokengate's version 1 created it, with a row in it.
        try runProcess("/usr/bin/env", [
            "python3", "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.close()",
            path, Self.version1Schema,
        ])
        try pythonSQLite(path, "INSERT INTO user_cutoffs (user_id, revoked_before, api_revoked_before, updated_at) VALUES ('old', 42, 43, 0)")

        let store = FeedCountingStore(try await SQLiteCutoffStore.open(path: path, createIfMissing: false))
        // Through version 2 (the feed) to the current one (devices) in one open.
        #expect(try pythonSQLite(path, "SELECT version FROM schema_version") == "3")
        let columns = try pythonSQLite(path, "SELECT name FROM pragma_table_info('user_cutoffs') ORDER BY cid")
        #expect(columns.split(separator: "\n").last == "change_seq")
        #expect(try pythonSQLite(path, "SELECT length(store_id) FROM global_cutoff") == "32")
        let published = PublishedSnapshots()
        let service = Self.service(store, published)
        try await service.start()
        #expect(published.latest?.users["old"] == UserCutoffs(revokedBefore: 42, apiRevokedBefore: 43))

        // A writer that knows nothing of the column (tokengate 1's upsert, word for word) is numbered by the triggers.
        try pythonSQLite(path, """
            INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES ('new', 50, 0)
            ON CONFLICT (user_id) DO UPDATE SET revoked_before = excluded.revoked_before, updated_at = excluded.updated_at
            WHERE user_cutoffs.revoked_before IS NULL OR user_cutoffs.revoked_before < excluded.revoked_before
            """)
        try pythonSQLite(path, """
            INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES ('old', 60, 0)
            ON CONFLICT (user_id) DO UPDATE SET revoked_before = excluded.revoked_before, updated_at = excluded.updated_at
            WHERE user_cutoffs.revoked_before IS NULL OR user_cutoffs.revoked_before < excluded.revoked_before
            """)
        await service.poll()
        #expect(published.latest?.users["new"]?.revokedBefore == 50)
        #expect(published.latest?.users["old"] == UserCutoffs(revokedBefore: 60, apiRevokedBefore: 43))
        #expect(await store.loads == 1)
        #expect(try pythonSQLite(path, "SELECT count(*) FROM user_cutoffs WHERE change_seq = 0") == "0")

        // A second process opening the upgraded store changes nothing more (the upgrade is not run twice).
        let second = try await SQLiteCutoffStore.open(path: path, createIfMissing: false)
        try await second.passwordChanged(user: "cli", at: 70)
        try await second.close()
        await service.poll()
        #expect(published.latest?.users["cli"]?.revokedBefore == 70)
        #expect(await store.loads == 1)
        try await store.close()
    }

    /// tokengate 1's `createSchema`, for the upgrade test.
    static let version1Schema = """
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        CREATE TABLE user_cutoffs (user_id TEXT PRIMARY KEY NOT NULL, revoked_before INTEGER,
            api_revoked_before INTEGER, updated_at INTEGER NOT NULL);
        CREATE TABLE global_cutoff (id INTEGER PRIMARY KEY CHECK (id = 1), revoked_before INTEGER,
            force_epoch INTEGER NOT NULL DEFAULT 0, updated_at INTEGER NOT NULL);
        CREATE TRIGGER user_cutoffs_moved_backward AFTER UPDATE OF user_id, revoked_before, api_revoked_before
            ON user_cutoffs WHEN NEW.user_id IS NOT OLD.user_id
              OR (OLD.revoked_before IS NOT NULL AND (NEW.revoked_before IS NULL OR NEW.revoked_before < OLD.revoked_before))
              OR (OLD.api_revoked_before IS NOT NULL
                  AND (NEW.api_revoked_before IS NULL OR NEW.api_revoked_before < OLD.api_revoked_before))
            BEGIN UPDATE global_cutoff SET force_epoch = force_epoch + 1 WHERE id = 1; END;
        CREATE TRIGGER user_cutoffs_deleted AFTER DELETE ON user_cutoffs
            BEGIN UPDATE global_cutoff SET force_epoch = force_epoch + 1 WHERE id = 1; END;
        CREATE TRIGGER global_cutoff_moved_backward AFTER UPDATE OF revoked_before ON global_cutoff
            WHEN OLD.revoked_before IS NOT NULL AND (NEW.revoked_before IS NULL OR NEW.revoked_before < OLD.revoked_before)
            BEGIN UPDATE global_cutoff SET force_epoch = force_epoch + 1 WHERE id = 1; END;
        INSERT INTO global_cutoff (id, revoked_before, force_epoch, updated_at) VALUES (1, NULL, 0, 0);
        INSERT INTO schema_version (version) VALUES (1);
        PRAGMA journal_mode = WAL;
        """
}

/// Counts the full loads and the feed reads of the store it wraps.
actor FeedCountingStore: CutoffStore {
    private let base: any CutoffStore
    private(set) var loads = 0
    private(set) var feedReads = 0

    init(_ base: any CutoffStore) {
        self.base = base
    }

    nonisolated var storeDescription: String { self.base.storeDescription }
    nonisolated var changeSignals: AsyncStream<CutoffChangeSignal>? { self.base.changeSignals }

    func load() async throws -> CutoffTable {
        try await self.load(onto: nil)
    }

    func load(onto base: CutoffTable?) async throws -> CutoffTable {
        self.loads += 1
        return try await self.base.load(onto: base)
    }

    func changes(since position: CutoffFeedPosition, limit: Int) async throws -> CutoffChanges? {
        self.feedReads += 1
        return try await self.base.changes(since: position, limit: limit)
    }

    func changeMarker() async throws -> String? { try await self.base.changeMarker() }
    func lookup(user: String) async throws -> CutoffLookup { try await self.base.lookup(user: user) }
    func apply(_ write: CutoffWrite) async throws -> CutoffWriteResult { try await self.base.apply(write) }
    func close() async throws { try await self.base.close() }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateStores

@Suite("Cutoff sync service")
struct CutoffSyncServiceTests {
    static let start: Int64 = 1_714_564_800

    static func makeService(
        _ store: any CutoffStore,
        clock: ManualClock,
        published: PublishedSnapshots
    ) -> CutoffSyncService {
        CutoffSyncService(
            store: store,
            configuration: .init(pollInterval: .milliseconds(20), fullReloadInterval: .seconds(3600), staleAfter: .seconds(30)),
            now: clock.function,
            publish: published.publish
        )
    }

    @Test("start loads and publishes; a store that cannot be read refuses to start")
    func startPublishes() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let seed = try await SQLiteCutoffStore.open(path: path)
        try await seed.passwordChanged(user: "alice", at: 100)
        let published = PublishedSnapshots()
        let clock = ManualClock(Self.start)
        let service = Self.makeService(seed, clock: clock, published: published)
        #expect(await service.isStale(now: clock.now))
        try await service.start()
        #expect(published.all.count == 1)
        #expect(published.latest?.users["alice"] == UserCutoffs(revokedBefore: 100))
        #expect(published.latest?.generation == 1)
        #expect(await service.lastSyncAt == Self.start)
        #expect(await !service.isStale(now: clock.now))
        try await seed.close()

        let broken = Self.makeService(JSONFileCutoffStore(path: directory.file("missing.json")), clock: clock, published: published)
        await expectStoreError(.storeUnavailable) { try await broken.start() }
        #expect(published.all.count == 1)
    }

    @Test("writes are published before they are acknowledged")
    func publishBeforeAck() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        let published = PublishedSnapshots()
        let clock = ManualClock(Self.start)
        let service = Self.makeService(store, clock: clock, published: published)
        try await service.start()

        let receipt = try await service.passwordChanged(user: "alice")
        // By the time the call returned, the snapshot the request path reads already has the cutoff.
        let latest = try #require(published.latest)
        #expect(latest.users["alice"]?.revokedBefore == Self.start)
        #expect(latest.generation == receipt.generation)
        #expect(receipt.enforced.user == UserCutoffs(revokedBefore: Self.start))
        #expect(try await store.cutoffs(for: "alice").user.revokedBefore == Self.start)

        clock.advance(by: 10)
        try await service.disableMobileApps(user: "alice")
        #expect(published.latest?.users["alice"] == UserCutoffs(revokedBefore: Self.start, apiRevokedBefore: Self.start + 10))
        try await service.revokeAll(at: Self.start - 50)
        #expect(published.latest?.globalRevokedBefore == Self.start - 50)
        #expect(published.all.map(\.generation) == [1, 2, 3, 4])
        try await store.close()
    }

    @Test("a backward write without force is refused and publishes nothing; force publishes the earlier time")
    func forwardOnlyThroughService() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        let published = PublishedSnapshots()
        let clock = ManualClock(Self.start)
        let service = Self.makeService(store, clock: clock, published: published)
        try await service.start()
        try await service.passwordChanged(user: "alice", at: 1_000)
        let count = published.all.count
        let error = await expectStoreError(.cutoffWouldMoveBackward) { try await service.passwordChanged(user: "alice", at: 900) }
        #expect(error?.keptCutoff == 1_000)
        #expect(published.all.count == count)
        #expect(await service.lastError == nil)

        try await service.passwordChanged(user: "alice", at: 900, force: true)
        #expect(published.latest?.users["alice"]?.revokedBefore == 900)
        // The next poll reloads (force epoch moved) and keeps the forced value rather than merging it away.
        await service.poll()
        #expect(published.latest?.users["alice"]?.revokedBefore == 900)
        try await store.close()
    }

    @Test("times too far in the future and bad ids are refused before the store is touched")
    func validation() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        let service = Self.makeService(store, clock: ManualClock(Self.start), published: PublishedSnapshots())
        try await service.start()
        await expectStoreError(.invalidTime) { try await service.passwordChanged(user: "alice", at: Self.start + 301) }
        try await service.passwordChanged(user: "alice", at: Self.start + 300)
        await expectStoreError(.invalidUserID) { try await service.passwordChanged(user: "") }
        await expectStoreError(.invalidUserID) { try await service.cutoffs(for: "a\nb") }
        try await store.close()
    }

    @Test("changes made by another process (the CLI, SQL) are picked up by the next poll")
    func externalChanges() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = try await SQLiteCutoffStore.open(path: path)
        let published = PublishedSnapshots()
        let service = Self.makeService(store, clock: ManualClock(Self.start), published: published)
        try await service.start()
        await service.poll()
        #expect(published.all.count == 1, "an unchanged store must not republish")

        // The CLI writes through its own connection.
        let cli = try await SQLiteCutoffStore.open(path: path)
        try await cli.disableMobileApps(user: "bob", at: 77)
        try await cli.close()
        await service.poll()
        #expect(published.latest?.users["bob"] == UserCutoffs(apiRevokedBefore: 77))

        // An operator forces a cutoff back in SQL: the force epoch moves, so the earlier value is taken.
        try pythonSQLite(path, "UPDATE user_cutoffs SET api_revoked_before = 10 WHERE user_id = 'bob'")
        await service.poll()
        #expect(published.latest?.users["bob"] == UserCutoffs(apiRevokedBefore: 10))
        try await store.close()
    }

    @Test("a reload never moves a cutoff back without a force (JSON file edited down)")
    func reloadMergesForward() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.json")
        try writeFile(path, #"{"global_revoked_before": 50, "users": {"alice": {"revoked_before": 100}}}"#)
        let published = PublishedSnapshots()
        let service = Self.makeService(JSONFileCutoffStore(path: path), clock: ManualClock(Self.start), published: published)
        try await service.start()

        try writeFile(path, #"{"global_revoked_before": 40, "users": {"alice": {"revoked_before": 90, "api_revoked_before": 5}}}"#)
        try await service.reload()
        #expect(published.latest?.users["alice"] == UserCutoffs(revokedBefore: 100, apiRevokedBefore: 5))
        #expect(published.latest?.globalRevokedBefore == 50)

        try writeFile(path, #"{"users": {}}"#)
        try await service.reload()
        #expect(published.latest?.users["alice"] == UserCutoffs(revokedBefore: 100, apiRevokedBefore: 5))
        await expectStoreError(.readOnlyStore) { try await service.passwordChanged(user: "alice") }
    }

    @Test("when the database becomes unreadable the last snapshot stays, the service turns stale, and it resyncs")
    func keepsLastSnapshotWhenStoreFails() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = try await SQLiteCutoffStore.open(path: path)
        let published = PublishedSnapshots()
        let clock = ManualClock(Self.start)
        let service = Self.makeService(store, clock: clock, published: published)
        try await service.start()
        try await service.passwordChanged(user: "alice", at: 1_000)
        let before = try #require(published.latest)

        try moveDatabase(from: path, to: directory.file("away.db"))
        try writeFile(path, String(repeating: "not a database ", count: 500))
        clock.advance(by: 10)
        await service.poll()
        #expect(published.latest === before, "nothing may be published while the store is down")
        // Garbage in the file's place is named as a damaged file (`serve` and `revoke` exit 69 on it, not 75).
        #expect(await service.lastError?.code == .invalidStoreFile)
        #expect(await service.lastSyncAt == Self.start)
        #expect(await !service.isStale(now: clock.now))
        clock.advance(by: 25)
        await service.poll()
        #expect(await service.isStale(now: clock.now))
        #expect(published.latest === before)
        await expectStoreError(.invalidStoreFile) { try await service.passwordChanged(user: "alice", at: 2_000) }
        await expectStoreError(.invalidStoreFile) { try await service.cutoffs(for: "alice") }
        #expect(published.latest === before)

        try FileManager.default.removeItem(atPath: path)
        try moveDatabase(from: directory.file("away.db"), to: path)
        await service.poll()
        #expect(await service.lastError == nil)
        #expect(await !service.isStale(now: clock.now))
        #expect(await service.lastSyncAt == clock.now)
        #expect(published.latest?.users["alice"]?.revokedBefore == 1_000)
        try await store.close()
    }

    @Test("run() polls until cancelled")
    func runLoop() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = try await SQLiteCutoffStore.open(path: path)
        let published = PublishedSnapshots()
        let service = Self.makeService(store, clock: ManualClock(Self.start), published: published)
        try await service.start()
        let loop = Task { await service.run() }
        try pythonSQLite(path, "INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES ('zed', 5, 0)")
        let deadline = ContinuousClock.now + .seconds(10)
        while published.latest?.users["zed"] == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(published.latest?.users["zed"] == UserCutoffs(revokedBefore: 5))
        loop.cancel()
        await loop.value
        try await store.close()
    }

    @Test("an unchanged store is reloaded in full once every fullReloadInterval (cutoffs.resync_interval)")
    func fullReloadAtTheConfiguredInterval() async throws {
        let directory = try TemporaryDirectory()
        let store = LoadCountingStore(try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db")))
        let clock = ManualClock(Self.start)
        let service = CutoffSyncService(
            store: store,
            configuration: .init(pollInterval: .seconds(1), fullReloadInterval: .seconds(60)),
            now: clock.function,
            publish: PublishedSnapshots().publish
        )
        try await service.start()
        #expect(await store.loads == 1)
        for _ in 0..<2 {
            clock.advance(by: 59)
            await service.poll()
            #expect(await store.loads == 1 + (clock.now - Self.start) / 60, "not due yet: the marker did not change")
            clock.advance(by: 1)
            await service.poll()
            #expect(await store.loads == 1 + (clock.now - Self.start) / 60, "due: reloaded although nothing changed")
        }
        #expect(await store.loads == 3)
        try await store.close()
    }
}

/// Counts the whole-store reads of the store it wraps.
actor LoadCountingStore: CutoffStore {
    private let base: any CutoffStore
    private(set) var loads = 0

    init(_ base: any CutoffStore) {
        self.base = base
    }

    nonisolated var storeDescription: String { self.base.storeDescription }

    func load() async throws -> CutoffTable {
        self.loads += 1
        return try await self.base.load()
    }

    func changeMarker() async throws -> String? { try await self.base.changeMarker() }
    func lookup(user: String) async throws -> CutoffLookup { try await self.base.lookup(user: user) }
    func apply(_ write: CutoffWrite) async throws -> CutoffWriteResult { try await self.base.apply(write) }
    func close() async throws { try await self.base.close() }
}

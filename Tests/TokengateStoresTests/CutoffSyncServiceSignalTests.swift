//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateStores

/// A store whose change marker never changes and whose change signals the test sends by hand: only a signal can
/// make the service reload it.
private struct SignallingStore: CutoffStore {
    let base: SQLiteCutoffStore
    let signals: AsyncStream<CutoffChangeSignal>
    let sink: AsyncStream<CutoffChangeSignal>.Continuation

    init(base: SQLiteCutoffStore) {
        self.base = base
        (self.signals, self.sink) = AsyncStream.makeStream(of: CutoffChangeSignal.self)
    }

    var storeDescription: String { "signalling \(self.base.storeDescription)" }
    var changeSignals: AsyncStream<CutoffChangeSignal>? { self.signals }
    func load() async throws -> CutoffTable { try await self.base.load() }
    func changeMarker() async throws -> String? { "never changes" }
    func lookup(user: String) async throws -> CutoffLookup { try await self.base.lookup(user: user) }
    func apply(_ write: CutoffWrite) async throws -> CutoffWriteResult { try await self.base.apply(write) }
    func close() async throws { try await self.base.close() }
}

@Suite("Cutoff sync service change signals")
struct CutoffSyncServiceSignalTests {
    @Test("run() reloads on a change signal without waiting for the poll, and stops when cancelled")
    func reloadsOnSignal() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = SignallingStore(base: try await SQLiteCutoffStore.open(path: path))
        let published = PublishedSnapshots()
        let service = CutoffSyncService(
            store: store,
            configuration: .init(pollInterval: .milliseconds(50), fullReloadInterval: .seconds(3600)),
            publish: published.publish
        )
        try await service.start()
        let loop = Task { await service.run() }

        try pythonSQLite(path, "INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES ('zed', 5, 0)")
        // Polls run (every 50 ms) but see the same marker, so they do not reload.
        try await Task.sleep(for: .milliseconds(300))
        #expect(published.latest?.users["zed"] == nil)

        store.sink.yield(CutoffChangeSignal(user: "zed"))
        let arrived = await eventually(timeout: .seconds(5)) { published.latest?.users["zed"] != nil }
        #expect(arrived)
        #expect(published.latest?.users["zed"] == UserCutoffs(revokedBefore: 5))

        loop.cancel()
        await loop.value
        try await store.close()
    }

    @Test("stores without signals keep the default nil")
    func defaultNoSignals() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        #expect(store.changeSignals == nil)
        #expect(JSONFileCutoffStore(path: directory.file("c.json")).changeSignals == nil)
        try await store.close()
    }
}

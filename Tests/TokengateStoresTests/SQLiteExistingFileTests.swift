//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import Testing
import TokengateTestSupport
import TokengateTokens

@testable import TokengateStores

/// Only a file that did not exist gets tokengate's schema. Before, every open ran `CREATE TABLE IF NOT EXISTS`:
/// a store truncated to nothing, an empty database renamed over it, or another application's database was quietly
/// given an empty schema ("recovered"), and after a restart every revoked token was accepted.
@Suite("SQLite store: an existing file is never given a schema")
struct SQLiteExistingFileTests {
    enum Foreign: String, CaseIterable, Sendable {
        /// A SQLite database without a single table (what SQLite makes of an empty file once it wrote a header).
        case noTables
        /// Another application's database.
        case otherApplication

        var sql: String {
            switch self {
            case .noTables: return "PRAGMA user_version = 7"
            case .otherApplication: return "CREATE TABLE orders (id INTEGER PRIMARY KEY); INSERT INTO orders VALUES (1)"
            }
        }
    }

    /// Creates the database `kind` describes at `path` with Python's sqlite3 (another program's file).
    static func createForeign(_ kind: Foreign, at path: String) throws {
        let script = """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1], isolation_level=None)
            c.executescript(sys.argv[2])
            c.close()
            """
        try runProcess("/usr/bin/env", ["python3", "-c", script, path, kind.sql])
    }

    @Test("an empty file is refused by serve's open, revoke's open and check-config's look, naming what to do; it stays empty")
    func anEmptyFileIsRefused() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        for create in [true, false] {
            let error = await expectStoreError(.invalidStoreFile) {
                try await SQLiteCutoffStore.open(path: path, createIfMissing: create)
            }
            let message = error?.message ?? ""
            #expect(message.contains(path) && message.contains("is empty (0 bytes)"), "\(message)")
            #expect(message.contains("restore it from a backup") && message.contains("remove it"), "\(message)")
        }
        #expect(throws: SQLiteDatabaseFileError.self) { try SQLiteDatabaseFile.check(path: path) }
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["cutoffs.db"], "nothing created")
    }

    @Test("a database without tables, or another application's, is refused and left as it was", arguments: Foreign.allCases)
    func aForeignDatabaseIsRefusedUnchanged(_ kind: Foreign) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        try Self.createForeign(kind, at: path)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        let opened = await expectStoreError(.invalidStoreFile) { try await SQLiteCutoffStore.open(path: path) }
        let message = opened?.message ?? ""
        #expect(message.contains(path) && message.contains("not a tokengate cutoff store"), "\(message)")
        #expect(message.contains(kind == .noTables ? "without tables" : "1 table, none of them tokengate's"), "\(message)")
        #expect(!message.contains("orders"), "another application's table names are not repeated: \(message)")
        let checked = await expectStoreError(.invalidStoreFile) {
            try await SQLiteCutoffStore.checkExistingFile(path: path, logger: Logger(label: "test"))
        }
        #expect(checked?.message == opened?.message, "check-config says what serve says")

        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "no table added, not turned to WAL mode")
        #expect(try pythonSQLite(path, "SELECT count(*) FROM sqlite_master") == (kind == .noTables ? "0" : "1"))
        #expect(try pythonSQLite(path, "PRAGMA journal_mode") == "delete")
    }

    @Test("a store that lost one of its tables is refused as damaged; nothing is recreated")
    func aStoreMissingATableIsDamaged() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        try await SQLiteCutoffStore.open(path: path).close()
        try pythonSQLite(path, "DROP TABLE user_cutoffs")
        let error = await expectStoreError(.invalidStoreFile) { try await SQLiteCutoffStore.open(path: path) }
        #expect(error?.message.contains("table user_cutoffs is missing: the store is damaged") == true, "\(String(describing: error))")
        await expectStoreError(.invalidStoreFile) {
            try await SQLiteCutoffStore.checkExistingFile(path: path, logger: Logger(label: "test"))
        }
        #expect(try pythonSQLite(path, "SELECT count(*) FROM sqlite_master WHERE name = 'user_cutoffs'") == "0")
    }

    @Test("a new store is built whole and linked into place: only it is left in its directory, and check-config passes it")
    func aNewStoreIsCreatedWhole() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = try await SQLiteCutoffStore.open(path: path)
        try await store.passwordChanged(user: "alice", at: 1_000)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == [
            "cutoffs.db", "cutoffs.db-shm", "cutoffs.db-wal",
        ])
        try await SQLiteCutoffStore.checkExistingFile(path: path, logger: Logger(label: "test"))
        try await store.close()
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["cutoffs.db"])
        // Closed, nothing in a -wal: check-config reads it without creating one.
        try await SQLiteCutoffStore.checkExistingFile(path: path, logger: Logger(label: "test"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["cutoffs.db"])
        #expect(try pythonSQLite(path, "SELECT revoked_before FROM user_cutoffs") == "1000")
    }

    enum Loss: String, CaseIterable, Sendable {
        /// `: > cutoffs.db` while the gateway runs.
        case truncatedInPlace
        /// An empty SQLite database renamed over the store.
        case emptyDatabaseRenamedOver
    }

    /// The reviewer's `sqlite_truncate.sh`, without the process: the store lost its content while the gateway runs.
    @Test("a store that loses its content while running fails the sync and keeps the snapshot; nothing recreates it", arguments: Loss.allCases)
    func aStoreThatLosesItsContentWhileRunning(_ loss: Loss) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let lines = RecordedLogLines()
        let clock = ManualClock(1_714_564_800)
        let store = try await SQLiteCutoffStore.open(path: path, logger: lines.logger())
        let service = CutoffSyncService(store: store, logger: lines.logger(), now: clock.function, publish: { _ in })
        try await service.start()
        try await service.passwordChanged(user: "alice", at: clock.now)
        // As the reviewer did: everything into the file first, so the truncation loses it all.
        try pythonSQLite(path, "PRAGMA wal_checkpoint(TRUNCATE)")
        await service.poll()
        let generation = await service.snapshot.generation
        let syncedAt = await service.lastSyncAt

        switch loss {
        case .truncatedInPlace:
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
            try handle.truncate(atOffset: 0)
            try handle.close()
        case .emptyDatabaseRenamedOver:
            try Self.createForeign(.noTables, at: directory.file("empty.db"))
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.moveItem(atPath: directory.file("empty.db"), toPath: path)
        }
        for _ in 0..<40 {
            clock.advance(by: 1)
            await service.poll()
        }
        let error = await service.lastError
        #expect(error?.code == .invalidStoreFile, "\(String(describing: error))")
        #expect(error?.message.contains(path) == true && error?.message.contains("not a tokengate cutoff store") == true,
            "\(String(describing: error))")
        #expect(await service.lastSyncAt == syncedAt, "no poll succeeds")
        #expect(await service.isStale(now: clock.now), "/readyz turns 503 after 30 s")
        #expect(await service.snapshot.generation == generation)
        #expect(await service.snapshot.users[CutoffUserKey("alice")]?.revokedBefore == 1_714_564_800)

        let warnings = lines.all.filter { $0.level == .warning }
        #expect(warnings.count(where: { $0.message.hasPrefix("cutoff store poll failed") }) == 1, "\(warnings)")
        if loss == .truncatedInPlace {
            let rewritten = warnings.filter { $0.message.contains("written over in place") }
            #expect(rewritten.count == 1, "\(warnings)")
            #expect(rewritten.first?.metadata["change"]?.contains("shrank") == true, "\(rewritten)")
            #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == 0, "not recreated")
        } else {
            #expect(try pythonSQLite(path, "SELECT count(*) FROM sqlite_master") == "0", "no tables added")
        }
        try await store.close()
    }

    @Test("an in-place change SQLite's checkpoints cannot make is told apart from one that looks like a checkpoint")
    func inPlaceChangesAreClassified() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let page = [UInt8](repeating: 0, count: 4096)
        try Data(SQLiteDatabaseFile.header + page[16...] + page).write(to: URL(fileURLWithPath: path))
        let wal = SQLiteWALFiles(databasePath: path)
        let recorded = try #require(FileChangeStamp(path: path))
        func classify() -> SQLiteFileChange {
            SQLiteFileChange.between(
                recorded: recorded, recordedWAL: wal, pageSize: 4096, current: FileChangeStamp(path: path),
                currentWAL: wal.now())
        }
        #expect(classify() == .none)

        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: page)  // One more page, as a checkpoint appends.
        #expect(classify() == .written)
        try handle.write(contentsOf: page[..<100])
        guard case .rewritten(let partial) = classify() else { Issue.record("\(classify())"); return }
        #expect(partial.contains("not a whole number of 4096-byte pages"))
        try handle.truncate(atOffset: 4096)
        guard case .rewritten(let shrank) = classify() else { Issue.record("\(classify())"); return }
        #expect(shrank.contains("shrank from 8192 to 4096 bytes"))

        // A -wal that appears is a new file another connection made; one that goes is not.
        try Data().write(to: URL(fileURLWithPath: path + "-wal"))
        #expect(classify() == .walFilesChanged("a -wal file appeared", newFiles: true))
        try FileManager.default.removeItem(atPath: path)
        #expect(classify() == .replaced)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import Testing
import TokengateTestSupport
import TokengateTokens

@testable import TokengateStores

/// The store watches the `-wal` and `-shm` files its connection has open. Before, only the database file was
/// watched: with the two removed (a cleanup job, a restore that copies only the database file), a later `tokengate
/// revoke` went into new files the gateway never read, and the gateway's own acknowledged writes went into the
/// unlinked ones and were gone after a crash.
@Suite("SQLite store: its -wal and -shm files")
struct SQLiteWALFilesTests {
    /// The part of the store's change marker that counts (re)opened connections.
    static func openCount(_ store: SQLiteCutoffStore) async throws -> String {
        String(try #require(try await store.changeMarker()).split(separator: ":")[0])
    }

    static func removeWALFiles(_ path: String) throws {
        try FileManager.default.removeItem(atPath: path + "-wal")
        try FileManager.default.removeItem(atPath: path + "-shm")
    }

    @Test("other connections opening, writing and closing the database (another process, a revoke-style store) reopen nothing")
    func othersOpeningAndClosingChangeNothing() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let lines = RecordedLogLines()
        let store = try await SQLiteCutoffStore.open(path: path, logger: lines.logger())
        try await store.passwordChanged(user: "alice", at: 1_000)
        let opened = try await Self.openCount(store)
        let files = SQLiteWALFiles(databasePath: path)
        #expect(files.wal != nil && files.shm != nil)

        for round in 1...3 {
            // Another process, as `tokengate revoke` or an operator's sqlite3 is: opens, commits, closes.
            try pythonSQLite(path, "INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES ('bob-\(round)', 2000, 0)")
            // This process, as a second store (`tokengate revoke`'s kind of open).
            let oneShot = try await SQLiteCutoffStore.open(path: path, createIfMissing: false)
            try await oneShot.passwordChanged(user: "carol-\(round)", at: 3_000)
            try await oneShot.close()
            let table = try await store.load()
            #expect(table.users[CutoffUserKey("bob-\(round)")]?.revokedBefore == 2_000)
            #expect(table.users[CutoffUserKey("carol-\(round)")]?.revokedBefore == 3_000)
        }
        #expect(try await Self.openCount(store) == opened, "no reopen")
        #expect(files.change(to: files.now()) == nil, "the -wal and -shm files are the same ones")
        #expect(lines.all.allSatisfy { $0.level < .warning }, "\(lines.all)")
        try await store.close()
    }

    /// The reviewer's `sqlite_walrm_cli.sh` and `sqlite_walrm.sh`, without the processes.
    @Test("-wal and -shm removed: the store reopens, says so once, sees the next revoke, and its next write reaches a fresh reader")
    func removedWALFilesAreNoticed() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let lines = RecordedLogLines()
        let store = try await SQLiteCutoffStore.open(path: path, logger: lines.logger())
        try await store.passwordChanged(user: "alice", at: 1_000)
        // alice into the database file, so removing the -wal loses nothing this test looks for.
        try pythonSQLite(path, "PRAGMA wal_checkpoint(TRUNCATE)")
        _ = try await store.load()
        let opened = try await Self.openCount(store)

        try Self.removeWALFiles(path)
        // `tokengate revoke --user bob` from another process: it creates new -wal and -shm files and commits there.
        try pythonSQLite(path, "INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES ('bob', 2000, 0)")
        let table = try await store.load()
        #expect(table.users[CutoffUserKey("bob")]?.revokedBefore == 2_000, "the revoke is seen")
        #expect(table.users[CutoffUserKey("alice")]?.revokedBefore == 1_000)
        #expect(try await Self.openCount(store) != opened, "the connection was reopened")

        try await store.passwordChanged(user: "carol", at: 3_000)
        #expect(try pythonSQLite(path, "SELECT revoked_before FROM user_cutoffs WHERE user_id = 'carol'") == "3000",
            "an acknowledged write is in the files every reader opens")

        let warnings = lines.all.filter { $0.level >= .warning }
        #expect(warnings.count == 1, "\(warnings)")
        #expect(warnings.first?.message.contains("-wal or -shm file was removed or replaced") == true, "\(warnings)")
        #expect(warnings.first?.metadata["change"] == "the -wal file was replaced and the -shm file was replaced", "\(warnings)")
        #expect(warnings.first?.metadata["old_wal_commits"] == "dropped", "\(warnings)")
        #expect(warnings.first?.metadata["path"] == path)

        try await store.close()
        // The stale connection's close deleted nothing of the new files: every row is still there.
        #expect(try pythonSQLite(path, "SELECT user_id FROM user_cutoffs ORDER BY user_id") == "alice\nbob\ncarol")
    }

    @Test("-wal and -shm removed and not made again: the store's commits in the old -wal go into the file")
    func removedWALFilesLoseNothingWhileNobodyElseOpened() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let lines = RecordedLogLines()
        let store = try await SQLiteCutoffStore.open(path: path, logger: lines.logger())
        try await store.passwordChanged(user: "alice", at: 1_000)  // In the -wal only.
        try Self.removeWALFiles(path)

        #expect(try await store.load().users[CutoffUserKey("alice")]?.revokedBefore == 1_000)
        #expect(try pythonSQLite(path, "SELECT revoked_before FROM user_cutoffs WHERE user_id = 'alice'") == "1000",
            "the old connection's close checkpointed its -wal into the file a fresh reader opens")
        try await store.passwordChanged(user: "bob", at: 2_000)
        #expect(try pythonSQLite(path, "SELECT revoked_before FROM user_cutoffs WHERE user_id = 'bob'") == "2000")
        let warnings = lines.all.filter { $0.level >= .warning }
        #expect(warnings.count == 1 && warnings.first?.metadata["old_wal_commits"] == "checkpointed", "\(warnings)")
        try await store.close()
    }

    @Test("a write whose -wal is removed while it waits for another process's lock is not acknowledged")
    func aWriteThatLostItsWALIsNotAcknowledged() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = try await SQLiteCutoffStore.open(path: path)
        try await store.passwordChanged(user: "alice", at: 1_000)

        // Another process holds the write lock for 1.5 s, so the store's write waits inside SQLite, after the
        // lease checked the files and before it commits.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        holder.arguments = [
            "python3", "-c",
            """
            import sqlite3, sys, time
            c = sqlite3.connect(sys.argv[1], isolation_level=None)
            c.execute("BEGIN IMMEDIATE")
            print("locked", flush=True)
            time.sleep(1.5)
            c.execute("COMMIT")
            c.close()
            """,
            path,
        ]
        let output = Pipe()
        holder.standardOutput = output
        try holder.run()
        let said = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        try #require(said.contains("locked"), "\(said)")

        let write = Task { try await store.passwordChanged(user: "carol", at: 3_000) }
        try await Task.sleep(for: .milliseconds(300))
        try Self.removeWALFiles(path)
        let refused = await expectStoreError(.storeUnavailable) { try await write.value }
        #expect(refused?.message.contains("not acknowledged") == true, "\(String(describing: refused))")
        #expect(refused?.message.contains("the -wal file was removed") == true, "\(String(describing: refused))")
        holder.waitUntilExit()

        // The next call opens the files at the paths, and its write is seen there.
        try await store.passwordChanged(user: "dave", at: 4_000)
        #expect(try pythonSQLite(path, "SELECT revoked_before FROM user_cutoffs WHERE user_id = 'dave'") == "4000")
        try await store.close()
    }
}

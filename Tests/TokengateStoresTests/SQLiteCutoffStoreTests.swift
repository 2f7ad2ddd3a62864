//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateStores

@Suite("SQLite cutoff store")
struct SQLiteCutoffStoreTests {
    @Test("the first open creates the file, the schema, WAL mode and the global row")
    func createsSchema() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        #expect(!FileManager.default.fileExists(atPath: path))
        let store = try await SQLiteCutoffStore.open(path: path)
        #expect(FileManager.default.fileExists(atPath: path))
        let loaded = try await store.load()
        #expect(loaded.users.isEmpty && loaded.globalRevokedBefore == nil && loaded.forceEpoch == 0)
        let position = try #require(loaded.position, "a new store has a change feed")
        try await store.close()

        #expect(try pythonSQLite(path, "PRAGMA journal_mode") == "wal")
        #expect(try pythonSQLite(path, "SELECT version FROM schema_version") == "3")
        // The store's id and the connection's open count (a reopened file is another numbering).
        #expect(try position.feed == "sqlite:" + pythonSQLite(path, "SELECT store_id FROM global_cutoff") + ":1")
        let tables = try pythonSQLite(path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        #expect(tables.split(separator: "\n") == ["devices", "global_cutoff", "schema_version", "user_cutoffs"])
        let columns = try pythonSQLite(path, "SELECT name FROM pragma_table_info('user_cutoffs') ORDER BY cid")
        #expect(columns.split(separator: "\n") == ["user_id", "revoked_before", "api_revoked_before", "updated_at", "change_seq"])
        #expect(try pythonSQLite(path, "SELECT id, revoked_before, force_epoch, change_seq FROM global_cutoff") == "1|NULL|0|0")
    }

    @Test("a missing directory is an error, not a new empty store")
    func missingDirectory() async throws {
        let directory = try TemporaryDirectory()
        let error = await expectStoreError(.storeUnavailable) {
            try await SQLiteCutoffStore.open(path: directory.file("not-mounted/cutoffs.db"))
        }
        #expect(error?.message.contains("directory") == true)
        #expect(!FileManager.default.fileExists(atPath: directory.file("not-mounted")))
    }

    @Test("a one-shot writer (createIfMissing: false) never creates the file; a directory at the path is named as one")
    func noCreateForOneShotWriters() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let missing = await expectStoreError(.storeUnavailable) {
            try await SQLiteCutoffStore.open(path: path, createIfMissing: false)
        }
        #expect(missing?.message.contains("missing") == true, "\(String(describing: missing))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [], "nothing created")

        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        // Permanent, unlike a missing file (a volume not mounted yet): `revoke` exits 69 on it, not 75.
        let isDirectory = await expectStoreError(.invalidStoreFile) { try await SQLiteCutoffStore.open(path: path) }
        #expect(isDirectory?.message.contains("is a directory") == true, "\(String(describing: isDirectory))")
        try FileManager.default.removeItem(atPath: path)

        try await SQLiteCutoffStore.open(path: path).close()
        let reopened = try await SQLiteCutoffStore.open(path: path, createIfMissing: false)
        try await reopened.passwordChanged(user: "alice", at: 1_000)
        #expect(try await reopened.load().users["alice"]?.revokedBefore == 1_000)
        try await reopened.close()
    }

    @Test("writes are read back, and survive closing and reopening")
    func durableAcrossReopen() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = try await SQLiteCutoffStore.open(path: path)
        #expect(try await store.passwordChanged(user: "alice", at: 1_000) == CutoffWriteResult(cutoff: 1_000, changed: true, forced: false))
        try await store.disableMobileApps(user: "alice", at: 1_500)
        try await store.disableMobileApps(user: "bob@example.com", at: 2_000)
        try await store.revokeAll(at: 500)
        #expect(try await store.cutoffs(for: "alice") == CutoffLookup(
            user: UserCutoffs(revokedBefore: 1_000, apiRevokedBefore: 1_500),
            globalRevokedBefore: 500
        ))
        #expect(try await store.cutoffs(for: "carol") == CutoffLookup(user: UserCutoffs(), globalRevokedBefore: 500))
        try await store.close()
        await expectStoreError(.storeUnavailable) { try await store.load() }

        let reopened = try await SQLiteCutoffStore.open(path: path)
        let table = try await reopened.load()
        #expect(table.globalRevokedBefore == 500)
        #expect(table.users == [
            "alice": UserCutoffs(revokedBefore: 1_000, apiRevokedBefore: 1_500),
            "bob@example.com": UserCutoffs(revokedBefore: nil, apiRevokedBefore: 2_000),
        ])
        #expect(table.forceEpoch == 0)
        try await reopened.close()
        #expect(try pythonSQLite(path, "SELECT user_id, revoked_before, api_revoked_before FROM user_cutoffs ORDER BY user_id")
            == "alice|1000|1500\nbob@example.com|NULL|2000")
    }

    @Test("cutoffs only move forward; the same time is a no-op; force moves back and bumps the force epoch")
    func forwardOnly() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        try await store.passwordChanged(user: "alice", at: 2_000)

        let backward = await expectStoreError(.cutoffWouldMoveBackward) {
            try await store.passwordChanged(user: "alice", at: 1_000)
        }
        #expect(backward?.keptCutoff == 2_000)
        #expect(try await store.cutoffs(for: "alice").user.revokedBefore == 2_000)
        #expect(try await store.passwordChanged(user: "alice", at: 2_000) == CutoffWriteResult(cutoff: 2_000, changed: false, forced: false))
        #expect(try await store.passwordChanged(user: "alice", at: 3_000).changed)
        #expect(try await store.load().forceEpoch == 0)

        // The api cutoff is its own column with the same rule.
        try await store.disableMobileApps(user: "alice", at: 5_000)
        await expectStoreError(.cutoffWouldMoveBackward) { try await store.disableMobileApps(user: "alice", at: 4_999) }

        let forced = try await store.passwordChanged(user: "alice", at: 1_000, force: true)
        #expect(forced == CutoffWriteResult(cutoff: 1_000, changed: true, forced: true))
        var table = try await store.load()
        #expect(table.users["alice"] == UserCutoffs(revokedBefore: 1_000, apiRevokedBefore: 5_000))
        #expect(table.forceEpoch == 1)

        // A forced write of the value already stored changes nothing and says so (it answered `changed: true`).
        #expect(try await store.passwordChanged(user: "alice", at: 1_000, force: true).changed == false)
        #expect(try await store.load().forceEpoch == 1)

        // A forced write forward does not bump the epoch: nothing moved back.
        try await store.passwordChanged(user: "alice", at: 9_000, force: true)
        #expect(try await store.load().forceEpoch == 1)

        // The global cutoff follows the same rule.
        try await store.revokeAll(at: 700)
        let global = await expectStoreError(.cutoffWouldMoveBackward) { try await store.revokeAll(at: 600) }
        #expect(global?.keptCutoff == 700)
        #expect(try await store.revokeAll(at: 700).changed == false)
        try await store.revokeAll(at: 600, force: true)
        #expect(try await store.revokeAll(at: 600, force: true).changed == false)
        table = try await store.load()
        #expect(table.globalRevokedBefore == 600)
        #expect(table.forceEpoch == 2)
        try await store.close()
    }

    @Test("an operator's own SQL that moves a cutoff back or deletes a user bumps the force epoch")
    func triggersSeeManualSQL() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = try await SQLiteCutoffStore.open(path: path)
        try await store.passwordChanged(user: "alice", at: 2_000)
        try await store.passwordChanged(user: "bob", at: 2_000)
        try pythonSQLite(path, "UPDATE user_cutoffs SET revoked_before = 3000 WHERE user_id = 'alice'")
        #expect(try await store.load().forceEpoch == 0)
        try pythonSQLite(path, "UPDATE user_cutoffs SET revoked_before = NULL WHERE user_id = 'alice'")
        #expect(try await store.load().forceEpoch == 1)
        try pythonSQLite(path, "DELETE FROM user_cutoffs WHERE user_id = 'bob'")
        #expect(try await store.load().forceEpoch == 2)
        try await store.close()
    }

    @Test("user ids are validated before anything is written", arguments: [
        "", String(repeating: "x", count: 257), "a\u{0}b", "line\nbreak", "del\u{7F}", "c1\u{85}", "tab\t", " spaced", "spaced ",
    ])
    func invalidUserIDs(id: String) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = try await SQLiteCutoffStore.open(path: path)
        await expectStoreError(.invalidUserID) { try await store.passwordChanged(user: id, at: 1) }
        await expectStoreError(.invalidUserID) { try await store.disableMobileApps(user: id, at: 1) }
        await expectStoreError(.invalidUserID) { try await store.cutoffs(for: id) }
        #expect(try await store.load().users.isEmpty)
        try await store.close()
    }

    @Test("ids up to 256 bytes of UTF-8, with any printable Unicode, are accepted")
    func validUserIDs() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        let longest = String(repeating: "é", count: 128)  // 2 bytes each: exactly 256
        #expect(longest.utf8.count == 256)
        let ids = [longest, "ユーザー", "a/b%2F'\"; DROP TABLE user_cutoffs; --", "inner spaces only"]
        for (index, id) in ids.enumerated() {
            try await store.passwordChanged(user: id, at: Int64(index + 1))
        }
        let table = try await store.load()
        #expect(Set(table.users.keys.map(\.id)) == Set(ids))
        #expect(CutoffUserID.isValid(longest + "e") == false)
        try await store.close()
    }

    @Test("ids that differ only in Unicode form are two users, in the store and in the loaded table")
    func unicodeFormsAreDistinctUsers() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        let composed = "jos\u{E9}"
        let decomposed = "jose\u{301}"
        try await store.passwordChanged(user: decomposed, at: 500)
        try await store.passwordChanged(user: composed, at: 100)
        let table = try await store.load()
        #expect(table.users.count == 2, "\(table.users)")
        #expect(table.users[CutoffUserKey(decomposed)]?.revokedBefore == 500)
        #expect(table.users[CutoffUserKey(composed)]?.revokedBefore == 100, "not merged into the other's 500")
        #expect(try await store.lookup(user: composed).user.revokedBefore == 100)
        try await store.close()
    }

    @Test("a negative time is refused")
    func negativeTime() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        await expectStoreError(.invalidTime) { try await store.revokeAll(at: -1) }
        try await store.close()
    }

    @Test("a database with a newer schema version is refused")
    func newerSchema() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        try await SQLiteCutoffStore.open(path: path).close()
        try pythonSQLite(path, "UPDATE schema_version SET version = \(SQLiteCutoffStore.schemaVersion + 1)")
        await expectStoreError(.unsupportedSchema) { try await SQLiteCutoffStore.open(path: path) }
    }

    @Test("a file that is not a database is refused at open")
    func notADatabase() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        try writeFile(path, String(repeating: "this is not sqlite\n", count: 100))
        await expectStoreError(.invalidStoreFile) { try await SQLiteCutoffStore.open(path: path) }
    }

    @Test("a file replaced under an open store fails instead of writing to the old inode, and works again once back")
    func fileReplacedWhileOpen() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = try await SQLiteCutoffStore.open(path: path)
        try await store.passwordChanged(user: "alice", at: 1_000)

        // Move the database away with its -wal and -shm files, as a backup or an unmounted volume would.
        try moveDatabase(from: path, to: directory.file("moved.db"))
        await expectStoreError(.storeUnavailable) { try await store.passwordChanged(user: "alice", at: 2_000) }
        try writeFile(path, String(repeating: "garbage", count: 1000))
        // Garbage in its place is named as a damaged file, apart from one that is missing.
        await expectStoreError(.invalidStoreFile) { try await store.load() }
        await expectStoreError(.invalidStoreFile) { try await store.passwordChanged(user: "alice", at: 2_000) }

        try FileManager.default.removeItem(atPath: path)
        try moveDatabase(from: directory.file("moved.db"), to: path)
        #expect(try await store.load().users["alice"]?.revokedBefore == 1_000)
        try await store.passwordChanged(user: "alice", at: 2_000)
        try await store.close()
        #expect(try pythonSQLite(path, "SELECT revoked_before FROM user_cutoffs WHERE user_id = 'alice'") == "2000")
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateStores

/// Connection lifecycle of the SQLite store: every connection it opens is closed, whoever races whom.
///
/// The count of this process's file descriptors under the test's own directory is the observable: SQLite keeps
/// the database, its `-wal` and its `-shm` open for as long as a connection is. In debug builds a connection
/// released open would also stop the whole run with sqlite-nio's "not closed before deinitializing" assertion.
@Suite("SQLite cutoff store lifecycle")
struct SQLiteCutoffStoreLifecycleTests {
    /// This process's open descriptors on files under `directory` (Linux: `/proc/self/fd`).
    static func openDescriptors(under directory: String) -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.count(where: { entry in
            let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + entry)
            return target?.hasPrefix(directory + "/") == true
        })
    }

    /// Gives the path a new inode with the same content, as a restore from backup would.
    static func replaceWithCopy(_ path: String, directory: borrowing TemporaryDirectory, round: Int) throws {
        // Everything into the main file first, so a copy of that file alone is the whole database.
        try pythonSQLite(path, "PRAGMA wal_checkpoint(TRUNCATE)")
        let copy = directory.file("copy-\(round).db")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: copy, toPath: path)
    }

    @Test("close() closes the connection before it returns, and concurrent or repeated calls all wait for that")
    func closeIsIdempotentAndSerialized() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        try await store.passwordChanged(user: "alice", at: 100)
        #expect(Self.openDescriptors(under: directory.path) > 0)

        async let first: Void = store.close()
        async let second: Void = store.close()
        _ = try await (first, second)
        #expect(Self.openDescriptors(under: directory.path) == 0)
        try await store.close()
        await expectStoreError(.storeUnavailable) { try await store.load() }
        #expect(Self.openDescriptors(under: directory.path) == 0)
    }

    @Test("concurrent calls that all find the file replaced reopen it once each time and leave nothing open")
    func concurrentReopens() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = try await SQLiteCutoffStore.open(path: path)
        try await store.passwordChanged(user: "alice", at: 100)

        for round in 1...5 {
            try Self.replaceWithCopy(path, directory: directory, round: round)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<16 {
                    group.addTask {
                        if index.isMultiple(of: 2) {
                            let table = try await store.load()
                            #expect(table.users["alice"]?.revokedBefore == 100)
                        } else {
                            let marker = try await store.changeMarker()
                            #expect(marker != nil)
                        }
                    }
                }
                try await group.waitForAll()
            }
            // SQLite opens the database, its -wal and its -shm: one connection is left, not one per caller.
            #expect(Self.openDescriptors(under: directory.path) <= 3, "round \(round)")
        }
        try await store.close()
        #expect(Self.openDescriptors(under: directory.path) == 0)
    }

    @Test("close() racing running statements and a reopen waits for them and closes every connection")
    func closeRacingCalls() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let store = try await SQLiteCutoffStore.open(path: path)
        try await store.passwordChanged(user: "alice", at: 100)
        try Self.replaceWithCopy(path, directory: directory, round: 1)

        let results = await withTaskGroup(of: Result<CutoffTable, any Error>.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    do {
                        return .success(try await store.load())
                    } catch {
                        return .failure(error)
                    }
                }
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(1))
                try? await store.close()
                return .success(CutoffTable())
            }
            var all: [Result<CutoffTable, any Error>] = []
            for await result in group {
                all.append(result)
            }
            return all
        }
        try await store.close()
        #expect(Self.openDescriptors(under: directory.path) == 0)
        for case .failure(let error) in results {
            // A call that lost the race finds the store closed; nothing else may go wrong.
            #expect((error as? CutoffStoreError)?.code == .storeUnavailable, "\(error)")
        }
    }

    @Test("a cancelled caller neither leaks nor drops the connection")
    func cancelledCaller() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        try await store.passwordChanged(user: "alice", at: 100)
        let marker = try await store.changeMarker()
        let reader = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            // sqlite-nio refuses work in a cancelled task before it touches the connection.
            return try await store.load()
        }
        await expectStoreError(.storeUnavailable) { try await reader.value }
        #expect(try await store.load().users["alice"]?.revokedBefore == 100)
        // The same connection (a reopen would change the marker and force a full reload everywhere).
        #expect(try await store.changeMarker() == marker)
        #expect(Self.openDescriptors(under: directory.path) <= 3)
        try await store.close()
        #expect(Self.openDescriptors(under: directory.path) == 0)
    }

    @Test("a store released without close() still closes its connection")
    func releasedWithoutClose() async throws {
        let directory = try TemporaryDirectory()
        do {
            let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
            try await store.passwordChanged(user: "alice", at: 100)
            #expect(Self.openDescriptors(under: directory.path) > 0)
        }
        #expect(await eventually(timeout: .seconds(10)) { Self.openDescriptors(under: directory.path) == 0 })
        // The close checkpointed the WAL into the file, which is complete on its own.
        #expect(try pythonSQLite(directory.file("cutoffs.db"), "SELECT revoked_before FROM user_cutoffs") == "100")
    }
}

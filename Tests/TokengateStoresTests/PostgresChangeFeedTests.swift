//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateStores

/// The change feed of copy mode against a real PostgreSQL: two instances, `psql` as the operator's own client, and a
/// schema of version 1 as an older tokengate left it.
@Suite(
    "PostgreSQL change feed",
    .serialized,
    .enabled(if: PostgresTestServer.url != nil, PostgresTestServer.skipMessage)
)
struct PostgresChangeFeedTests {
    static func service(_ store: any CutoffStore, _ published: PublishedSnapshots, poll: Duration) -> CutoffSyncService {
        CutoffSyncService(
            store: store,
            configuration: .init(pollInterval: poll, fullReloadInterval: .seconds(3600), feedPollInterval: poll),
            publish: published.publish
        )
    }

    @Test("a write at one instance reaches the other by NOTIFY and the feed, without a full reload")
    func twoInstances() async throws {
        let configuration = try PostgresTestServer.configuration()
        try await withRunningStore(configuration) { storeA in
            try await withRunningStore(configuration) { storeB in
                let a = Self.service(storeA, PublishedSnapshots(), poll: .seconds(60))
                let countedB = FeedCountingStore(storeB)
                let publishedB = PublishedSnapshots()
                let b = Self.service(countedB, publishedB, poll: .seconds(60))
                try await a.start()
                try await b.start()
                let runB = Task { await b.run() }
                defer { runB.cancel() }
                #expect(await eventually(timeout: .seconds(5)) { storeB.isListening })
                // The LISTEN connection's first signal (it may have missed notifications) is read from the feed.
                #expect(await eventually(timeout: .seconds(5)) { await countedB.feedReads >= 1 })

                for (index, user) in ["alice", "bob", "carol"].enumerated() {
                    try await a.passwordChanged(user: user, at: Int64(1_000 + index))
                    let arrived = await eventually(timeout: .seconds(5)) {
                        publishedB.latest?.users[CutoffUserKey(user)]?.revokedBefore == Int64(1_000 + index)
                    }
                    #expect(arrived, "\(user)")
                }
                try await a.disableMobileApps(user: "alice", at: 2_000)
                #expect(await eventually(timeout: .seconds(5)) { publishedB.latest?.users["alice"]?.apiRevokedBefore == 2_000 })
                try await a.revokeAll(at: 500)
                #expect(await eventually(timeout: .seconds(5)) { publishedB.latest?.globalRevokedBefore == 500 })
                #expect(await countedB.loads == 1, "every change came from the feed")

                // A forced move back cannot be told as changed rows: the other instance reloads, and takes it as is.
                try await a.passwordChanged(user: "bob", at: 10, force: true)
                #expect(await eventually(timeout: .seconds(5)) { publishedB.latest?.users["bob"]?.revokedBefore == 10 })
                #expect(await countedB.loads >= 2)
            }
        }
    }

    @Test("an operator's own SQL (no NOTIFY) is read from the feed at the next poll; a deleted row reloads the table")
    func operatorSQL() async throws {
        let configuration = try PostgresTestServer.configuration()
        let table = configuration.table
        try await withRunningStore(configuration) { store in
            let counted = FeedCountingStore(store)
            let published = PublishedSnapshots()
            let service = Self.service(counted, published, poll: .milliseconds(50))
            try await service.passwordChangedThroughStart(counted)
            let run = Task { await service.run() }
            defer { run.cancel() }
            try PostgresTestServer.psql("INSERT INTO \(table) (user_id, revoked_before, updated_at) VALUES ('op', 77, 0)")
            #expect(await eventually(timeout: .seconds(5)) { published.latest?.users["op"]?.revokedBefore == 77 })
            #expect(await counted.loads == 1)
            #expect(try PostgresTestServer.psql("SELECT change_seq > 0 FROM \(table) WHERE user_id = 'op'") == "t")

            try PostgresTestServer.psql("DELETE FROM \(table) WHERE user_id = 'op'")
            #expect(await eventually(timeout: .seconds(5)) { published.latest?.users["op"] == nil })
            #expect(await counted.loads >= 2)
        }
    }

    @Test("a version 1 schema is upgraded by the first instance: rows kept, numbered from then on, version 2")
    func upgradesVersion1() async throws {
        let configuration = try PostgresTestServer.configuration()
        let table = configuration.table
        // Make a store, then take it back to version 1 exactly as tokengate 1 created it (its tables and triggers).
        try await withRunningStore(configuration) { store in
            try await store.passwordChanged(user: "old", at: 42)
        }
        try PostgresTestServer.psql("""
            DROP TRIGGER "\(table)_numbered" ON \(table);
            DROP FUNCTION "\(table)_numbered"();
            DROP INDEX "\(table)_by_change";
            ALTER TABLE \(table) DROP COLUMN change_seq;
            ALTER TABLE \(table)_global DROP COLUMN store_id;
            UPDATE \(table)_global SET schema_version = 1;
            """)

        try await withRunningStore(configuration) { store in
            let counted = FeedCountingStore(store)
            let published = PublishedSnapshots()
            let service = Self.service(counted, published, poll: .milliseconds(50))
            try await service.start()
            #expect(published.latest?.users["old"]?.revokedBefore == 42)
            #expect(try PostgresTestServer.psql("SELECT schema_version FROM \(table)_global") == "2")
            #expect(try PostgresTestServer.psql("SELECT count(*) FROM \(table) WHERE change_seq = 0") == "1")
            let run = Task { await service.run() }
            defer { run.cancel() }
            // tokengate 1's upsert, word for word: the trigger numbers it.
            try PostgresTestServer.psql("""
                INSERT INTO \(table) AS cur (user_id, revoked_before, updated_at) VALUES ('old', 50, 0)
                ON CONFLICT (user_id) DO UPDATE SET revoked_before = excluded.revoked_before, updated_at = excluded.updated_at
                WHERE cur.revoked_before IS NULL OR cur.revoked_before < excluded.revoked_before
                """)
            #expect(await eventually(timeout: .seconds(5)) { published.latest?.users["old"]?.revokedBefore == 50 })
            #expect(await counted.loads == 1)
        }
        // A second instance finds version 2 and changes nothing.
        try await withRunningStore(configuration) { store in
            let loaded = try await store.load()
            #expect(loaded.users["old"]?.revokedBefore == 50)
        }
    }
}

extension CutoffSyncService {
    /// ``start()``, after which the store is read only through the feed (for the operator test above).
    fileprivate func passwordChangedThroughStart(_ store: FeedCountingStore) async throws {
        try await self.start()
        #expect(await store.loads == 1)
    }
}

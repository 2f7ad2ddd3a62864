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

    /// The SQL of docs/configuration.md ("Incremental sync in `rp_table` mode"), for a table `users` with the
    /// column `tokengate_change` and tokengate's `<table>_global`, with the names of this test.
    static func rpChangeFeedSQL(users: String, global: String) -> String {
        """
        ALTER TABLE \(users) ADD COLUMN tokengate_change bigint NOT NULL DEFAULT 0;
        CREATE INDEX \(users)_tokengate_change ON \(users) (tokengate_change);
        CREATE OR REPLACE FUNCTION \(users)_tokengate_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE \(global) SET change_seq = change_seq + 1 WHERE id = 1
                RETURNING change_seq INTO STRICT NEW.tokengate_change;
            RETURN NEW;
        END $$;
        CREATE TRIGGER \(users)_tokengate_change
            BEFORE INSERT OR UPDATE OF password_changed_at ON \(users)
            FOR EACH ROW EXECUTE FUNCTION \(users)_tokengate_change();
        """
    }

    @Test("RP-table mode with change_column: the site's writes are read from the feed, not by reloading its table")
    func rpTableChangeColumn() async throws {
        let users = try PostgresCutoffStoreTests.makeRPUsersTable()
        defer { _ = try? PostgresTestServer.psql("DROP TABLE \(users)") }
        let rp = PostgresCutoffStore.RPTable(table: users, changeColumn: "tokengate_change")
        let configuration = try PostgresTestServer.configuration(rpTable: rp)
        let global = configuration.table + "_global"
        defer { _ = try? PostgresTestServer.psql("DROP TABLE IF EXISTS \(global)") }

        // Before the column exists, the store names what is missing.
        await #expect {
            try await withRunningStore(configuration) { store in _ = try await store.load() }
        } throws: { error in
            "\(error)".contains("has no column") && "\(error)".contains("tokengate_change")
        }
        // The global table exists once a store without the feed started; then the site installs the trigger.
        var withoutFeed = rp
        withoutFeed.changeColumn = nil
        try await withRunningStore(try PostgresTestServer.configuration(table: configuration.table, rpTable: withoutFeed)) {
            store in _ = try await store.load()
        }
        try PostgresTestServer.psql(Self.rpChangeFeedSQL(users: users, global: global))

        try await withRunningStore(configuration) { store in
            let counted = FeedCountingStore(store)
            let published = PublishedSnapshots()
            let service = Self.service(counted, published, poll: .milliseconds(50))
            try await service.start()
            #expect(published.latest?.users["2"]?.revokedBefore == 1_714_564_800)
            let run = Task { await service.run() }
            defer { run.cancel() }

            // The site's own writes, as its application makes them: an update, and a new user.
            try PostgresTestServer.psql("UPDATE \(users) SET password_changed_at = to_timestamp(1750000000) WHERE id = 1")
            #expect(await eventually(timeout: .seconds(5)) { published.latest?.users["1"]?.revokedBefore == 1_750_000_000 })
            try PostgresTestServer.psql("INSERT INTO \(users) (id, password_changed_at) VALUES (3, to_timestamp(1750000001))")
            #expect(await eventually(timeout: .seconds(5)) { published.latest?.users["3"]?.revokedBefore == 1_750_000_001 })
            // A change of another column is neither numbered nor read.
            try PostgresTestServer.psql("UPDATE \(users) SET tokengate_change = tokengate_change WHERE id = 2")
            #expect(await counted.loads == 1, "every change came from the feed")
            #expect(await counted.feedReads >= 2)
            #expect(try PostgresTestServer.psql("SELECT tokengate_change > 0 FROM \(users) WHERE id = 3") == "t")
        }

        // A column of another type than bigint is refused, naming it.
        try PostgresTestServer.psql("ALTER TABLE \(users) ADD COLUMN narrow integer")
        var narrow = rp
        narrow.changeColumn = "narrow"
        await #expect {
            try await withRunningStore(try PostgresTestServer.configuration(table: configuration.table, rpTable: narrow)) {
                store in _ = try await store.load()
            }
        } throws: { error in
            "\(error)".contains("must be a bigint")
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

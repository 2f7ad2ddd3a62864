//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateAdmin
import TokengateTokens

@testable import TokengateStores

/// Against a real PostgreSQL (`scripts/postgres-test-server.sh`). Serialized: one test stops and restarts the
/// server.
@Suite(
    "PostgreSQL cutoff store",
    .serialized,
    .enabled(if: PostgresTestServer.url != nil, PostgresTestServer.skipMessage)
)
struct PostgresCutoffStoreTests {
    static func service(
        _ store: any CutoffStore,
        published: PublishedSnapshots,
        pollInterval: Duration = .seconds(60),
        staleAfter: Duration = .seconds(30)
    ) -> CutoffSyncService {
        CutoffSyncService(
            store: store,
            // The feed is read no more often than the marker would be: within a test only LISTEN/NOTIFY brings a
            // change made elsewhere before the poll interval.
            configuration: .init(
                pollInterval: pollInterval, fullReloadInterval: .seconds(3600), staleAfter: staleAfter,
                feedPollInterval: pollInterval),
            publish: published.publish
        )
    }

    /// One gateway instance of a test with two: its store, its sync service and what that published.
    struct Instance {
        let store: PostgresCutoffStore
        let service: CutoffSyncService
        let published: PublishedSnapshots

        init(_ store: PostgresCutoffStore) {
            self.store = store
            self.published = PublishedSnapshots()
            self.service = PostgresCutoffStoreTests.service(store, published: self.published)
        }
    }

    /// Two instances on one database, started, running and listening. They poll once a minute: within a test only
    /// LISTEN/NOTIFY can bring a change made at the other.
    static func withTwoInstances(
        _ configuration: PostgresCutoffStore.Configuration,
        _ body: (Instance, Instance) async throws -> Void
    ) async throws {
        try await withRunningStore(configuration) { storeA in
            try await withRunningStore(configuration) { storeB in
                let a = Instance(storeA)
                let b = Instance(storeB)
                try await a.service.start()
                try await b.service.start()
                let runA = Task { await a.service.run() }
                let runB = Task { await b.service.run() }
                defer {
                    runA.cancel()
                    runB.cancel()
                }
                #expect(await eventually(timeout: .seconds(5)) { storeA.isListening && storeB.isListening })
                try await body(a, b)
            }
        }
    }

    @Test("copy mode: schema on first start, writes committed and forward-only, force bumps the epoch")
    func writesDurableAndForwardOnly() async throws {
        let configuration = try PostgresTestServer.configuration()
        let table = configuration.table
        try await withRunningStore(configuration) { store in
            let empty = try await store.load()
            #expect(empty.users.isEmpty && empty.globalRevokedBefore == nil && empty.forceEpoch == 0)
            let storeID = try PostgresTestServer.psql("SELECT store_id FROM \(table)_global")
            #expect(empty.position?.feed == "postgres:" + storeID && storeID.count == 32)
            #expect(try PostgresTestServer.psql("SELECT schema_version FROM \(table)_global") == "2")

            let first = try await store.passwordChanged(user: "alice", at: 1_000)
            #expect(first == CutoffWriteResult(cutoff: 1_000, changed: true, forced: false))
            // Committed: another client sees it right after the call returned.
            #expect(
                try PostgresTestServer.psql("SELECT revoked_before FROM \(table) WHERE user_id = 'alice'") == "1000")

            let backward = await expectStoreError(.cutoffWouldMoveBackward) {
                try await store.passwordChanged(user: "alice", at: 900)
            }
            #expect(backward?.keptCutoff == 1_000)
            #expect(try await store.passwordChanged(user: "alice", at: 1_000).changed == false)
            try await store.disableMobileApps(user: "alice", at: 1_100)
            try await store.revokeAll(at: 500)
            await expectStoreError(.cutoffWouldMoveBackward) { try await store.revokeAll(at: 400) }

            let lookup = try await store.cutoffs(for: "alice")
            #expect(
                lookup
                    == CutoffLookup(
                        user: UserCutoffs(revokedBefore: 1_000, apiRevokedBefore: 1_100), globalRevokedBefore: 500))
            #expect(
                try await store.cutoffs(for: "nobody") == CutoffLookup(user: UserCutoffs(), globalRevokedBefore: 500))

            let before = try await store.load()
            #expect(before.users == ["alice": UserCutoffs(revokedBefore: 1_000, apiRevokedBefore: 1_100)])
            #expect(before.globalRevokedBefore == 500)
            let marker = try await store.changeMarker()

            let forced = try await store.passwordChanged(user: "alice", at: 900, force: true)
            #expect(forced == CutoffWriteResult(cutoff: 900, changed: true, forced: true))
            let after = try await store.load()
            #expect(after.users["alice"]?.revokedBefore == 900)
            #expect(after.forceEpoch == before.forceEpoch + 1)
            #expect(try await store.changeMarker() != marker)
            // The value already stored, forced again: nothing changes, and the answer says so.
            #expect(try await store.passwordChanged(user: "alice", at: 900, force: true).changed == false)
            #expect(try await store.revokeAll(at: 500, force: true).changed == false)
            #expect(try await store.load().forceEpoch == after.forceEpoch)

            // An operator's own SQL that moves a cutoff back also bumps the epoch (the triggers), and deleting does.
            try PostgresTestServer.psql("UPDATE \(table)_global SET revoked_before = 100")
            #expect(try await store.load().forceEpoch == after.forceEpoch + 1)
            try PostgresTestServer.psql("DELETE FROM \(table) WHERE user_id = 'alice'")
            #expect(try await store.load().forceEpoch == after.forceEpoch + 2)
            // A forward change by SQL changes the marker but not the epoch.
            let markerBefore = try await store.changeMarker()
            try PostgresTestServer.psql(
                "INSERT INTO \(table) (user_id, revoked_before, updated_at) VALUES ('bob', 7, 0)")
            #expect(try await store.changeMarker() != markerBefore)
            #expect(try await store.load().forceEpoch == after.forceEpoch + 2)

            await expectStoreError(.invalidUserID) { try await store.passwordChanged(user: "", at: 1) }
            await expectStoreError(.invalidTime) { try await store.passwordChanged(user: "bob", at: -1) }
        }
    }

    @Test("a write commits before it is acknowledged and sends NOTIFY in the same transaction")
    func notifyAfterCommit() async throws {
        let configuration = try PostgresTestServer.configuration()
        try await withRunningStore(configuration) { store in
            _ = try await store.load()
            var signals = try #require(store.changeSignals).makeAsyncIterator()
            #expect(await eventually(timeout: .seconds(5)) { store.isListening })
            // The signal for the LISTEN being established.
            #expect(await signals.next() == CutoffChangeSignal(user: nil))
            try await store.passwordChanged(user: "carol", at: 10)
            #expect(await signals.next() == CutoffChangeSignal(user: "carol"))
            try await store.revokeAll(at: 10)
            #expect(await signals.next() == CutoffChangeSignal(user: nil))
            // A refused write sends nothing: the next signal is from the write after it.
            await expectStoreError(.cutoffWouldMoveBackward) { try await store.passwordChanged(user: "carol", at: 5) }
            try await store.passwordChanged(user: "dave", at: 10)
            #expect(await signals.next() == CutoffChangeSignal(user: "dave"))
        }
    }

    @Test("two instances on one database: a password change at A's admin API reaches B's snapshot in well under 1 s")
    func propagationBetweenInstances() async throws {
        let configuration = try PostgresTestServer.configuration()
        try await Self.withTwoInstances(configuration) { a, b in
            let (publishedA, publishedB, serviceA) = (a.published, b.published, a.service)
            let api = AdminAPI(service: serviceA)

            let clock = ContinuousClock()
            var delays: [Duration] = []
            for index in 0..<20 {
                let user = "user-\(index)"
                let oldTokenIAT = CutoffSyncService.systemNow() - 1
                #expect(!rejects(publishedB.latest, user: user, iat: oldTokenIAT))
                let start = clock.now
                let response = await api.handle(
                    method: "POST", path: "/admin/users/\(user)/password-changed", body: [])
                #expect(response.status == 200, "\(response.json)")
                // A's own snapshot already rejects the old token when the admin call returns.
                #expect(rejects(publishedA.latest, user: user, iat: oldTokenIAT))
                let arrived = await eventually(timeout: .seconds(1)) {
                    rejects(publishedB.latest, user: user, iat: oldTokenIAT)
                }
                #expect(arrived, "B did not reject the old token of \(user) within 1 s")
                delays.append(clock.now - start)
                // A token issued after the change stays valid at B.
                #expect(!rejects(publishedB.latest, user: user, iat: oldTokenIAT + 2))
            }
            let sorted = delays.sorted()
            let median = sorted[sorted.count / 2]
            print(
                "postgres propagation A admin API -> B snapshot over \(sorted.count) writes: "
                    + "median \(Self.milliseconds(median)) ms, min \(Self.milliseconds(sorted[0])) ms, "
                    + "max \(Self.milliseconds(sorted[sorted.count - 1])) ms"
            )
            #expect(sorted[sorted.count - 1] < .seconds(1))

            // The global switch and "disable mobile apps" travel the same way.
            let now = CutoffSyncService.systemNow()
            try await serviceA.disableMobileApps(user: "user-0")
            #expect(
                await eventually(timeout: .seconds(1)) {
                    rejects(publishedB.latest, user: "user-0", iat: now - 1, api: true)
                })
            try await serviceA.revokeAll()
            #expect(
                await eventually(timeout: .seconds(1)) { rejects(publishedB.latest, user: "someone", iat: now - 1) }
            )
        }
    }

    @Test("a restart keeps every cutoff: a new store on the same tables loads all of them")
    func restartKeepsCutoffs() async throws {
        let configuration = try PostgresTestServer.configuration()
        var expected = CutoffTable()
        try await withRunningStore(configuration) { store in
            for index in 0..<200 {
                let user = "u\(index)"
                try await store.passwordChanged(user: user, at: Int64(1_000 + index))
                if index % 3 == 0 {
                    try await store.disableMobileApps(user: user, at: Int64(2_000 + index))
                }
                expected.users[CutoffUserKey(user)] = UserCutoffs(
                    revokedBefore: Int64(1_000 + index),
                    apiRevokedBefore: index % 3 == 0 ? Int64(2_000 + index) : nil
                )
            }
            try await store.revokeAll(at: 42)
            expected.globalRevokedBefore = 42
        }
        try await withRunningStore(configuration) { store in
            let loaded = try await store.load()
            #expect(loaded.users == expected.users)
            #expect(loaded.globalRevokedBefore == 42)
        }
    }

    @Test("two instances starting at once create the schema once")
    func concurrentSchemaCreation() async throws {
        let configuration = try PostgresTestServer.configuration()
        try await withRunningStore(configuration) { a in
            try await withRunningStore(configuration) { b in
                async let first = a.load()
                async let second = b.load()
                let (x, y) = try await (first, second)
                #expect(x.users.isEmpty && x.globalRevokedBefore == nil)
                #expect(y.users.isEmpty && y.globalRevokedBefore == nil)
                #expect(x.position != nil && x.position == y.position, "one schema, one feed")
            }
        }
    }

    @Test("a schema version newer than this tokengate's is refused")
    func newerSchemaRefused() async throws {
        let configuration = try PostgresTestServer.configuration()
        try await withRunningStore(configuration) { store in
            _ = try await store.load()
        }
        try PostgresTestServer.psql("UPDATE \(configuration.table)_global SET schema_version = 3")
        try await withRunningStore(configuration) { store in
            await expectStoreError(.unsupportedSchema) { try await store.load() }
        }
    }

    @Test("RP-table mode picks up UPDATE users SET password_changed_at = now() and the api-disabled column")
    func rpTableTimestamps() async throws {
        let users = PostgresTestServer.uniqueName("users")
        try PostgresTestServer.psql(
            """
            CREATE TABLE \(users) (id bigint PRIMARY KEY, email text, password_changed_at timestamptz,
                                   api_disabled_at timestamptz);
            INSERT INTO \(users) VALUES (1, 'a@example.com', '2024-05-01T12:00:00Z', NULL),
                                        (2, 'b@example.com', NULL, NULL),
                                        (3, 'c@example.com', '2024-05-01T12:00:00.25Z', '2024-05-02T00:00:00Z');
            """
        )
        defer { _ = try? PostgresTestServer.psql("DROP TABLE \(users)") }
        let rp = PostgresCutoffStore.RPTable(table: users, apiDisabledColumn: "api_disabled_at")
        let configuration = try PostgresTestServer.configuration(rpTable: rp)
        try await withRunningStore(configuration) { store in
            let published = PublishedSnapshots()
            let service = Self.service(store, published: published, pollInterval: .milliseconds(100))
            try await service.start()
            let run = Task { await service.run() }
            defer { run.cancel() }
            let first = try #require(published.latest)
            #expect(first.users["1"] == UserCutoffs(revokedBefore: 1_714_564_800))
            // A fractional second rounds up: a token stamped 12:00:00 may predate the change.
            #expect(first.users["3"] == UserCutoffs(revokedBefore: 1_714_564_801, apiRevokedBefore: 1_714_608_000))
            #expect(first.users["2"] == nil)

            let before = CutoffSyncService.systemNow() - 1
            try PostgresTestServer.psql("UPDATE \(users) SET password_changed_at = now() WHERE id = 2")
            #expect(await eventually(timeout: .seconds(3)) { rejects(published.latest, user: "2", iat: before) })
            try PostgresTestServer.psql("UPDATE \(users) SET api_disabled_at = now() WHERE id = 1")
            #expect(
                await eventually(timeout: .seconds(3)) { rejects(published.latest, user: "1", iat: before, api: true) })
            #expect(!rejects(published.latest, user: "1", iat: before, api: false))

            #expect(
                try await store.cutoffs(for: "3")
                    == CutoffLookup(
                        user: UserCutoffs(revokedBefore: 1_714_564_801, apiRevokedBefore: 1_714_608_000),
                        globalRevokedBefore: nil))
            #expect(
                try await store.cutoffs(for: "not-a-number")
                    == CutoffLookup(user: UserCutoffs(), globalRevokedBefore: nil))

            // Read-only, and the refusal says where to make the change.
            let refused = await expectStoreError(.readOnlyStore) { try await store.passwordChanged(user: "1", at: 1) }
            #expect(refused?.message.contains(users) == true)
            #expect(refused?.message.contains("password_changed_at") == true)
            let answer = await AdminAPI(service: service).handle(
                method: "POST", path: "/admin/users/1/password-changed", body: [])
            #expect(answer.status == 409)
            #expect(answer.json.contains("read_only_store"))
            #expect(answer.json.contains(users))
        }
    }

    @Test("RP-table mode with integer UNIX seconds and the documented notify trigger: no polling needed")
    func rpTableUnixSecondsWithTrigger() async throws {
        let users = PostgresTestServer.uniqueName("accounts")
        let channel = PostgresTestServer.uniqueName("tgch")
        try PostgresTestServer.psql(
            """
            CREATE TABLE \(users) (uid text PRIMARY KEY, pw_changed bigint, apps_off integer);
            INSERT INTO \(users) VALUES ('alice', 1000, NULL), ('bob', NULL, 2000);
            CREATE FUNCTION \(users)_notify() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM pg_notify('\(channel)', '*');
                RETURN NULL;
            END $$;
            CREATE TRIGGER \(users)_notify
                AFTER INSERT OR DELETE OR TRUNCATE OR UPDATE OF pw_changed, apps_off ON \(users)
                FOR EACH STATEMENT EXECUTE FUNCTION \(users)_notify();
            """
        )
        defer { _ = try? PostgresTestServer.psql("DROP TABLE \(users); DROP FUNCTION \(users)_notify()") }
        let rp = PostgresCutoffStore.RPTable(
            table: "public.\(users)",
            userIDColumn: "uid",
            passwordChangedColumn: "pw_changed",
            apiDisabledColumn: "apps_off"
        )
        let configuration = try PostgresTestServer.configuration(channel: channel, rpTable: rp)
        try await withRunningStore(configuration) { store in
            let published = PublishedSnapshots()
            let service = Self.service(store, published: published)  // polls once a minute
            try await service.start()
            let run = Task { await service.run() }
            defer { run.cancel() }
            #expect(
                published.latest?.users == [
                    "alice": UserCutoffs(revokedBefore: 1_000), "bob": UserCutoffs(apiRevokedBefore: 2_000),
                ])
            #expect(await eventually(timeout: .seconds(5)) { store.isListening })
            try PostgresTestServer.psql("UPDATE \(users) SET pw_changed = 5000 WHERE uid = 'bob'")
            #expect(
                await eventually(timeout: .seconds(1)) {
                    published.latest?.users["bob"] == UserCutoffs(revokedBefore: 5_000, apiRevokedBefore: 2_000)
                })
            #expect(try await store.cutoffs(for: "alice").user == UserCutoffs(revokedBefore: 1_000))
        }
    }

    @Test("RP-table mode refuses a missing table or column and a timestamp without time zone")
    func rpTableConfigurationErrors() async throws {
        let users = PostgresTestServer.uniqueName("users")
        try PostgresTestServer.psql("CREATE TABLE \(users) (id bigint, changed timestamp, flag boolean)")
        defer { _ = try? PostgresTestServer.psql("DROP TABLE \(users)") }
        let cases: [PostgresCutoffStore.RPTable] = [
            .init(table: PostgresTestServer.uniqueName("missing")),
            .init(table: users, passwordChangedColumn: "nope"),
            .init(table: users, passwordChangedColumn: "changed"),
            .init(table: users, passwordChangedColumn: "flag"),
        ]
        for rp in cases {
            try await withRunningStore(try PostgresTestServer.configuration(rpTable: rp)) { store in
                let error = await expectStoreError(.invalidStoreConfiguration) { try await store.load() }
                #expect(error != nil, "\(rp)")
            }
        }
    }

    @Test("store lost while running: the last snapshot stays, turns stale, and resyncs when the server is back")
    func storeDownThenBack() async throws {
        let configuration = try PostgresTestServer.configuration(operationTimeout: .seconds(2))
        try await withRunningStore(configuration) { writer in
            try await withRunningStore(configuration) { store in
                try await writer.passwordChanged(user: "erin", at: 100)
                let published = PublishedSnapshots()
                let service = Self.service(
                    store, published: published, pollInterval: .milliseconds(200), staleAfter: .seconds(1))
                try await service.start()
                let run = Task { await service.run() }
                defer { run.cancel() }
                #expect(published.latest?.users["erin"]?.revokedBefore == 100)

                try PostgresTestServer.control("pause")
                // Nothing below throws before the resume, so the server is always started again.
                #expect(await eventually(timeout: .seconds(10)) { await service.lastError != nil })
                #expect(
                    await eventually(timeout: .seconds(10)) {
                        await service.isStale(now: CutoffSyncService.systemNow())
                    })
                // The last snapshot is still enforced.
                #expect(published.latest?.users["erin"]?.revokedBefore == 100)
                let admin = await AdminAPI(service: service).handle(
                    method: "POST", path: "/admin/users/erin/password-changed", body: [])
                #expect(admin.status == 503)
                #expect(!store.isListening)
                try PostgresTestServer.control("resume")

                // Back: polling resyncs, the LISTEN connection returns, and pushed changes flow again.
                #expect(
                    await eventually(timeout: .seconds(15)) {
                        let stale = await service.isStale(now: CutoffSyncService.systemNow())
                        let error = await service.lastError
                        return !stale && error == nil
                    })
                #expect(await eventually(timeout: .seconds(10)) { store.isListening })
                let loaded = try await store.load()
                #expect(loaded.users["erin"]?.revokedBefore == 100)
                let clock = ContinuousClock()
                let start = clock.now
                try await writer.passwordChanged(user: "erin", at: 200)
                #expect(
                    await eventually(timeout: .seconds(1)) { published.latest?.users["erin"]?.revokedBefore == 200 })
                print("postgres propagation after a server restart: \(Self.milliseconds(clock.now - start)) ms")
            }
        }
    }

    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let value = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        return String(format: "%.1f", value)
    }
}

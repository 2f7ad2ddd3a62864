//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateAdmin
import TokengateTokens

@testable import TokengateStores

/// RP-table mode's global cutoff: the users' cutoffs come from the RP's table (read-only), the emergency switch is
/// tokengate's own `<table>_global`. Before, this mode had no global cutoff at all: `revoke-all` answered 409.
extension PostgresCutoffStoreTests {
    /// An RP users table with one user without a cutoff (`1`) and one with (`2`), dropped by the caller.
    static func makeRPUsersTable() throws -> String {
        let users = PostgresTestServer.uniqueName("users")
        try PostgresTestServer.psql(
            """
            CREATE TABLE \(users) (id bigint PRIMARY KEY, password_changed_at timestamptz);
            INSERT INTO \(users) VALUES (1, NULL), (2, '2024-05-01T12:00:00Z');
            GRANT SELECT ON \(users) TO PUBLIC;
            """
        )
        return users
    }

    @Test("RP-table mode: revoke-all writes tokengate's own global table; both instances enforce it, force included")
    func rpTableGlobalCutoff() async throws {
        let users = try Self.makeRPUsersTable()
        defer { _ = try? PostgresTestServer.psql("DROP TABLE \(users)") }
        let configuration = try PostgresTestServer.configuration(rpTable: .init(table: users))
        let global = configuration.table + "_global"
        defer { _ = try? PostgresTestServer.psql("DROP TABLE IF EXISTS \(global)") }
        try await Self.withTwoInstances(configuration) { a, b in
            let (storeA, storeB, publishedA, publishedB) = (a.store, b.store, a.published, b.published)
            // Only the global table is made in the RP's database, with the copy-mode schema version.
            #expect(try PostgresTestServer.psql("SELECT schema_version FROM \(global)") == "2")
            #expect(try PostgresTestServer.psql("SELECT to_regclass('\(configuration.table)') IS NULL") == "t")
            #expect(publishedB.latest?.globalRevokedBefore == nil)
            #expect(publishedB.latest?.users["2"]?.revokedBefore == 1_714_564_800)
            let marker = try await storeB.changeMarker()

            // User 1 has no cutoff in the RP's table: only the global cutoff can reject the old token.
            let now = CutoffSyncService.systemNow()
            let oldTokenIAT = now - 10
            #expect(!rejects(publishedB.latest, user: "1", iat: oldTokenIAT))
            let api = AdminAPI(service: a.service)
            let answer = await api.handle(
                method: "POST", path: "/admin/revoke-all", body: Array("{\"at\":\(now - 2)}".utf8))
            #expect(answer.status == 200, "\(answer.json)")
            #expect(answer.json.contains("\"global_revoked_before\":\(now - 2)"), "\(answer.json)")
            #expect(answer.json.contains("\"changed\":true"), "\(answer.json)")
            #expect(rejects(publishedA.latest, user: "1", iat: oldTokenIAT))
            #expect(try PostgresTestServer.psql("SELECT revoked_before FROM \(global)") == "\(now - 2)")
            #expect(
                await eventually(timeout: .seconds(1)) { rejects(publishedB.latest, user: "1", iat: oldTokenIAT) },
                "B did not take the global cutoff within 1 s")
            // A token issued after the cutoff stays valid; the users' own cutoffs are still the RP's.
            #expect(!rejects(publishedB.latest, user: "1", iat: now))
            #expect(publishedB.latest?.users["2"]?.revokedBefore == 1_714_564_800)
            #expect(try await storeB.changeMarker() != marker)
            #expect(
                try await storeB.cutoffs(for: "1") == CutoffLookup(user: UserCutoffs(), globalRevokedBefore: now - 2))
            #expect(try await storeB.cutoffs(for: "not-a-number").globalRevokedBefore == now - 2)

            // Forward-only as in copy mode; the value already stored changes nothing.
            #expect(try await storeA.revokeAll(at: now - 2).changed == false)
            let backward = await expectStoreError(.cutoffWouldMoveBackward) {
                try await storeA.revokeAll(at: now - 100)
            }
            #expect(backward?.keptCutoff == now - 2)

            // A forced move back reaches B too (it bumps the force epoch, so B takes the store as it is).
            let forced = await api.handle(
                method: "POST", path: "/admin/revoke-all", body: Array("{\"at\":\(now - 100),\"force\":true}".utf8))
            #expect(forced.status == 200, "\(forced.json)")
            #expect(
                await eventually(timeout: .seconds(1)) { publishedB.latest?.globalRevokedBefore == now - 100 },
                "B did not take the forced global cutoff within 1 s")
            #expect(!rejects(publishedB.latest, user: "1", iat: oldTokenIAT))

            // The users' cutoffs stay read-only, with the message that says where to change them.
            let refused = await expectStoreError(.readOnlyStore) { try await storeA.passwordChanged(user: "1", at: 1) }
            #expect(refused?.message.contains(users) == true)
            await expectStoreError(.readOnlyStore) { try await storeA.disableMobileApps(user: "1", at: 1) }
            for action in ["password-changed", "disable-mobile-apps"] {
                let user = await api.handle(method: "POST", path: "/admin/users/1/\(action)", body: [])
                #expect(user.status == 409, "\(user.json)")
                #expect(user.json.contains("read_only_store") && user.json.contains(users), "\(user.json)")
            }
        }
    }

    @Test("RP-table mode: a role that may not create or use tokengate's global table is refused, naming the GRANT")
    func rpTableGlobalTablePrivileges() async throws {
        let users = try Self.makeRPUsersTable()
        let role = PostgresTestServer.uniqueName("tg_role")
        try PostgresTestServer.psql("CREATE ROLE \(role) LOGIN")
        defer {
            _ = try? PostgresTestServer.psql("DROP TABLE \(users); DROP OWNED BY \(role); DROP ROLE \(role)")
        }
        // PostgreSQL 15 and later: only the database owner may create tables in `public` (the test server is 15).
        try #require(
            try PostgresTestServer.psql("SELECT has_schema_privilege('\(role)', 'public', 'CREATE')") == "f")
        var configuration = try PostgresTestServer.configuration(rpTable: .init(table: users))
        configuration.user = role
        let global = configuration.table + "_global"

        try await withRunningStore(configuration) { store in
            // At the first call (the sync service's start: the gateway refuses to start), not at the first revoke-all.
            let refused = await expectStoreError(.invalidStoreConfiguration) { try await store.load() }
            let message = refused?.message ?? ""
            #expect(message.contains("may not create the table \(global)"), "\(message)")
            #expect(message.contains("GRANT CREATE ON SCHEMA public TO \(role)"), "\(message)")
            #expect(message.contains("rp_table"), "\(message)")
            await expectStoreError(.invalidStoreConfiguration) { try await store.revokeAll(at: 1) }

            // Granted: the next call creates the table, owned by the role, and the privilege may go again.
            try PostgresTestServer.psql("GRANT CREATE ON SCHEMA public TO \(role)")
            #expect(try await store.revokeAll(at: 5).changed)
            try PostgresTestServer.psql("REVOKE CREATE ON SCHEMA public FROM \(role)")
        }
        try await withRunningStore(configuration) { store in
            let loaded = try await store.load()
            #expect(loaded.globalRevokedBefore == 5)
        }

        // A global table made by another role, which this one may not read: the GRANT it needs.
        var other = try PostgresTestServer.configuration(rpTable: .init(table: users))
        try await withRunningStore(other) { store in
            _ = try await store.load()
        }
        defer { _ = try? PostgresTestServer.psql("DROP TABLE IF EXISTS \(other.table)_global") }
        other.user = role
        try await withRunningStore(other) { store in
            let refused = await expectStoreError(.invalidStoreConfiguration) { try await store.load() }
            #expect(
                refused?.message.contains("GRANT SELECT, UPDATE ON \(other.table)_global TO \(role)") == true,
                "\(refused?.message ?? "")")
        }

        // Read but not write (a read-only role for the gateways, on purpose): it starts, and the emergency switch
        // says which GRANT it lacks, as a configuration to fix (revoke exits 78), not a database that is down.
        try PostgresTestServer.psql("GRANT SELECT ON \(other.table)_global TO \(role); GRANT SELECT ON \(users) TO \(role)")
        try await withRunningStore(other) { store in
            _ = try await store.load()
            let refused = await expectStoreError(.invalidStoreConfiguration) { try await store.revokeAll(at: 9) }
            #expect(refused?.message.contains("may not write tokengate's cutoff tables") == true, "\(refused?.message ?? "")")
            #expect(refused?.message.contains("UPDATE ON \(other.table)_global") == true, "\(refused?.message ?? "")")
        }
    }

    @Test("copy mode refuses a global table without its cutoff table (made in RP-table mode, or the table dropped)")
    func copyModeRefusesGlobalTableAlone() async throws {
        let users = try Self.makeRPUsersTable()
        defer { _ = try? PostgresTestServer.psql("DROP TABLE \(users)") }
        var configuration = try PostgresTestServer.configuration(rpTable: .init(table: users))
        defer { _ = try? PostgresTestServer.psql("DROP TABLE IF EXISTS \(configuration.table)_global") }
        try await withRunningStore(configuration) { store in
            try await store.revokeAll(at: 7)
        }
        configuration.rpTable = nil
        try await withRunningStore(configuration) { store in
            let refused = await expectStoreError(.invalidStoreConfiguration) { try await store.load() }
            #expect(refused?.message.contains("refusing to start on an empty cutoff table") == true)
        }
    }
}

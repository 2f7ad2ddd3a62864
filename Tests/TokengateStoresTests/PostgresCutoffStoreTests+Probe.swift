//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateStores

/// `check-config --connect` (``PostgresCutoffStore/probe()``): what only the server can say, found before a start,
/// and nothing created or written while finding it.
extension PostgresCutoffStoreTests {
    @Test("probe: tables not there yet are reported, not created; once they are, a role that may read them passes")
    func probeChangesNothingAndReportsTheTables() async throws {
        let configuration = try PostgresTestServer.configuration()
        let global = configuration.table + "_global"
        defer { _ = try? PostgresTestServer.psql("DROP TABLE IF EXISTS \(configuration.table), \(global)") }
        try await withRunningStore(configuration) { store in
            let report = try await store.probe()
            #expect(report == .init(createsTables: true, missingWritePrivileges: []))
        }
        #expect(try PostgresTestServer.psql("SELECT to_regclass('\(global)') IS NULL") == "t", "probe created a table")
        try await withRunningStore(configuration) { store in
            _ = try await store.load()  // the first start creates them
        }
        try await withRunningStore(configuration) { store in
            let report = try await store.probe()
            #expect(report == .init(createsTables: false, missingWritePrivileges: []))
        }
    }

    @Test("probe: a role that may not create, read or write tokengate's tables is told which GRANT it needs")
    func probeNamesThePrivilegesARoleLacks() async throws {
        let role = PostgresTestServer.uniqueName("tg_role")
        try PostgresTestServer.psql("CREATE ROLE \(role) LOGIN")
        var configuration = try PostgresTestServer.configuration()
        let (users, global) = (configuration.table, configuration.table + "_global")
        defer {
            _ = try? PostgresTestServer.psql("DROP TABLE IF EXISTS \(users), \(global); DROP OWNED BY \(role); DROP ROLE \(role)")
        }
        try #require(try PostgresTestServer.psql("SELECT has_schema_privilege('\(role)', 'public', 'CREATE')") == "f")
        let owner = configuration
        configuration.user = role

        // No table, no CREATE: what `serve` would refuse at its first sync, said now; nothing created.
        try await withRunningStore(configuration) { store in
            let refused = await expectStoreError(.invalidStoreConfiguration) { try await store.probe() }
            #expect(refused?.message.contains("GRANT CREATE ON SCHEMA public TO \(role)") == true, "\(refused?.message ?? "")")
        }
        #expect(try PostgresTestServer.psql("SELECT to_regclass('\(global)') IS NULL") == "t")

        // Tables made by their owner, not readable by the role: named in the words `serve` would use.
        try await withRunningStore(owner) { store in _ = try await store.load() }
        try await withRunningStore(configuration) { store in
            let refused = await expectStoreError(.invalidStoreConfiguration) { try await store.probe() }
            #expect(refused?.message.contains("GRANT SELECT, UPDATE ON \(global) TO \(role)") == true, "\(refused?.message ?? "")")
        }

        // The global table readable, the cutoff table not: named.
        try PostgresTestServer.psql("GRANT SELECT ON \(global) TO \(role)")
        try await withRunningStore(configuration) { store in
            let refused = await expectStoreError(.invalidStoreConfiguration) { try await store.probe() }
            #expect(refused?.message.contains("may not read \(users), which the gateway reads; GRANT SELECT ON \(users) TO \(role)") == true, "\(refused?.message ?? "")")
        }

        // Readable, not writable (a read-only role for the gateways): it passes, and says what revoke will lack.
        try PostgresTestServer.psql("GRANT SELECT ON \(users), \(global) TO \(role)")
        try await withRunningStore(configuration) { store in
            let report = try await store.probe()
            #expect(!report.createsTables)
            #expect(
                report.missingWritePrivileges == [
                    "GRANT UPDATE ON \(global) TO \(role)", "GRANT INSERT ON \(users) TO \(role)",
                    "GRANT UPDATE ON \(users) TO \(role)",
                ])
        }
    }

    @Test("probe in rp_table mode: the RP table must be readable by the role, as the gateway reads it")
    func probeChecksTheRPTable() async throws {
        let users = PostgresTestServer.uniqueName("users")
        let role = PostgresTestServer.uniqueName("tg_role")
        try PostgresTestServer.psql(
            "CREATE TABLE \(users) (id bigint PRIMARY KEY, password_changed_at timestamptz); CREATE ROLE \(role) LOGIN")
        let owner = try PostgresTestServer.configuration(rpTable: .init(table: users))
        let global = owner.table + "_global"
        defer {
            _ = try? PostgresTestServer.psql(
                "DROP TABLE IF EXISTS \(users), \(global); DROP OWNED BY \(role); DROP ROLE \(role)")
        }
        var configuration = owner
        configuration.user = role
        // The first run, before the global table exists (the role may create it): the RP table is checked all
        // the same (a review found this path returned before it).
        try PostgresTestServer.psql("GRANT CREATE ON SCHEMA public TO \(role)")
        try await withRunningStore(configuration) { store in
            let refused = await expectStoreError(.invalidStoreConfiguration) { try await store.probe() }
            #expect(refused?.message.contains("GRANT SELECT ON \(users) TO \(role)") == true, "\(refused?.message ?? "")")
        }
        try PostgresTestServer.psql("REVOKE CREATE ON SCHEMA public FROM \(role)")
        try await withRunningStore(owner) { store in _ = try await store.load() }
        try PostgresTestServer.psql("GRANT SELECT, UPDATE ON \(global) TO \(role)")
        try await withRunningStore(configuration) { store in
            let refused = await expectStoreError(.invalidStoreConfiguration) { try await store.probe() }
            #expect(refused?.message.contains("GRANT SELECT ON \(users) TO \(role)") == true, "\(refused?.message ?? "")")
        }
        // SELECT on the columns the gateway reads is enough, as it is for `serve` (a table-level check would
        // have refused it).
        try PostgresTestServer.psql("GRANT SELECT (id, password_changed_at) ON \(users) TO \(role)")
        try await withRunningStore(configuration) { store in
            let report = try await store.probe()
            #expect(report == .init(createsTables: false, missingWritePrivileges: []))
        }
        try PostgresTestServer.psql("GRANT SELECT ON \(users) TO \(role)")
        try await withRunningStore(configuration) { store in
            let report = try await store.probe()
            #expect(report == .init(createsTables: false, missingWritePrivileges: []))
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import Testing
import TokengateAdmin
import TokengateTestSupport
import TokengateTokens

@testable import TokengateStores

/// The reviewer's role with SELECT only, through the admin API: a configuration to fix, not an outage.
extension PostgresCutoffStoreTests {
    @Test("a role that may read but not write: the admin API answers 500 store_write_refused with the GRANT; /readyz stays ready")
    func aReadOnlyRoleIsAConfigurationProblemForTheAdminAPI() async throws {
        let role = PostgresTestServer.uniqueName("tg_reader")
        try PostgresTestServer.psql("CREATE ROLE \(role) LOGIN")
        var configuration = try PostgresTestServer.configuration()
        let (users, global) = (configuration.table, configuration.table + "_global")
        defer {
            _ = try? PostgresTestServer.psql("DROP TABLE IF EXISTS \(users), \(global); DROP OWNED BY \(role); DROP ROLE \(role)")
        }
        try await withRunningStore(configuration) { store in _ = try await store.load() }  // The owner creates them.
        try PostgresTestServer.psql("GRANT SELECT ON \(users), \(global) TO \(role)")
        configuration.user = role

        let lines = RecordedLogLines()
        try await withRunningStore(configuration) { store in
            let service = CutoffSyncService(store: store, logger: lines.logger(), publish: { _ in })
            try await service.start()
            let api = AdminAPI(service: service, logger: lines.logger())
            for _ in 0..<2 {
                let response = await api.handle(method: "POST", path: "/admin/users/alice/password-changed", body: [])
                #expect(response.status == 500, "\(response.json)")
                #expect(response.json.contains("\"error\":\"store_write_refused\""), "\(response.json)")
                #expect(response.json.contains("GRANT SELECT, INSERT, UPDATE ON \(users), \(global)"), "\(response.json)")
            }
            #expect(await service.lastError == nil, "/readyz carries no store_error")
            #expect(await !service.isStale(now: CutoffSyncService.systemNow()))
            #expect(await api.handle(method: "GET", path: "/admin/users/alice", body: []).status == 200)
        }
        let refusals = lines.all.filter { $0.message.hasPrefix("the cutoff store refuses writes") }
        #expect(refusals.count == 1, "once: \(lines.all)")
        #expect(!lines.all.contains { $0.message.hasPrefix("cutoff store write failed") }, "\(lines.all)")
    }
}

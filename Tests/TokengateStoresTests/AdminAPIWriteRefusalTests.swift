//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import SQLiteNIO
import Testing
import TokengateAdmin
import TokengateTestSupport
import TokengateTokens

@testable import TokengateStores

/// A store that reads well and refuses every write for its configuration, as a PostgreSQL role with SELECT only
/// does (SQLSTATE 42501).
private struct WriteRefusingStore: CutoffStore {
    static let refusal = CutoffStoreError(
        code: .invalidStoreConfiguration,
        message: "postgres tokengate@db/tokengate: the configured role may not write tokengate's cutoff tables "
            + "(permission denied, SQLSTATE 42501); GRANT SELECT, INSERT, UPDATE ON cutoffs, cutoffs_global to it"
    )

    var storeDescription: String { "refusing" }
    func load() async throws -> CutoffTable { CutoffTable(users: ["alice": UserCutoffs(revokedBefore: 100)]) }
    func changeMarker() async throws -> String? { "1" }
    func lookup(user: String) async throws -> CutoffLookup {
        CutoffLookup(user: UserCutoffs(revokedBefore: 100), globalRevokedBefore: nil)
    }
    func apply(_ write: CutoffWrite) async throws -> CutoffWriteResult { throw Self.refusal }
    func close() async throws {}
}

/// A write the store's configuration refuses is answered as such, once logged as a configuration problem, and is
/// not an outage. Before, the admin API answered 503 `store_unavailable` ("retry"), the service logged "cutoff
/// store write failed … recovered", and `/readyz` carried `store_error`.
@Suite("Admin API: writes the store's configuration refuses")
struct AdminAPIWriteRefusalTests {
    @Test("answered 500 store_write_refused with the remedy, logged once, and the store stays healthy")
    func aRefusedWriteIsAConfigurationProblem() async throws {
        let lines = RecordedLogLines()
        let service = CutoffSyncService(
            store: WriteRefusingStore(), logger: lines.logger(), now: { 1_714_564_800 }, publish: { _ in })
        try await service.start()
        let api = AdminAPI(service: service, logger: lines.logger())

        for path in ["/admin/users/bob/password-changed", "/admin/users/bob/disable-mobile-apps", "/admin/revoke-all"] {
            let response = await api.handle(method: "POST", path: path, body: [])
            #expect(response.status == 500, "\(path): \(response.json)")
            let body = try #require(try JSONSerialization.jsonObject(with: Data(response.json.utf8)) as? [String: Any])
            #expect(body["error"] as? String == "store_write_refused")
            #expect((body["error_description"] as? String)?.contains("GRANT SELECT, INSERT, UPDATE") == true, "\(body)")
        }
        #expect(await service.lastError == nil, "/readyz has no store_error for it")
        #expect(await !service.isStale(now: 1_714_564_800))

        let refusals = lines.all.filter { $0.message.hasPrefix("the cutoff store refuses writes") }
        #expect(refusals.count == 1, "logged once: \(lines.all)")
        #expect(refusals.first?.level == .error)
        #expect(refusals.first?.metadata["error"]?.contains("SQLSTATE 42501") == true)
        #expect(!lines.all.contains { $0.message.contains("write failed") || $0.message.contains("recovered") }, "\(lines.all)")
        let audit = lines.all.filter { $0.message == "cutoff write refused" }
        #expect(audit.count == 3 && audit.allSatisfy { $0.metadata["error"] == "store_write_refused" }, "\(audit)")

        // Reads go on.
        let lookup = await api.handle(method: "GET", path: "/admin/users/alice", body: [])
        #expect(lookup.status == 200, "\(lookup.json)")
    }

    @Test("a lookup the store's configuration refuses is still answered as the store being unavailable")
    func aRefusedLookupIsUnavailable() async throws {
        struct LookupRefusingStore: CutoffStore {
            var storeDescription: String { "refusing" }
            func load() async throws -> CutoffTable { CutoffTable() }
            func changeMarker() async throws -> String? { "1" }
            func lookup(user: String) async throws -> CutoffLookup { throw WriteRefusingStore.refusal }
            func apply(_ write: CutoffWrite) async throws -> CutoffWriteResult { throw WriteRefusingStore.refusal }
            func close() async throws {}
        }
        let service = CutoffSyncService(store: LookupRefusingStore(), now: { 1_714_564_800 }, publish: { _ in })
        try await service.start()
        let response = await AdminAPI(service: service).handle(method: "GET", path: "/admin/users/alice", body: [])
        #expect(response.status == 503 && response.json.contains("store_unavailable"), "\(response.json)")
    }

    @Test("SQLite: a database this process may not write is a configuration problem; a file moved while open is not")
    func sqliteReadOnlyIsConfiguration() {
        for reason in [SQLiteError.Reason.readOnly, .readonlyDirectory, .permission] {
            let error = SQLiteCutoffStore.storeError(reason: reason, message: "attempt to write a readonly database", description: "sqlite /x.db")
            #expect(error.code == .invalidStoreConfiguration, "\(reason)")
            #expect(error.message.contains("write access"))
        }
        for reason in [SQLiteError.Reason.readonlyBackingMoved, .readonlyInRecovery, .busy, .ioError] {
            #expect(SQLiteCutoffStore.storeError(reason: reason, message: "m", description: "d").code == .storeUnavailable, "\(reason)")
        }
    }
}

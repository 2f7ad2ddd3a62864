//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateStores

/// The libpq layer against the real server: connections the server ends. In the serialized suite, as they end
/// every tokengate session of the test database.
extension PostgresCutoffStoreTests {
    /// Ends the server sessions of `application` (`tokengate` pooled, `tokengate-listen`) and waits until those
    /// sessions are gone (by pid: the LISTEN connection comes back under a new one within milliseconds).
    static func terminate(application: String) async throws {
        let pids = try PostgresTestServer.psql(
            """
            WITH ended AS (
                SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE application_name = '\(application)' AND datname = current_database()
            )
            SELECT coalesce(string_agg(pid::text, ','), '') FROM ended
            """)
        try #require(!pids.isEmpty, "no \(application) session to end")
        let gone = try await eventually(timeout: .seconds(5)) {
            try PostgresTestServer.psql("SELECT count(*) FROM pg_stat_activity WHERE pid IN (\(pids))") == "0"
        }
        #expect(gone)
    }

    @Test("pooled connections ended by the server are replaced without a failed call")
    func pooledConnectionReplaced() async throws {
        let configuration = try PostgresTestServer.configuration()
        try await withRunningStore(configuration) { store in
            try await store.passwordChanged(user: "frank", at: 10)
            try await Self.terminate(application: "tokengate")
            #expect(try await store.load().users["frank"]?.revokedBefore == 10)
            try await store.passwordChanged(user: "frank", at: 20)
            #expect(try await store.cutoffs(for: "frank").user.revokedBefore == 20)
        }
    }

    @Test("the LISTEN connection ended by the server comes back and asks for a full reload")
    func listenConnectionReconnects() async throws {
        let configuration = try PostgresTestServer.configuration()
        try await withRunningStore(configuration) { store in
            _ = try await store.load()
            var signals = try #require(store.changeSignals).makeAsyncIterator()
            #expect(await eventually(timeout: .seconds(5)) { store.isListening })
            #expect(await signals.next() == CutoffChangeSignal(user: nil))
            try await Self.terminate(application: "tokengate-listen")
            // Re-established: a signal for the whole table, as notifications may have been missed meanwhile.
            #expect(await signals.next() == CutoffChangeSignal(user: nil))
            #expect(await eventually(timeout: .seconds(5)) { store.isListening })
            try await store.passwordChanged(user: "gina", at: 10)
            #expect(await signals.next() == CutoffChangeSignal(user: "gina"))
        }
    }
}

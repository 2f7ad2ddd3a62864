//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing

@testable import TokengateStores

/// The one mapping of SQLSTATE 42501 that the schema check, the probe and the writes share, without a server (the
/// PostgreSQL store tests see each of them refused by a real server).
@Suite("PostgreSQL permission denied")
struct PostgresPermissionDeniedTests {
    @Test func onlyAPermissionDeniedBecomesTheConfigurationError() throws {
        let denied = PostgresFailure(.server, "the statement failed (SQLSTATE 42501)", detail: "permission denied", sqlState: "42501")
        #expect(throws: CutoffStoreError(code: .invalidStoreConfiguration, message: "")) {
            try PostgresPermissionDenied.mapping { throw denied } to: {
                PostgresPermissionDenied.error("postgres store", refused: "the role r may not read t", remedy: "GRANT SELECT ON t TO r")
            }
        }
        do {
            try PostgresPermissionDenied.mapping { throw denied } to: {
                PostgresPermissionDenied.error("postgres store", refused: "the role r may not read t", remedy: "GRANT SELECT ON t TO r")
            }
        } catch let error as CutoffStoreError {
            #expect(error.message == "postgres store: the role r may not read t (permission denied, SQLSTATE 42501); GRANT SELECT ON t TO r")
        }
        let other = PostgresFailure(.server, "the statement failed (SQLSTATE 42P01)", sqlState: "42P01")
        do {
            try PostgresPermissionDenied.mapping { throw other } to: { Issue.record("not a refusal"); return CutoffStoreError(code: .readOnlyStore, message: "") }
            Issue.record("the error was swallowed")
        } catch let error as PostgresFailure {
            #expect(error.sqlState == "42P01", "passed on unchanged")
        }
        #expect(try PostgresPermissionDenied.mapping { 7 } to: { CutoffStoreError(code: .readOnlyStore, message: "") } == 7)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing
import TokengateTestSupport
import TokengateTokens

@testable import TokengateStores

/// Password rotation against the real server: the test server asks the members of `tokengate_password_login` for
/// their password (scram-sha-256, see `scripts/postgres-test-server.sh`), so a store connecting as such a role
/// gets in only with the password the file holds at that moment.
extension PostgresCutoffStoreTests {
    /// Runs `body` with a fresh role that logs in with `password` and may create the store's tables; the role,
    /// its sessions and what it owns are dropped afterwards.
    static func withPasswordRole(
        _ password: String,
        _ body: (String) async throws -> Void
    ) async throws {
        let role = PostgresTestServer.uniqueName("tgpw")
        try PostgresTestServer.psql(
            """
            DO $$ BEGIN
                CREATE ROLE tokengate_password_login NOLOGIN;
            EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
            END $$;
            CREATE ROLE \(role) LOGIN PASSWORD '\(password)' IN ROLE tokengate_password_login;
            GRANT CREATE ON SCHEMA public TO \(role);
            """)
        defer {
            _ = try? PostgresTestServer.psql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '\(role)'")
            _ = try? PostgresTestServer.psql("DROP OWNED BY \(role); DROP ROLE \(role)")
        }
        try await body(role)
    }

    /// Ends every server session of `role` (pooled and LISTEN) and waits until they are gone.
    static func terminate(role: String) async throws {
        let pids = try PostgresTestServer.psql(
            """
            WITH ended AS (
                SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '\(role)'
            )
            SELECT coalesce(string_agg(pid::text, ','), '') FROM ended
            """)
        try #require(!pids.isEmpty, "no session of \(role) to end")
        let gone = try await eventually(timeout: .seconds(5)) {
            try PostgresTestServer.psql("SELECT count(*) FROM pg_stat_activity WHERE pid IN (\(pids))") == "0"
        }
        #expect(gone)
    }

    /// Replaces the file the way a rotation does (the kubelet swaps a secret's directory, an agent renames a new
    /// file into place): never a half-written file.
    static func replace(_ path: String, with text: String) throws {
        let temporary = path + ".new"
        try writeFile(temporary, text)
        #expect(rename(temporary, path) == 0)
    }

    @Test("a rotated password is read from the password file at the next connection, without restart or reload")
    func rotatedPasswordFile() async throws {
        let directory = try TemporaryDirectory()
        let passwordFile = directory.file("postgres.password")
        try await Self.withPasswordRole("first-secret") { role in
            var configuration = try PostgresTestServer.configuration()
            configuration.user = role
            configuration.passwordFile = passwordFile

            // The server does check this role's password; otherwise the rest proves nothing.
            try writeFile(passwordFile, "not-the-password\n")
            try await withRunningStore(configuration) { store in
                await expectStoreError(.storeUnavailable) { try await store.load() }
            }

            try writeFile(passwordFile, "first-secret\n")
            let lines = RecordedLogLines()
            try await withRunningStore(configuration, logger: lines.logger()) { store in
                try await store.passwordChanged(user: "hana", at: 10)
                #expect(await eventually(timeout: .seconds(5)) { store.isListening })

                // The rotation as an operator does it: the role's password, then the secret file. The open
                // sessions survive a password change; ending them (as a server restart would) forces reconnects.
                try PostgresTestServer.psql("ALTER ROLE \(role) PASSWORD 'second-secret'")
                try Self.replace(passwordFile, with: "second-secret\n")
                try await Self.terminate(role: role)
                #expect(try await store.load().users["hana"]?.revokedBefore == 10)
                try await store.passwordChanged(user: "hana", at: 20)
                #expect(try await store.cutoffs(for: "hana").user.revokedBefore == 20)
                #expect(
                    await eventually(timeout: .seconds(5)) { store.isListening },
                    "the LISTEN connection must come back with the new password too")

                // A file that cannot be read at a reconnect: the store is unavailable (the caller keeps its last
                // snapshot), and the error and the log name the file, never the password.
                try FileManager.default.removeItem(atPath: passwordFile)
                try await Self.terminate(role: role)
                let error = await expectStoreError(.storeUnavailable) { try await store.load() }
                #expect(error?.message.contains("cannot read the password file \(passwordFile)") == true, "\(error.map { "\($0)" } ?? "")")
                #expect(error?.message.contains("secret") == false)
                let logged = lines.all.filter { $0.message.contains("password file") }
                #expect(logged.count == 1, "once per distinct reason, not at every attempt: \(logged)")
                #expect(logged.first?.level == .error)
                #expect(logged.first?.metadata["password_file"] == passwordFile)
                #expect(logged.first?.metadata["reason"] == "No such file or directory")
                #expect(!lines.all.contains { $0.text.contains("secret") }, "a password was logged")

                // Readable again: the next call connects, without anything else being done.
                try Self.replace(passwordFile, with: "second-secret")
                #expect(try await store.load().users["hana"]?.revokedBefore == 20)
                #expect(await eventually(timeout: .seconds(5)) { store.isListening })
            }
        }
    }
}

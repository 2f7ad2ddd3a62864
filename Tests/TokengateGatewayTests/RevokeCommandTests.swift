//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTLS
import TokengateTestSupport
import TokengateTokens

/// The `tokengate revoke` binary, run the way a script runs it: it never creates the SQLite store, its exit
/// status tells a retryable failure from a permanent one, and it says what the write did.
@Suite(.serialized)
struct RevokeCommandTests {
    /// A directory with a gateway configuration whose store is `cutoffs` (a SQLite file in `data/` by default),
    /// and the files `serve` needs to start.
    private struct Setup {
        let directory: String
        /// The TLS listener `serve` would open, and a signer of tokens it accepts.
        let port: Int
        let signer: TokenSigner
        var path: String { self.directory + "/tokengate.yaml" }
        var database: String { self.directory + "/data/cutoffs.db" }

        init(cutoffs: String = "cutoffs: { sqlite: data/cutoffs.db }") throws {
            self.directory = NSTemporaryDirectory() + "tokengate-revoke-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: self.directory + "/data", withIntermediateDirectories: true)
            let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost"])
            try certificate.certificatePEM.write(toFile: self.directory + "/cert.pem", atomically: true, encoding: .utf8)
            try certificate.privateKeyPEM.write(toFile: self.directory + "/key.pem", atomically: true, encoding: .utf8)
            let keys = try KeyGenerator.generate(algorithm: .edDSA, keyID: "test-only")
            try keys.publicJWKS.write(toFile: self.directory + "/public.jwks", atomically: true, encoding: .utf8)
            self.signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
            self.port = try GatewayIntegrationTests.unusedPort()
            try "{}".write(toFile: self.directory + "/cutoffs.json", atomically: true, encoding: .utf8)
            let yaml = """
                listen:
                  - address: 127.0.0.1:\(self.port)
                    tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
                keys: [ { jwks: public.jwks } ]
                \(cutoffs)
                upstreams:
                  api: { targets: [ "http://127.0.0.1:9" ] }
                routes:
                  - { path_prefix: /, upstream: api, accept: [api] }
                """
            try yaml.write(toFile: self.path, atomically: true, encoding: .utf8)
        }

        func revoke(_ arguments: [String]) throws -> ChildProcess.Result {
            try ChildProcess.run("/usr/bin/timeout", ["60", ServeCommandTests.binary, "revoke", "--config", self.path] + arguments)
        }

        /// Starts `serve` on this configuration, its output to `output` (or discarded); the caller terminates it.
        func startServe(output: String? = nil) throws -> Process {
            let serve = Process()
            serve.executableURL = URL(fileURLWithPath: ServeCommandTests.binary)
            serve.arguments = ["serve", "--config", self.path]
            if let output {
                _ = FileManager.default.createFile(atPath: output, contents: nil)
            }
            serve.standardOutput = FileHandle(forWritingAtPath: output ?? "/dev/null")
            serve.standardError = FileHandle(forWritingAtPath: output ?? "/dev/null")
            try serve.run()
            return serve
        }

        /// The gateway's status for a token of `user` issued at `iat`: 502 when accepted (the upstream's port is
        /// closed), 401 when rejected.
        func status(user: String, iat: Int64) throws -> Int {
            let token = try self.signer.mint(
                TokenClaims(subject: user, issuedAt: iat, apiOnly: true, expiresAt: nil, notBefore: nil, issuer: nil, audience: nil))
            return try Curl.run(
                ["--max-time", "2", "-H", "Authorization: Bearer \(token)", "https://localhost:\(self.port)/"],
                caFile: self.directory + "/cert.pem"
            ).status
        }

        /// Whether the gateway answers `expected` for `user`'s token within 10 s.
        func eventually(_ expected: Int, user: String, iat: Int64) async throws -> Bool {
            for _ in 0..<100 {
                if (try? self.status(user: user, iat: iat)) == expected {
                    return true
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            return false
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: self.directory)
        }

        /// Creates the SQLite store as an operator does: `serve`'s first start (revoke never creates it, and an
        /// empty file is not a store).
        func createStoreByServing() async throws {
            let serve = try self.startServe()
            for _ in 0..<100 where !FileManager.default.fileExists(atPath: self.database) {
                try await Task.sleep(for: .milliseconds(100))
            }
            serve.terminate()
            serve.waitUntilExit()
            try #require(FileManager.default.fileExists(atPath: self.database), "serve did not create the store")
        }
    }

    private static func requireBinary() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
    }

    /// A SQLite path with nothing there (a wrong mount, a database moved away) is an error naming the path and
    /// who creates the file; nothing is created. Before, revoke created a new, empty store and reported
    /// success, and a gateway whose file had been moved away then took that empty store for its own.
    /// `check-config` passes the same configuration, and `serve` creates the store at its first start, after
    /// which revoke writes to it.
    @Test func neverCreatesTheSQLiteStoreThatServeCreatesAtItsFirstStart() async throws {
        try Self.requireBinary()
        let setup = try Setup()
        defer { setup.remove() }

        let missing = try setup.revoke(["--user", "mallory"])
        #expect(missing.status == 69, "\(missing.stdout) \(missing.stderr)")
        #expect(missing.stderr.contains(setup.database) && missing.stderr.contains("does not exist"), "\(missing.stderr)")
        #expect(missing.stderr.contains("`tokengate serve`") && missing.stderr.contains("first start"), "\(missing.stderr)")
        #expect(missing.stderr.contains("volume"), "\(missing.stderr)")
        #expect(!missing.stdout.contains("revoked"), "\(missing.stdout)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: setup.directory + "/data") == [], "nothing created")

        let check = try ChildProcess.run("/usr/bin/timeout", ["60", ServeCommandTests.binary, "check-config", setup.path])
        #expect(check.status == 0, "check-config agrees with serve, which creates the file: \(check.stderr)")

        let serve = try setup.startServe()
        for _ in 0..<100 where !FileManager.default.fileExists(atPath: setup.database) {
            try await Task.sleep(for: .milliseconds(100))
        }
        serve.terminate()
        serve.waitUntilExit()
        #expect(FileManager.default.fileExists(atPath: setup.database), "serve creates the store at its first start")

        let written = try setup.revoke(["--user", "mallory", "--at", "2000"])
        #expect(written.status == 0, "\(written.stdout) \(written.stderr)")
        #expect(written.stdout.contains("revoked tokens of user mallory issued before 2000"), "\(written.stdout)")
    }

    /// The reviewer's `sqlite_walrm_cli.sh`: the SQLite store's `-wal` and `-shm` files removed while the gateway
    /// runs, then `tokengate revoke`. Before, revoke exited 0 and the gateway never saw the revocation (it read the
    /// unlinked files until a restart). A revoke with the files in place makes the gateway reopen nothing.
    @Test func aRevokeAfterTheWALFilesWereRemovedReachesTheRunningGateway() async throws {
        try Self.requireBinary()
        let setup = try Setup()
        defer { setup.remove() }
        let output = setup.directory + "/serve.log"
        let serve = try setup.startServe(output: output)
        defer {
            serve.terminate()
            serve.waitUntilExit()
        }
        let now = Int64(Date().timeIntervalSince1970)
        try #require(try await setup.eventually(502, user: "bob", iat: now - 10), "serve did not come up")

        let carol = try setup.revoke(["--user", "carol"])
        #expect(carol.status == 0, "\(carol.stdout) \(carol.stderr)")
        #expect(try await setup.eventually(401, user: "carol", iat: now - 10))
        func reopenWarnings() -> Int {
            ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n")
                .count { $0.contains("-wal or -shm file was removed or replaced") }
        }
        #expect(reopenWarnings() == 0, "another process opening and closing the database is not a change")

        try FileManager.default.removeItem(atPath: setup.database + "-wal")
        try FileManager.default.removeItem(atPath: setup.database + "-shm")
        let bob = try setup.revoke(["--user", "bob"])
        #expect(bob.status == 0, "\(bob.stdout) \(bob.stderr)")
        #expect(try await setup.eventually(401, user: "bob", iat: now - 10), "the running gateway never took the revocation")
        #expect(reopenWarnings() == 1, "\((try? String(contentsOfFile: output, encoding: .utf8)) ?? "")")
        #expect(try setup.status(user: "carol", iat: now - 10) == 401)
        // Issued after the revocation by the clock now (`now` is from before the revokes, which may have taken
        // longer than a second on a busy machine, so `now + 1` could fall before bob's cutoff).
        let afterRevocation = Int64(Date().timeIntervalSince1970) + 1
        #expect(try setup.status(user: "bob", iat: afterRevocation) == 502, "a token issued after the cutoff passes")
    }

    /// Each kind of failure has its own status: 64 usage, 65 a cutoff that would move backward, 69 a store that
    /// cannot be used as it is, 75 a store that did not answer (retry), 78 a configuration that cannot be used.
    /// Before, every one exited 2.
    @Test func exitStatusesTellUsageDataUnavailableTemporaryAndConfigurationApart() async throws {
        try Self.requireBinary()
        let setup = try Setup()
        defer { setup.remove() }
        // An empty file is not a store (it lost its content, or was never one): refused, and left empty. Before,
        // revoke gave it a schema and wrote into it.
        #expect(FileManager.default.createFile(atPath: setup.database, contents: nil))
        let empty = try setup.revoke(["--user", "alice"])
        #expect(empty.status == 69, "\(empty.stdout) \(empty.stderr)")
        #expect(empty.stderr.contains("\(setup.database) is empty (0 bytes)"), "\(empty.stderr)")
        #expect(try FileManager.default.attributesOfItem(atPath: setup.database)[.size] as? Int == 0)
        try FileManager.default.removeItem(atPath: setup.database)
        try await setup.createStoreByServing()

        let usage: [[String]] = [
            [], ["--user", "a", "--all"], ["--user", "a", "--bogus"], ["--user", "a", "--at", "yesterday"],
            ["--user", "a", "--at", "\(Int64(Date().timeIntervalSince1970) + 3600)"], ["--user", ""],
        ]
        for arguments in usage {
            let result = try setup.revoke(arguments)
            #expect(result.status == 64, "\(arguments): \(result.stdout) \(result.stderr)")
        }

        #expect(try setup.revoke(["--user", "alice", "--at", "2000"]).status == 0)
        let backward = try setup.revoke(["--user", "alice", "--at", "1000"])
        #expect(backward.status == 65, "\(backward.stdout) \(backward.stderr)")
        #expect(backward.stderr.contains("cutoff_would_move_backward"), "\(backward.stderr)")

        try FileManager.default.removeItem(atPath: setup.database)
        try "garbage".write(toFile: setup.database, atomically: true, encoding: .utf8)
        let garbage = try setup.revoke(["--user", "alice"])
        #expect(garbage.status == 69, "\(garbage.stdout) \(garbage.stderr)")
        #expect(garbage.stderr.contains("is not a SQLite database"), "\(garbage.stderr)")

        let unreadable = try ChildProcess.run(
            "/usr/bin/timeout", ["60", ServeCommandTests.binary, "revoke", "--config", setup.directory + "/none.yaml", "--user", "a"])
        #expect(unreadable.status == 78, "\(unreadable.stdout) \(unreadable.stderr)")

        let json = try Setup(cutoffs: "cutoffs: { file: cutoffs.json }")
        defer { json.remove() }
        let readOnly = try json.revoke(["--user", "alice"])
        #expect(readOnly.status == 78, "\(readOnly.stdout) \(readOnly.stderr)")
        #expect(readOnly.stderr.contains("read-only"), "\(readOnly.stderr)")
    }

    /// A PostgreSQL store that does not answer is a temporary failure (75), and nothing about LISTEN is said.
    /// Before, it exited 2, and most runs printed "LISTEN connection lost; … changes arrive by polling
    /// meanwhile" from the gateway's LISTEN loop (``writesThroughPostgresWithoutALISTENConnection()`` shows the
    /// connection itself is gone).
    @Test func anUnreachablePostgresStoreIsATemporaryFailure() throws {
        try Self.requireBinary()
        let port = try GatewayIntegrationTests.unusedPort()
        let setup = try Setup(cutoffs: "cutoffs: { postgres: \"postgres://tokengate@127.0.0.1:\(port)/tokengate?sslmode=disable\" }")
        defer { setup.remove() }
        for _ in 0..<3 {  // the LISTEN thread raced the exit: several runs, so that one would have said it
            let result = try setup.revoke(["--user", "alice"])
            #expect(result.status == 75, "\(result.stdout) \(result.stderr)")
            #expect(result.stderr.contains("store_unavailable"), "\(result.stderr)")
            #expect(!(result.stdout + result.stderr).contains("LISTEN"), "\(result.stdout) \(result.stderr)")
        }
    }

    /// With a real PostgreSQL server (`TOKENGATE_TEST_POSTGRES_URL`): the write goes through on a pooled
    /// connection alone. While it waits for a lock another session holds, the server shows revoke's connection
    /// and no `tokengate-listen` one (the application name of the LISTEN connection); before, it showed both.
    @Test(.enabled(if: Self.postgresURL != nil))
    func writesThroughPostgresWithoutALISTENConnection() async throws {
        try Self.requireBinary()
        let url = try #require(Self.postgresURL)
        let table = "tg_revoke_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let setup = try Setup(cutoffs: "cutoffs: { postgres: \"\(url)\", table: \(table), channel: \(table) }")
        defer { setup.remove() }
        let first = try setup.revoke(["--user", "alice", "--at", "2000"])
        #expect(first.status == 0, "\(first.stdout) \(first.stderr)")
        #expect(first.stdout.contains("revoked tokens of user alice issued before 2000"), "\(first.stdout)")

        // Another session locks the table, so the next revoke stays connected, waiting, long enough to look.
        let locker = Process()
        locker.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        locker.arguments = [
            "psql", url, "-X", "-q", "-c", "BEGIN; LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(30);",
        ]
        locker.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        locker.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try locker.run()
        defer {
            if locker.isRunning { locker.terminate() }
            locker.waitUntilExit()
        }
        let locked = "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            + "WHERE c.relname = '\(table)' AND l.mode = 'AccessExclusiveLock' AND l.granted"
        #expect(try await Self.poll(url, locked, until: { $0 == "1" }), "the table was not locked")

        let revoke = Process()
        revoke.executableURL = URL(fileURLWithPath: ServeCommandTests.binary)
        revoke.arguments = ["revoke", "--config", setup.path, "--user", "alice", "--at", "2500"]
        revoke.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        revoke.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try revoke.run()
        let waiting = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tokengate' AND wait_event_type = 'Lock'"
        #expect(try await Self.poll(url, waiting, until: { $0 == "1" }), "revoke never waited for the lock")
        let listening = try Self.psql(url, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tokengate-listen'")
        #expect(listening == "0", "revoke must not open a LISTEN connection")
        // Ends the locking session on the server (psql's own end would leave its pg_sleep running), well within
        // revoke's 5 s operation timeout: the waiting write then goes through.
        try Self.psql(
            url,
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                + "WHERE c.relname = '\(table)' AND l.mode = 'AccessExclusiveLock' AND l.granted"
        )
        revoke.waitUntilExit()
        #expect(revoke.terminationStatus == 0, "the write goes through once the lock is released")

        let back = try setup.revoke(["--user", "alice", "--at", "1000", "--force"])
        #expect(back.status == 0, "\(back.stdout) \(back.stderr)")
        #expect(back.stdout.contains("moved the cutoff of user alice back from 2"), "\(back.stdout)")
        #expect(!(back.stdout + back.stderr).contains("LISTEN"), "\(back.stdout) \(back.stderr)")
    }

    /// PostgreSQL in `rp_table` mode (the users' cutoffs are the website's own table): `revoke --all` writes
    /// tokengate's own global cutoff, and a running `serve` then rejects an older token of a user whose row has no
    /// cutoff, accepts a newer one, and accepts the older one again once `--force` moved the cutoff back. A user's
    /// cutoff is still refused (78), naming the RP's table. Before, `--all` exited 78 as well: the mode had no
    /// global cutoff at all.
    @Test(.enabled(if: Self.postgresURL != nil))
    func revokeAllInRPTableModeIsEnforcedByARunningGateway() async throws {
        try Self.requireBinary()
        let url = try #require(Self.postgresURL)
        let suffix = UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let table = "tg_rp_\(suffix)"
        let users = "users_\(suffix)"
        try Self.psql(
            url, "CREATE TABLE \(users) (id bigint PRIMARY KEY, password_changed_at timestamptz); INSERT INTO \(users) VALUES (1, NULL)")
        defer { _ = try? Self.psql(url, "DROP TABLE \(users); DROP TABLE IF EXISTS \(table)_global; DROP FUNCTION IF EXISTS \(table)_global_changed()") }
        let setup = try Setup(
            cutoffs: "cutoffs: { postgres: \"\(url)\", table: \(table), channel: \(table), "
                + "rp_table: { table: \(users), user_column: id, password_changed_column: password_changed_at } }")
        defer { setup.remove() }

        let serve = try setup.startServe()
        defer {
            serve.terminate()
            serve.waitUntilExit()
        }
        /// The gateway's status for a token of user 1 issued at `iat`: 502 when accepted (the upstream's port is
        /// closed), 401 when rejected.
        func status(iat: Int64) throws -> Int {
            let token = try setup.signer.mint(
                TokenClaims(subject: "1", issuedAt: iat, apiOnly: true, expiresAt: nil, notBefore: nil, issuer: nil, audience: nil))
            return try Curl.run(
                ["--max-time", "2", "-H", "Authorization: Bearer \(token)", "https://localhost:\(setup.port)/"],
                caFile: setup.directory + "/cert.pem"
            ).status
        }
        func eventually(_ expected: Int, iat: Int64) async throws -> Bool {
            for _ in 0..<100 {
                if (try? status(iat: iat)) == expected {
                    return true
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            return false
        }
        let now = Int64(Date().timeIntervalSince1970)
        try #require(try await eventually(502, iat: now - 10), "serve did not come up, or rejected a token without a cutoff")

        let all = try setup.revoke(["--all", "--at", "\(now - 2)"])
        #expect(all.status == 0, "\(all.stdout) \(all.stderr)")
        #expect(all.stdout.contains("revoked tokens of all users issued before \(now - 2)"), "\(all.stdout)")
        #expect(try Self.psql(url, "SELECT revoked_before FROM \(table)_global") == "\(now - 2)")
        #expect(try await eventually(401, iat: now - 10), "the running gateway did not take the global cutoff")
        #expect(try status(iat: now) == 502, "a token issued after the cutoff stays valid")

        let user = try setup.revoke(["--user", "1"])
        #expect(user.status == 78, "\(user.stdout) \(user.stderr)")
        #expect(user.stderr.contains("read_only_store") && user.stderr.contains(users), "\(user.stderr)")

        let backward = try setup.revoke(["--all", "--at", "\(now - 100)"])
        #expect(backward.status == 65, "\(backward.stdout) \(backward.stderr)")
        let forced = try setup.revoke(["--all", "--at", "\(now - 100)", "--force"])
        #expect(forced.status == 0, "\(forced.stdout) \(forced.stderr)")
        #expect(forced.stdout.contains("moved the cutoff of all users back from \(now - 2)"), "\(forced.stdout)")
        #expect(try await eventually(502, iat: now - 10), "the running gateway did not take the forced move back")
    }

    private static let postgresURL: String? = {
        let value = ProcessInfo.processInfo.environment["TOKENGATE_TEST_POSTGRES_URL"]
        return value?.isEmpty == false ? value : nil
    }()

    /// One value from `psql`, trimmed.
    @discardableResult
    private static func psql(_ url: String, _ sql: String) throws -> String {
        let result = try ChildProcess.run("/usr/bin/env", ["psql", url, "-X", "-q", "-At", "-c", sql])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs `sql` every 50 ms, for up to 10 s, until its value satisfies `condition`.
    private static func poll(_ url: String, _ sql: String, until condition: (String) -> Bool) async throws -> Bool {
        for _ in 0..<200 {
            if condition(try Self.psql(url, sql)) {
                return true
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// The line says what happened: a cutoff moved forward, moved back by `--force`, or left as it was. Before,
    /// a forced move back printed "revoked tokens … issued before" the earlier time.
    @Test func saysWhetherTheCutoffMovedForwardMovedBackOrStayed() async throws {
        try Self.requireBinary()
        let setup = try Setup()
        defer { setup.remove() }
        try await setup.createStoreByServing()

        func revoke(_ arguments: [String]) throws -> String {
            let result = try setup.revoke(arguments)
            #expect(result.status == 0, "\(arguments): \(result.stdout) \(result.stderr)")
            return result.stdout
        }
        #expect(try revoke(["--user", "alice", "--at", "2000"]).hasPrefix("revoked tokens of user alice issued before 2000 ("))
        #expect(try revoke(["--user", "alice", "--at", "2000"]).hasPrefix("unchanged: user alice already has cutoff 2000"))
        let back = try revoke(["--user", "alice", "--at", "1000", "--force"])
        #expect(back.hasPrefix("moved the cutoff of user alice back from 2000 ("), "\(back)")
        #expect(back.contains("to 1000 (") && back.contains("accepted again"), "\(back)")
        #expect(!back.contains("revoked"), "\(back)")
        #expect(try revoke(["--user", "alice", "--at", "1000", "--force"]).hasPrefix("unchanged: user alice already has cutoff 1000"))
        #expect(try revoke(["--user", "alice", "--at", "3000", "--force"]).hasPrefix("revoked tokens of user alice issued before 3000"))

        #expect(try revoke(["--user", "alice", "--api-only", "--at", "2000"]).hasPrefix("revoked api tokens of user alice issued before 2000"))
        let apiBack = try revoke(["--user", "alice", "--api-only", "--at", "1500", "--force"])
        #expect(apiBack.hasPrefix("moved the api-token cutoff of user alice back from 2000 ("), "\(apiBack)")

        #expect(try revoke(["--all", "--at", "2000"]).hasPrefix("revoked tokens of all users issued before 2000"))
        let allBack = try revoke(["--all", "--at", "1000", "--force"])
        #expect(allBack.hasPrefix("moved the cutoff of all users back from 2000 ("), "\(allBack)")
    }
}

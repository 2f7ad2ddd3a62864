//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import Testing
import TokengateTokens

@testable import TokengateStores

/// The PostgreSQL server of the tests: `TOKENGATE_TEST_POSTGRES_URL`, as printed by
/// `scripts/postgres-test-server.sh start`. Unset → the PostgreSQL tests are skipped.
enum PostgresTestServer {
    static let url: String? = {
        let value = ProcessInfo.processInfo.environment["TOKENGATE_TEST_POSTGRES_URL"]
        return value?.isEmpty == false ? value : nil
    }()

    static let skipMessage: Comment = """
        TOKENGATE_TEST_POSTGRES_URL is not set; start a server with \
        `export TOKENGATE_TEST_POSTGRES_URL=$(scripts/postgres-test-server.sh start)`
        """

    /// The repository's `scripts/postgres-test-server.sh`.
    static let script: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 {
            url.deleteLastPathComponent()
        }
        return url.appendingPathComponent("scripts/postgres-test-server.sh").path
    }()

    /// A store configuration on the test server with fresh table and channel names, so tests and runs never share
    /// state.
    static func configuration(
        table: String? = nil,
        channel: String? = nil,
        rpTable: PostgresCutoffStore.RPTable? = nil,
        operationTimeout: Duration = .seconds(5)
    ) throws -> PostgresCutoffStore.Configuration {
        var configuration = try PostgresCutoffStore.Configuration(url: try #require(Self.url))
        configuration.tls = .disable
        configuration.table = table ?? Self.uniqueName("tg")
        configuration.notifyChannel = channel ?? Self.uniqueName("tgch")
        configuration.rpTable = rpTable
        configuration.operationTimeout = operationTimeout
        configuration.connectTimeout = .seconds(2)
        return configuration
    }

    static func uniqueName(_ prefix: String) -> String {
        prefix + "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
    }

    /// Runs SQL with `psql`: an independent client, as the RP's application or an operator would be.
    @discardableResult
    static func psql(_ sql: String) throws -> String {
        try runProcess(
            "/usr/bin/env", ["psql", try #require(Self.url), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
    }

    /// Stops the server, keeping its data (`pause`), or starts it again (`resume`).
    static func control(_ command: String) throws {
        try runProcess("/usr/bin/env", ["bash", Self.script, command])
    }
}

/// A store with its ``PostgresCutoffStore/run()`` task, closed at the end of `body` whatever happens.
@discardableResult
func withRunningStore<T>(
    _ configuration: PostgresCutoffStore.Configuration,
    logger: Logger = Logger(label: "tokengate.cutoffs.postgres"),
    _ body: (PostgresCutoffStore) async throws -> T
) async throws -> T {
    let store = try PostgresCutoffStore(configuration: configuration, logger: logger)
    let runner = Task { await store.run() }
    do {
        let result = try await body(store)
        try await store.close()
        await runner.value
        return result
    } catch {
        try? await store.close()
        await runner.value
        throw error
    }
}

/// Polls `condition` every millisecond until it holds or `timeout` passed; returns whether it held.
func eventually(
    timeout: Duration,
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    while clock.now < deadline {
        if try await condition() {
            return true
        }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return try await condition()
}

/// Whether `snapshot` rejects a token of `user` issued at `iat` (DESIGN §1: rejected when `iat` is before a
/// cutoff); `api` for an api token.
func rejects(_ snapshot: CutoffSnapshot?, user: String, iat: Int64, api: Bool = false) -> Bool {
    guard let snapshot else {
        return false
    }
    if let global = snapshot.globalRevokedBefore, iat < global {
        return true
    }
    guard let cutoffs = snapshot.users[CutoffUserKey(user)] else {
        return false
    }
    if let revoked = cutoffs.revokedBefore, iat < revoked {
        return true
    }
    if api, let revoked = cutoffs.apiRevokedBefore, iat < revoked {
        return true
    }
    return false
}

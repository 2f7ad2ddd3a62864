//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateStores

/// The PostgreSQL store's configuration, without a server: names that could inject SQL, the URL form, and that
/// the password never shows.
@Suite("PostgreSQL store configuration")
struct PostgresConfigurationTests {
    static func base() -> PostgresCutoffStore.Configuration {
        PostgresCutoffStore.Configuration(host: "127.0.0.1", user: "tokengate", database: "tokengate", tls: .disable)
    }

    static let hostile = [
        "", "users; DROP TABLE users", "\"users\"", "users\"--", "a.b.c", ".users", "users.", "1users", "us ers",
        "users'", "usérs", "users$1", "users\u{0}", String(repeating: "a", count: 64), "a-b", "a..b",
        "pg_catalog.users--",
    ]

    @Test("hostile table names are refused before anything reaches SQL", arguments: Self.hostile)
    func hostileTable(_ name: String) async throws {
        var configuration = Self.base()
        configuration.table = name
        await expectStoreError(.invalidStoreConfiguration) { try PostgresCutoffStore(configuration: configuration) }
    }

    @Test("hostile RP table and column names are refused", arguments: Self.hostile)
    func hostileRPNames(_ name: String) async throws {
        let variants: [PostgresCutoffStore.RPTable] = [
            .init(table: name),
            .init(table: "users", userIDColumn: name),
            .init(table: "users", passwordChangedColumn: name),
            .init(table: "users", apiDisabledColumn: name),
        ]
        for rp in variants {
            var configuration = Self.base()
            configuration.rpTable = rp
            await expectStoreError(.invalidStoreConfiguration) { try PostgresCutoffStore(configuration: configuration) }
        }
    }

    @Test("a column or channel may not be schema-qualified; a derived name may not get too long")
    func qualifiedAndLong() async throws {
        var configuration = Self.base()
        configuration.rpTable = .init(table: "public.users", userIDColumn: "public.id")
        await expectStoreError(.invalidStoreConfiguration) { try PostgresCutoffStore(configuration: configuration) }
        configuration = Self.base()
        configuration.notifyChannel = "public.channel"
        await expectStoreError(.invalidStoreConfiguration) { try PostgresCutoffStore(configuration: configuration) }
        configuration = Self.base()
        configuration.table = String(repeating: "t", count: 50)  // + "_global_changed" > 63
        await expectStoreError(.invalidStoreConfiguration) { try PostgresCutoffStore(configuration: configuration) }
    }

    @Test("plain names are accepted and always quoted")
    func quoting() throws {
        #expect(try PostgresIdentifier("users", what: "t").quoted == "\"users\"")
        #expect(try PostgresIdentifier("app.Users_2", what: "t").quoted == "\"app\".\"Users_2\"")
        #expect(try PostgresIdentifier("_x", what: "t").suffixed("_global", what: "g").quoted == "\"_x_global\"")
        var configuration = Self.base()
        configuration.table = "tenant_1.cutoffs"
        configuration.rpTable = nil
        _ = try PostgresCutoffStore(configuration: configuration)
    }

    @Test("the URL form: user, host, port, database, sslmode; a password in the URL is refused")
    func url() async throws {
        let parsed = try PostgresCutoffStore.Configuration(
            url: "postgres://tg@db.internal:6432/cutoffs?sslmode=require")
        #expect(parsed.user == "tg")
        #expect(parsed.host == "db.internal")
        #expect(parsed.port == 6432)
        #expect(parsed.database == "cutoffs")
        #expect(parsed.tls == .require)
        let defaults = try PostgresCutoffStore.Configuration(url: "postgresql://tg@[::1]/cutoffs", password: "s3cret")
        #expect(defaults.host == "::1")
        #expect(defaults.port == 5432)
        #expect(defaults.tls == .prefer)
        #expect(defaults.password == "s3cret")

        for bad in [
            "postgres://tg:hunter2@db/cutoffs", "mysql://tg@db/cutoffs", "postgres://db/cutoffs", "postgres://tg@db",
            "postgres://tg@db/a/b", "postgres://tg@db/cutoffs?sslmode=verify-ca", "postgres://tg@db/cutoffs?x=1",
        ] {
            let error = await expectStoreError(.invalidStoreConfiguration) {
                try PostgresCutoffStore.Configuration(url: bad)
            }
            #expect(error?.message.contains("hunter2") == false)
        }
    }

    @Test("the password never appears in descriptions, mirrors or the store description")
    func passwordNeverShown() throws {
        var configuration = Self.base()
        configuration.password = "correct-horse-battery"
        let store = try PostgresCutoffStore(configuration: configuration)
        var dumped = ""
        dump(configuration, to: &dumped)
        for text in [
            configuration.description, String(describing: configuration), String(reflecting: configuration), dumped,
            store.storeDescription,
        ] {
            #expect(!text.contains("correct-horse-battery"), "\(text)")
        }
    }

    @Test("without run() and a server, a call fails as unavailable within the operation timeout")
    func timesOutWithoutRun() async throws {
        var configuration = Self.base()
        configuration.port = 1  // nothing listens there
        configuration.operationTimeout = .milliseconds(300)
        let store = try PostgresCutoffStore(configuration: configuration)
        let clock = ContinuousClock()
        let start = clock.now
        await expectStoreError(.storeUnavailable) { try await store.load() }
        #expect(clock.now - start < .seconds(3))
        try await store.close()
        await expectStoreError(.storeUnavailable) { try await store.load() }
    }
}

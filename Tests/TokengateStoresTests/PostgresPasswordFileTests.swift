//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import Testing

@testable import TokengateStores

/// The password file as the store reads it, at start and at each connection attempt; no PostgreSQL needed (the
/// rotation against a real server is in `PostgresCutoffStoreTests+PasswordFile.swift`).
@Suite("PostgreSQL store: the password file")
struct PostgresPasswordFileTests {
    @Test("read at every connection attempt: the password the file holds now, without its line break")
    func readAtEachAttempt() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("password")
        try writeFile(path, "first\n")
        var configuration = PostgresConfigurationTests.base()
        configuration.passwordFile = path
        let parameters = try PostgresCutoffStore.connectParameters(configuration, listening: false)
        #expect(!parameters.keywords.contains("password"), "the file is read per connection, not once")
        let file = PostgresPasswordFile(path: path, logger: Logger(label: "test"))
        func password() throws -> String? {
            let attempt = try parameters.forConnecting(passwordFile: file, store: "test")
            return Dictionary(uniqueKeysWithValues: zip(attempt.keywords, attempt.values))["password"]
        }
        #expect(try password() == "first")
        try writeFile(path, "second\r\n")
        #expect(try password() == "second")
        #expect(try parameters.forConnecting(passwordFile: nil, store: "test").keywords == parameters.keywords)
    }

    @Test("a file that cannot be used fails the attempt, naming the file and the reason, never the content")
    func unusableFile() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("password")
        let file = PostgresPasswordFile(path: path, logger: Logger(label: "test"))
        for (content, reason) in [
            (nil, "No such file or directory"),
            (Data("secret\u{0}tail".utf8), "contains a NUL byte"),
            (Data([0x73, 0x65, 0xFF]), "not UTF-8 text"),
            (Data(repeating: 0x61, count: PostgresPasswordFile.maxBytes + 1), "larger than 64 KiB, not a password"),
        ] {
            try? FileManager.default.removeItem(atPath: path)
            if let content {
                try content.write(to: URL(fileURLWithPath: path))
            }
            let failure = #expect(throws: PostgresPasswordFile.Failure.self) { try file.password() }
            #expect(failure?.description == "cannot read the password file \(path) (\(reason))")
            let error = #expect(throws: CutoffStoreError.self) {
                try file.passwordForConnection(store: "postgres x@h:1/d")
            }
            #expect(error?.code == .storeUnavailable)
            #expect(error?.message == "postgres x@h:1/d: cannot read the password file \(path) (\(reason))")
        }
    }

    @Test("at start an unreadable file is a configuration error naming it; a password next to a file is refused")
    func startChecks() async throws {
        let directory = try TemporaryDirectory()
        var configuration = PostgresConfigurationTests.base()
        configuration.passwordFile = directory.file("missing")
        let missing = await expectStoreError(.invalidStoreConfiguration) {
            try PostgresCutoffStore(configuration: configuration)
        }
        #expect(missing?.message == "postgres: cannot read the password file \(directory.file("missing")) (No such file or directory)")

        try writeFile(directory.file("password"), "secret")
        configuration.passwordFile = directory.file("password")
        _ = try PostgresCutoffStore(configuration: configuration)
        configuration.password = "secret"
        let both = await expectStoreError(.invalidStoreConfiguration) {
            try PostgresCutoffStore(configuration: configuration)
        }
        #expect(both?.message.contains("secret") == false)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Testing

@testable import TokengateStores

/// What the store hands libpq, and its deadlines against a server that never answers; no PostgreSQL needed.
@Suite("PostgreSQL store: libpq settings and deadlines")
struct PostgresConnectParametersTests {
    static func settings(
        _ configuration: PostgresCutoffStore.Configuration,
        listening: Bool = false
    ) throws -> [String: String] {
        let parameters = try PostgresCutoffStore.connectParameters(configuration, listening: listening)
        #expect(parameters.keywords.count == parameters.values.count)
        #expect(Set(parameters.keywords).count == parameters.keywords.count, "a keyword given twice")
        return Dictionary(uniqueKeysWithValues: zip(parameters.keywords, parameters.values))
    }

    @Test("TLS modes map to libpq's sslmode: disable, prefer, verify-full with the CA file")
    func tlsModes() throws {
        var configuration = PostgresConfigurationTests.base()
        configuration.tls = .disable
        #expect(try Self.settings(configuration)["sslmode"] == "disable")
        #expect(try Self.settings(configuration)["sslrootcert"] == nil)
        configuration.tls = .prefer
        #expect(try Self.settings(configuration)["sslmode"] == "prefer")
        configuration.tls = .require
        let system = try Self.settings(configuration)
        #expect(system["sslmode"] == "verify-full")
        let roots = try #require(system["sslrootcert"])
        #expect(roots == "system" || FileManager.default.isReadableFile(atPath: roots), "\(roots)")

        let caFile = FileManager.default.temporaryDirectory.appendingPathComponent("tg-ca-\(UUID().uuidString).pem")
        try Data("not checked by the store, only by libpq".utf8).write(to: caFile)
        defer { try? FileManager.default.removeItem(at: caFile) }
        configuration.tlsCAFile = caFile.path
        #expect(try Self.settings(configuration)["sslrootcert"] == caFile.path)

        configuration.tlsCAFile = "/nonexistent/tokengate-ca.pem"
        let error = #expect(throws: CutoffStoreError.self) { try PostgresCutoffStore(configuration: configuration) }
        #expect(error?.code == .invalidStoreConfiguration)
    }

    @Test("connection values go over as given; the password only when set; the pool has a statement timeout")
    func values() throws {
        var configuration = PostgresConfigurationTests.base()
        configuration.host = "db.internal"
        configuration.port = 6432
        configuration.user = "tg user'\\"
        configuration.database = "postgres://evil@elsewhere/db"  // never expanded: expand_dbname is 0
        configuration.operationTimeout = .milliseconds(2500)
        var settings = try Self.settings(configuration)
        #expect(settings["host"] == "db.internal")
        #expect(settings["port"] == "6432")
        #expect(settings["user"] == "tg user'\\")
        #expect(settings["dbname"] == "postgres://evil@elsewhere/db")
        #expect(settings["password"] == nil)
        #expect(settings["options"] == "-c statement_timeout=2500")
        #expect(settings["gssencmode"] == "disable")
        #expect(try Self.settings(configuration, listening: true)["options"] == nil)
        configuration.password = "p@ss word='x'"
        settings = try Self.settings(configuration)
        #expect(settings["password"] == "p@ss word='x'")
    }

    @Test("values libpq would misread are refused without repeating them")
    func refusedValues() async throws {
        var configuration = PostgresConfigurationTests.base()
        configuration.password = "secret\u{0}tail"
        let error = await expectStoreError(.invalidStoreConfiguration) {
            try PostgresCutoffStore(configuration: configuration)
        }
        #expect(error?.message.contains("secret") == false)
        for host in ["a,b", ""] {
            configuration = PostgresConfigurationTests.base()
            configuration.host = host
            await expectStoreError(.invalidStoreConfiguration) { try PostgresCutoffStore(configuration: configuration) }
        }
        configuration = PostgresConfigurationTests.base()
        configuration.database = "db\u{0}"
        await expectStoreError(.invalidStoreConfiguration) { try PostgresCutoffStore(configuration: configuration) }
    }

    @Test("a server that accepts but never answers: calls fail by the operation timeout, close() is prompt")
    func silentServer() async throws {
        let silent = try SilentServer()
        var configuration = PostgresConfigurationTests.base()
        configuration.port = silent.port
        configuration.operationTimeout = .milliseconds(500)
        configuration.connectTimeout = .seconds(30)  // the operation timeout bounds the connect too
        let clock = ContinuousClock()
        try await withRunningStore(configuration) { store in
            for _ in 0..<3 {
                let start = clock.now
                let error = await expectStoreError(.storeUnavailable) { try await store.load() }
                #expect(clock.now - start < .seconds(2), "\(String(describing: error))")
            }
            // A write too: it waits for a connection and gives up just the same.
            let start = clock.now
            await expectStoreError(.storeUnavailable) { try await store.passwordChanged(user: "x", at: 1) }
            #expect(clock.now - start < .seconds(2))
            #expect(!store.isListening)
        }
    }
}

/// A TCP listener on 127.0.0.1 that never accepts: connections complete in the kernel's backlog and then hear
/// nothing, like a server that hangs.
private final class SilentServer {
    let descriptor: Int32
    let port: Int

    init() throws {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        try #require(descriptor >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(bound == 0)
        try #require(listen(descriptor, 16) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        try #require(named == 0)
        self.descriptor = descriptor
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit {
        close(self.descriptor)
    }
}

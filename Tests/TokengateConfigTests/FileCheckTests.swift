//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig
import TokengateTokens

/// Files named by the configuration are resolved against its directory and, by default, must exist.
@Suite("Files and paths")
struct FileCheckTests {
    /// A deployment directory with every file `minimalYAML` names, plus a signing key and an admin secret.
    func deployment() throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory()
        for file in ["cert.pem", "key.pem", "keys.jwks", "private.jwks", "admin.secret"] {
            try directory.write(file, contents: "not parsed here\n")
        }
        try directory.write("tokengate.yaml", contents: minimalYAML)
        return directory
    }

    @Test("with every file present the configuration loads and paths are absolute")
    func allPresent() throws {
        let directory = try self.deployment()
        let config = try GatewayConfiguration.load(path: directory.path + "/tokengate.yaml")
        let certificate = try #require(config.listeners[0].tls?.certificates[0])
        #expect(certificate.cert == ConfigPath(path: directory.path + "/cert.pem", original: "cert.pem"))
        #expect(config.cutoffs == .sqlite(ConfigPath(path: directory.path + "/cutoffs.db", original: "cutoffs.db")))
    }

    @Test("a missing certificate key is named with its line, key path and both forms of the path")
    func missingKeyFile() throws {
        let directory = try self.deployment()
        try FileManager.default.removeItem(atPath: directory.path + "/key.pem")
        let path = directory.path + "/tokengate.yaml"
        let error = #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: path)
        }
        #expect(error?.code == .fileNotFound)
        #expect(
            error?.description
                == "\(path):3:51: listen[0].tls.certificates[0].key: file key.pem (\(directory.path)/key.pem) "
                + "does not exist"
        )
    }

    @Test("a directory where a file is expected")
    func directoryInsteadOfFile() throws {
        let directory = try self.deployment()
        try FileManager.default.removeItem(atPath: directory.path + "/keys.jwks")
        try FileManager.default.createDirectory(
            atPath: directory.path + "/keys.jwks",
            withIntermediateDirectories: false
        )
        let error = #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: directory.path + "/tokengate.yaml")
        }
        #expect(
            error?.description.hasSuffix(
                "4:17: keys[0].jwks: keys.jwks (\(directory.path)/keys.jwks) is not a regular file"
            ) == true
        )
    }

    @Test("a database whose directory does not exist")
    func missingDatabaseDirectory() throws {
        let directory = try self.deployment()
        let yaml = minimalYAML.replacingOccurrences(of: "sqlite: cutoffs.db", with: "sqlite: data/cutoffs.db")
        try directory.write("tokengate.yaml", contents: yaml)
        let error = #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: directory.path + "/tokengate.yaml")
        }
        #expect(error?.code == .fileNotFound)
        #expect(error?.message == "directory \(directory.path)/data for data/cutoffs.db does not exist")
        // The database file itself need not exist: the store creates it.
        try FileManager.default.createDirectory(atPath: directory.path + "/data", withIntermediateDirectories: false)
        #expect(throws: Never.self) {
            try GatewayConfiguration.load(path: directory.path + "/tokengate.yaml")
        }
    }

    @Test("a JSON file cutoff store must exist: the gateway only reads it")
    func missingCutoffFile() throws {
        let directory = try self.deployment()
        let yaml = minimalYAML.replacingOccurrences(of: "sqlite: cutoffs.db", with: "file: cutoffs.json")
        try #require(yaml != minimalYAML)
        try directory.write("tokengate.yaml", contents: yaml)
        let error = #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: directory.path + "/tokengate.yaml")
        }
        #expect(error?.code == .fileNotFound)
        #expect(error?.message == "file cutoffs.json (\(directory.path)/cutoffs.json) does not exist")
        try directory.write("cutoffs.json", contents: "{}")
        #expect(throws: Never.self) {
            try GatewayConfiguration.load(path: directory.path + "/tokengate.yaml")
        }
    }

    @Test("checkFiles: false skips every existence check")
    func noChecks() throws {
        let directory = try TemporaryDirectory()
        try directory.write("tokengate.yaml", contents: minimalYAML)
        let config = try GatewayConfiguration.load(path: directory.path + "/tokengate.yaml", checkFiles: false)
        #expect(config.keys.count == 1)
        #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: directory.path + "/tokengate.yaml")
        }
    }

    @Test("an HMAC secret from the environment must be set, and its value never appears")
    func hmacEnvironment() throws {
        let directory = try self.deployment()
        let name = "TOKENGATE_CONFIG_TEST_SECRET_\(getpid())"
        let yaml = minimalYAML.replacingOccurrences(
            of: "keys: [ { jwks: keys.jwks } ]",
            with: "keys: [ { hmac_env: \(name), alg: HS256 } ]"
        )
        try directory.write("tokengate.yaml", contents: yaml)
        let path = directory.path + "/tokengate.yaml"
        let error = #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: path)
        }
        #expect(error?.description == "\(path):4:21: keys[0].hmac_env: the environment variable named here is not set")
        setenv(name, "super-secret-value", 1)
        defer { unsetenv(name) }
        let config = try GatewayConfiguration.load(path: path)
        #expect(config.keys == [KeySourceConfiguration(source: .hmacEnvironment(name), algorithm: .hs256)])
        #expect(!"\(config)".contains("super-secret-value"))
    }

    @Test("relative configuration paths anchor relative file paths to an absolute directory")
    func baseDirectory() {
        let cwd = FileManager.default.currentDirectoryPath
        #expect(GatewayConfiguration.baseDirectory(for: "Config/dev.yaml") == cwd + "/Config")
        #expect(GatewayConfiguration.baseDirectory(for: "./Config/dev.yaml") == cwd + "/Config")
        #expect(GatewayConfiguration.baseDirectory(for: "dev.yaml") == cwd)
        #expect(GatewayConfiguration.baseDirectory(for: "/etc/tokengate/tokengate.yaml") == "/etc/tokengate")
        #expect(GatewayConfiguration.baseDirectory(for: "/tokengate.yaml") == "/")
    }

    @Test("config paths keep what was written and resolve the rest")
    func configPaths() {
        #expect(ConfigPath(resolving: "tls/cert.pem", against: "/etc/tg").path == "/etc/tg/tls/cert.pem")
        #expect(ConfigPath(resolving: "./tls/cert.pem", against: "/etc/tg").path == "/etc/tg/tls/cert.pem")
        #expect(ConfigPath(resolving: "../keys/k.pem", against: "/etc/tg/").path == "/etc/tg/../keys/k.pem")
        #expect(ConfigPath(resolving: "/abs/k.pem", against: "/etc/tg").path == "/abs/k.pem")
        let path = ConfigPath(resolving: "k.pem", against: "/etc/tg")
        #expect(path.original == "k.pem")
        #expect(path.description == "k.pem (/etc/tg/k.pem)")
        #expect(ConfigPath(resolving: "/abs/k.pem", against: "/etc").description == "/abs/k.pem")
    }
}

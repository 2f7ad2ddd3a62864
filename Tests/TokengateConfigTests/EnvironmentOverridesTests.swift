//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig

/// `TOKENGATE_…` variables replace values of the file before it is decoded: they pass the same checks, and a
/// problem in one names the variable.
struct EnvironmentOverridesTests {
    private func parse(_ yaml: String, _ values: [String: String]) throws -> GatewayConfiguration {
        try GatewayConfiguration(
            yaml: yaml, sourcePath: "test.yaml", checkFiles: false, environment: EnvironmentOverrides(values))
    }

    private func error(_ yaml: String, _ values: [String: String]) -> ConfigurationError? {
        do {
            _ = try self.parse(yaml, values)
            return nil
        } catch {
            return error as? ConfigurationError
        }
    }

    @Test func setsTheListenAdminLogAndStoreValues() throws {
        let configuration = try self.parse(
            minimalYAML,
            [
                "TOKENGATE_LISTEN": " [::]:9443 ",
                "TOKENGATE_ADMIN_ADDRESS": "0.0.0.0:9901",
                "TOKENGATE_ADMIN_SECRET_FILE": "/run/secrets/admin",
                "TOKENGATE_LOG_LEVEL": "debug",
                "TOKENGATE_CUTOFFS_SQLITE": "/var/lib/tokengate/cutoffs.db",
                "TOKENGATE_UNRELATED": "x",
            ]
        )
        #expect(configuration.listeners.map { "\($0.address)" } == ["[::]:9443"])
        #expect(configuration.admin.map { "\($0.address)" } == "0.0.0.0:9901")
        #expect(configuration.admin?.secretFile?.path == "/run/secrets/admin")
        #expect(configuration.log.level == .debug)
        #expect(configuration.cutoffs == .sqlite(ConfigPath(resolving: "/var/lib/tokengate/cutoffs.db", against: "")))
    }

    /// The rules of the file apply: an admin address off loopback without a secret file is refused, naming the
    /// variable instead of a line that does not hold the value.
    @Test func overriddenValuesPassTheFilesChecksAndNameTheVariable() {
        let offLoopback = self.error(minimalYAML, ["TOKENGATE_ADMIN_ADDRESS": "0.0.0.0:9901"])
        #expect(offLoopback?.code == .insecure)
        #expect(offLoopback?.keyPath == "admin.address")
        #expect(offLoopback?.line == nil)
        #expect(offLoopback?.message.hasSuffix("(set by TOKENGATE_ADMIN_ADDRESS)") == true, "\(String(describing: offLoopback))")

        let level = self.error(minimalYAML, ["TOKENGATE_LOG_LEVEL": "null"])
        #expect(level?.description == "test.yaml: log.level: expected one of trace, debug, info, notice, warning, error, critical, got null (set by TOKENGATE_LOG_LEVEL)")
    }

    @Test func listenNeedsOneAddressPerListener() {
        let error = self.error(minimalYAML, ["TOKENGATE_LISTEN": "127.0.0.1:1,127.0.0.1:2"])
        #expect(error?.description == "test.yaml: TOKENGATE_LISTEN: expected 1 comma-separated address, one per listener of the file in its order, got 2")
        #expect(self.error(minimalYAML, ["TOKENGATE_LISTEN": ","]) != nil)
    }

    /// One store replaces the file's; the PostgreSQL settings go with a store that is not PostgreSQL.
    @Test func aStoreVariableReplacesTheFilesStore() throws {
        let postgres = minimalYAML.replacingOccurrences(
            of: "cutoffs: { sqlite: cutoffs.db }",
            with: "cutoffs: { postgres: \"postgres://tokengate@db/site\", password_file: pw, table: t }"
        )
        let configuration = try self.parse(postgres, ["TOKENGATE_CUTOFFS_FILE": "/etc/tokengate/cutoffs.json"])
        #expect(configuration.cutoffs == .file(ConfigPath(resolving: "/etc/tokengate/cutoffs.json", against: "")))
        let moved = try self.parse(
            postgres,
            ["TOKENGATE_CUTOFFS_POSTGRES": "postgres://tokengate@db2/site", "TOKENGATE_CUTOFFS_PASSWORD_FILE": "/run/pw"]
        )
        guard case .postgres(let store) = moved.cutoffs else {
            Issue.record("not a postgres store: \(moved.cutoffs)")
            return
        }
        #expect(store.host == "db2" && store.table == "t" && store.passwordFile?.path == "/run/pw")
        #expect(
            self.error(minimalYAML, ["TOKENGATE_CUTOFFS_SQLITE": "/a", "TOKENGATE_CUTOFFS_FILE": "/b"])?.keyPath
                == "TOKENGATE_CUTOFFS_FILE")
        #expect(self.error(minimalYAML, ["TOKENGATE_CUTOFFS_PASSWORD_FILE": "/run/pw"])?.message == "only for the postgres store")
        // A URL with a password is refused as in the file, without echoing it.
        let withPassword = self.error(minimalYAML, ["TOKENGATE_CUTOFFS_POSTGRES": "postgres://u:hunter2@db/site"])
        #expect(withPassword != nil && withPassword?.description.contains("hunter2") == false)
    }

    @Test func anEmptyVariableCountsAsUnset() throws {
        let configuration = try self.parse(minimalYAML, ["TOKENGATE_LOG_LEVEL": "", "TOKENGATE_LISTEN": ""])
        #expect(configuration.log.level == .info)
        #expect(configuration.listeners.map { "\($0.address)" } == ["127.0.0.1:8443"])
    }

    @Test func theSigningKeyFileReplacesTheFilesKeyFile() throws {
        let yaml = minimalYAML + "signing_key: { jwks: private.jwks }\n"
        let configuration = try self.parse(yaml, ["TOKENGATE_SIGNING_KEY_FILE": "/run/secrets/signing.jwks"])
        #expect(configuration.signingKey?.source == .jwks(ConfigPath(resolving: "/run/secrets/signing.jwks", against: "")))
        #expect(self.error(minimalYAML, ["TOKENGATE_SIGNING_KEY_FILE": "/x"])?.keyPath == "TOKENGATE_SIGNING_KEY_FILE")
    }
}

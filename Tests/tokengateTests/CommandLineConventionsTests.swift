//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTestSupport
import TokengateVersion

/// The built `tokengate` binary as an operator meets it: which version it is and what it runs with, every problem
/// of a configuration in one `check-config` run, the effective configuration, and the `TOKENGATE_…` variables.
@Suite(.serialized)
struct CommandLineConventionsTests {
    static let binary = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build/debug/tokengate").path

    private func run(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess.Result {
        let assignments = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return try ChildProcess.run("/usr/bin/env", assignments + ["/usr/bin/timeout", "60", Self.binary] + arguments)
    }

    @Test func versionFlagPrintsTheVersionAlone() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let result = try self.run(["--version"])
        #expect(result.status == 0)
        #expect(result.stdout == TokengateVersion.string + "\n")
        #expect(TokengateVersion.string.split(separator: ".").count == 3)
    }

    /// The library versions are the loaded libraries' own: compared with what the system's `openssl` and
    /// `pg_config` (the same libssl3 and libpq5) report.
    @Test func versionCommandNamesTheLibrariesInUse() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let result = try self.run(["version"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "tokengate \(TokengateVersion.string)")
        let fields = Dictionary(
            lines.dropFirst().compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), String(line[line.index(colon, offsetBy: 2)...]))
            },
            uniquingKeysWith: { first, _ in first }
        )
        #expect(Set(fields.keys) == ["openssl", "nghttp2", "sqlite", "libpq", "swift"], "\(lines)")
        let openssl = try ChildProcess.run("/usr/bin/openssl", ["version"]).stdout
        #expect(fields["openssl"].map { openssl.hasPrefix($0) && $0.hasPrefix("OpenSSL 3.") } == true, "\(openssl) vs \(fields)")
        let libpq = try ChildProcess.run("/usr/bin/pg_config", ["--version"]).stdout
        #expect(fields["libpq"].map { libpq.hasPrefix("PostgreSQL \($0) ") } == true, "\(libpq) vs \(fields)")
        #expect(fields["nghttp2"]?.hasPrefix("1.") == true)
        #expect(fields["sqlite"]?.hasPrefix("3.") == true)
        #expect(fields["swift"]?.hasPrefix("6.") == true)
    }

    private final class Directory {
        let path: String
        init() throws {
            self.path = NSTemporaryDirectory() + "tokengate-cli-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
        }
        func write(_ name: String, _ text: String, mode: Int = 0o600) throws {
            try text.write(toFile: self.path + "/" + name, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: self.path + "/" + name)
        }
        deinit { try? FileManager.default.removeItem(atPath: self.path) }
    }

    @Test func checkConfigReportsEveryProblemInOneRun() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let directory = try Directory()
        try directory.write(
            "bad.yaml",
            """
            listen:
              - address: 127.0.0.1:8443
                tls: { certificates: [ { cert: missing.pem, key: missing.key } ] }
            cutoffs: { sqlite: cutoffs.db }
            upstreams:
              api: { targets: [ "http://127.0.0.1:9" ] }
            routes:
              - { path_prefix: /, upstream: ap, accept: none }
            limits: { idle_timeout: 1.5s }
            """
        )
        let result = try self.run(["check-config", directory.path + "/bad.yaml"])
        #expect(result.status == 78)
        #expect(result.stdout.isEmpty, "\(result.stdout)")
        let lines = result.stderr.split(separator: "\n").map(String.init)
        // One per part: the listeners section stops at its first problem (the key file is not reported too).
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.allSatisfy { $0.hasPrefix("tokengate: \(directory.path)/bad.yaml:") }, "\(lines)")
        #expect(lines.contains { $0.contains("listen[0].tls.certificates[0].cert: file missing.pem") })
        #expect(lines.contains { $0.contains("listen[0].tls.certificates[0].key: file missing.key") } == false)
        #expect(lines.contains { $0.contains("routes[0].upstream: unknown upstream 'ap', did you mean 'api'?") })
        #expect(lines.contains { $0.contains("limits.idle_timeout:") })
    }

    /// The effective configuration: defaults filled in, the environment's values applied, the admin secret's file
    /// named and its content never read into the output.
    @Test func checkConfigPrintShowsTheEffectiveConfigurationWithoutSecrets() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let directory = try Directory()
        let secret = "admin-secret-" + UUID().uuidString
        try directory.write("admin.secret", secret + "\n")
        let generated = try ChildProcess.run(Self.binary, ["keygen", "--alg", "EdDSA", "--out", directory.path + "/keys"])
        #expect(generated.status == 0, "\(generated.stderr)")
        _ = try ChildProcess.run("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=localhost",
            "-days", "2", "-keyout", directory.path + "/key.pem", "-out", directory.path + "/cert.pem",
        ])
        try directory.write(
            "tokengate.yaml",
            """
            listen:
              - address: 127.0.0.1:8443
                tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
            admin: { address: 127.0.0.1:9901 }
            keys: [ { jwks: keys/public.jwks } ]
            cutoffs: { sqlite: cutoffs.db }
            upstreams:
              api: { targets: [ "http://127.0.0.1:9" ] }
            routes:
              - { path_prefix: /, upstream: api, accept: [api] }
            """,
            mode: 0o644
        )
        let result = try self.run(
            ["check-config", "--print", directory.path + "/tokengate.yaml"],
            environment: [
                "TOKENGATE_LISTEN": "127.0.0.2:9443",
                "TOKENGATE_ADMIN_ADDRESS": "0.0.0.0:9902",
                "TOKENGATE_ADMIN_SECRET_FILE": directory.path + "/admin.secret",
                "TOKENGATE_LOG_LEVEL": "debug",
                "TOKENGATE_CUTOFFS_SQLITE": directory.path + "/elsewhere.db",
            ]
        )
        #expect(result.status == 0, "\(result.stderr)")
        let out = result.stdout
        #expect(out.contains("  - address: \"127.0.0.2:9443\""), "\(out)")
        #expect(out.contains("  address: \"0.0.0.0:9902\""))
        #expect(out.contains("  secret_file: \"\(directory.path)/admin.secret\""))
        #expect(out.contains("  level: \"debug\""))
        #expect(out.contains("  sqlite: \"\(directory.path)/elsewhere.db\""))
        #expect(out.contains("  idle_timeout: 1m"), "a default is printed")
        #expect(out.hasSuffix("tokengate.yaml: ok (1 listeners, 1 routes, 1 upstreams)\n"))
        #expect(!out.contains(secret) && !result.stderr.contains(secret))

        // Without the secret file the same off-loopback address is refused, naming the variable.
        let refused = try self.run(
            ["check-config", directory.path + "/tokengate.yaml"], environment: ["TOKENGATE_ADMIN_ADDRESS": "0.0.0.0:9902"])
        #expect(refused.status == 78)
        #expect(refused.stderr.contains("admin.address: the admin listener on 0.0.0.0:9902 is reachable from other machines"), "\(refused.stderr)")
        #expect(refused.stderr.contains("(set by TOKENGATE_ADMIN_ADDRESS)"))
    }
}

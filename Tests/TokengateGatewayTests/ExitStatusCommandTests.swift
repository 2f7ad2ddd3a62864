//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTLS
import TokengateTestSupport
import TokengateTokens

/// The exit status of every subcommand, run as a deploy script or a service manager runs it: each class of
/// failure has its own sysexits value (docs/operations.md, "Exit status"), so a script can tell a configuration
/// to fix (78) from a port taken (71) or a store to wait for (75). Before, every subcommand but `revoke` exited 2
/// for all of them. The store's own statuses (69, 75) are checked where the store is: `CheckConfigCommandTests`,
/// `ServeCommandTests`, `RevokeCommandTests`.
@Suite(.serialized)
struct ExitStatusCommandTests {
    /// A directory with a certificate, the key pair, a cutoffs file, and a configuration on free ports.
    private struct Setup {
        let directory: String
        let port: Int
        let adminPort: Int
        var path: String { self.directory + "/tokengate.yaml" }

        init() throws {
            self.directory = NSTemporaryDirectory() + "tokengate-exit-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
            let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost"])
            try certificate.certificatePEM.write(toFile: self.directory + "/cert.pem", atomically: true, encoding: .utf8)
            try certificate.privateKeyPEM.write(toFile: self.directory + "/key.pem", atomically: true, encoding: .utf8)
            let keys = try KeyGenerator.generate(algorithm: .edDSA, keyID: "test-only")
            try keys.publicJWKS.write(toFile: self.directory + "/public.jwks", atomically: true, encoding: .utf8)
            try keys.privateJWKS.write(toFile: self.directory + "/private.jwks", atomically: true, encoding: .utf8)
            try "{}".write(toFile: self.directory + "/cutoffs.json", atomically: true, encoding: .utf8)
            self.port = try GatewayIntegrationTests.unusedPort()
            self.adminPort = try GatewayIntegrationTests.unusedPort()
            try self.writeConfiguration()
        }

        func writeConfiguration(extra: String = "") throws {
            let yaml = """
                listen:
                  - address: 127.0.0.1:\(self.port)
                    tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
                admin: { address: 127.0.0.1:\(self.adminPort) }
                keys: [ { jwks: public.jwks } ]
                signing_key: { jwks: private.jwks }
                cutoffs: { file: cutoffs.json }
                upstreams:
                  api: { targets: [ "http://127.0.0.1:9" ] }
                routes:
                  - { path_prefix: /, upstream: api, accept: [api] }
                \(extra)
                """
            try yaml.write(toFile: self.path, atomically: true, encoding: .utf8)
        }

        func file(_ name: String) -> String { self.directory + "/" + name }

        func remove() {
            try? FileManager.default.removeItem(atPath: self.directory)
        }
    }

    private static func tokengate(_ arguments: [String]) throws -> ChildProcess.Result {
        try ChildProcess.run("/usr/bin/timeout", ["60", ServeCommandTests.binary] + arguments)
    }

    private static func requireBinary() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
    }

    /// A command line ArgumentParser refuses, or an option value the command refuses, is 64 (`EX_USAGE`) in every
    /// subcommand; before, 2 (and 64 only in `revoke`).
    @Test func usageErrorsExit64InEverySubcommand() throws {
        try Self.requireBinary()
        let setup = try Setup()
        defer { setup.remove() }
        let keys = setup.file("public.jwks")
        for arguments in [
            ["no-such-subcommand"], ["check-config"], ["check-config", setup.path, "--no-such-option"], ["serve"],
            ["dev", "--backend-port", "many"], ["keygen", "--out", setup.file("k")],
            ["keygen", "--alg", "HS999", "--out", setup.file("k")], ["token", "mint", "--key", setup.file("private.jwks")],
            ["token", "verify", "--keys", keys, "--accept", "everything", "t"],
            ["token", "verify", "--keys", keys, "--alg", "none", "t"],
            ["token", "verify", "--keys", keys, "--session-max-age", "0", "t"],
            ["revoke", "--config", setup.path, "--all", "--user", "alice"],
        ] {
            let result = try Self.tokengate(arguments)
            #expect(result.status == 64, "\(arguments): \(result.status) \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: setup.file("k")), "a refused keygen writes nothing")
    }

    /// A configuration that cannot be used is 78 (`EX_CONFIG`) for `check-config`, `serve` and `dev` alike, whether
    /// the file is missing, invalid, or names a file that does not load; nothing is started.
    @Test func anUnusableConfigurationExits78() throws {
        try Self.requireBinary()
        let setup = try Setup()
        defer { setup.remove() }
        let missing = setup.file("no-such.yaml")
        for arguments in [["check-config", missing], ["serve", "--config", missing], ["dev", "--config", missing]] {
            let result = try Self.tokengate(arguments)
            #expect(result.status == 78, "\(arguments): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("no-such.yaml"), "\(result.stderr)")
        }
        try setup.writeConfiguration(extra: "no_such_key: 1")
        for arguments in [["check-config", setup.path], ["serve", "--config", setup.path], ["dev", "--config", setup.path]] {
            let result = try Self.tokengate(arguments)
            #expect(result.status == 78, "\(arguments): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("no_such_key"), "\(result.stderr)")
            #expect(!(result.stdout + result.stderr).contains("listening"), "\(result.stdout)")
        }
        try setup.writeConfiguration()
        try "not a certificate".write(toFile: setup.file("cert.pem"), atomically: true, encoding: .utf8)
        for arguments in [["check-config", setup.path], ["serve", "--config", setup.path]] {
            let result = try Self.tokengate(arguments)
            #expect(result.status == 78, "\(arguments): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("cert.pem"), "\(result.stderr)")
        }
    }

    /// A listener whose address is taken is 71 (`EX_OSERR`), the gateway's listeners and the admin listener alike,
    /// so a script tells "port in use" from a configuration to fix. The same configuration passes `check-config`.
    @Test func aListenerThatCannotBindExits71() throws {
        try Self.requireBinary()
        let setup = try Setup()
        defer { setup.remove() }
        for taken in [setup.port, setup.adminPort] {
            let holder = try Self.listen(on: taken)
            defer { close(holder) }
            let result = try Self.tokengate(["serve", "--config", setup.path])
            #expect(result.status == 71, "port \(taken): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("Address already in use"), "\(result.stderr)")
            #expect(result.stderr.contains("127.0.0.1:\(taken)") || taken == setup.port, "\(result.stderr)")
        }
        #expect(try Self.tokengate(["check-config", setup.path]).status == 0)
    }

    /// An address that is not this host's can never be bound by restarting: 78, which the systemd unit does not
    /// restart (71 would be restarted for ever).
    @Test func aListenerOnAnAddressNotOfThisHostExits78() throws {
        try Self.requireBinary()
        let setup = try Setup()
        defer { setup.remove() }
        let yaml = try String(contentsOfFile: setup.path, encoding: .utf8)
        // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of this host.
        try yaml.replacingOccurrences(of: "- address: 127.0.0.1:\(setup.port)", with: "- address: 192.0.2.1:\(setup.port)")
            .write(toFile: setup.path, atomically: true, encoding: .utf8)
        let result = try Self.tokengate(["serve", "--config", setup.path])
        #expect(result.status == 78, "\(result.status) \(result.stderr)")
        #expect(result.stderr.contains("192.0.2.1"), "\(result.stderr)")
    }

    /// `token verify`: 1 for every token it finds invalid, a malformed one included (the token is what is judged,
    /// and the JSON line says why); 66 for a key or cutoffs file that is not there, 65 for one whose content is
    /// wrong. `token mint` says the same of its key file. Before, the files' failures were all 2.
    @Test func tokenCommandsTellAnInvalidTokenFromBadInputFiles() throws {
        try Self.requireBinary()
        let setup = try Setup()
        defer { setup.remove() }
        let keys = setup.file("public.jwks")
        try "{\"users\": 5}".write(toFile: setup.file("bad-cutoffs.json"), atomically: true, encoding: .utf8)
        let cases: [(arguments: [String], status: Int32)] = [
            (["token", "verify", "--keys", keys, "--", "not.a.token"], 1),
            (["token", "verify", "--keys", setup.file("missing.jwks"), "t"], 66),
            (["token", "verify", "--keys", setup.file("cert.pem"), "t"], 65),
            (["token", "verify", "--keys", keys, "--cutoffs", setup.file("missing.json"), "t"], 66),
            (["token", "verify", "--keys", keys, "--cutoffs", setup.file("bad-cutoffs.json"), "t"], 65),
            (["token", "mint", "--key", setup.file("missing.jwks"), "--sub", "alice"], 66),
            (["token", "mint", "--key", keys, "--sub", "alice"], 65),
            (["token", "mint", "--key", setup.file("private.jwks"), "--sub", ""], 64),
        ]
        for (arguments, status) in cases {
            let result = try Self.tokengate(arguments)
            #expect(result.status == status, "\(arguments): \(result.status), want \(status): \(result.stdout) \(result.stderr)")
        }
        let malformed = try Self.tokengate(["token", "verify", "--keys", keys, "--", "not.a.token"])
        #expect(malformed.stdout.contains("\"error\":\"invalid_token\""), "\(malformed.stdout)")

        let minted = try Self.tokengate(["token", "mint", "--key", setup.file("private.jwks"), "--sub", "alice", "--api-only"])
        #expect(minted.status == 0, "\(minted.stderr)")
        let valid = try Self.tokengate(["token", "verify", "--keys", keys, "--", minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)])
        #expect(valid.status == 0, "\(valid.stdout) \(valid.stderr)")
    }

    /// `keygen` refusing to replace key files, or unable to write them, is 73 (`EX_CANTCREAT`).
    @Test func keygenThatCannotWriteItsFilesExits73() throws {
        try Self.requireBinary()
        let setup = try Setup()
        defer { setup.remove() }
        let written = try Self.tokengate(["keygen", "--alg", "ES256", "--out", setup.file("keys")])
        #expect(written.status == 0, "\(written.stderr)")
        let again = try Self.tokengate(["keygen", "--alg", "ES256", "--out", setup.file("keys")])
        #expect(again.status == 73, "\(again.status) \(again.stderr)")
        #expect(again.stderr.contains("--force"), "\(again.stderr)")
        // A regular file where the directory should be.
        let blocked = try Self.tokengate(["keygen", "--alg", "ES256", "--out", setup.file("cutoffs.json") + "/keys"])
        #expect(blocked.status == 73, "\(blocked.status) \(blocked.stderr)")
    }

    /// A socket listening on 127.0.0.1:`port`, to be closed by the caller.
    private static func listen(on port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0 && Glibc.listen(fd, 1) == 0, "cannot hold port \(port)")
        return fd
    }
}

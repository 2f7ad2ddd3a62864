//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTLS
import TokengateTestSupport
import TokengateTokens

/// The `tokengate check-config` binary: it must pass exactly what `serve` starts with, and say what it
/// noticed about the files a configuration names.
@Suite(.serialized)
struct CheckConfigCommandTests {
    /// A directory with a certificate, its key, a verification key set and the private key set, all mode
    /// 0600 (0644 for the public files), and a configuration using them plus `admin`.
    private struct Setup {
        let directory: String
        var path: String { self.directory + "/tokengate.yaml" }

        init(
            admin: String = "admin: { address: 127.0.0.1:0 }",
            keys: String = "keys: [ { jwks: public.jwks } ]\nsigning_key: { jwks: private.jwks }",
            route: String = "{ path_prefix: /, upstream: api, accept: [api] }",
            cutoffs: String = "cutoffs: { file: cutoffs.json }"
        ) throws {
            self.directory = NSTemporaryDirectory() + "tokengate-check-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
            let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost"])
            try self.write("cert.pem", certificate.certificatePEM, mode: 0o644)
            try self.write("key.pem", certificate.privateKeyPEM, mode: 0o600)
            let generated = try KeyGenerator.generate(algorithm: .edDSA, keyID: "test-only")
            try self.write("public.jwks", generated.publicJWKS, mode: 0o644)
            try self.write("private.jwks", generated.privateJWKS, mode: 0o600)
            try self.write("cutoffs.json", "{}", mode: 0o600)
            let yaml = """
                listen:
                  - address: 127.0.0.1:0
                    tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
                \(admin)
                \(keys)
                \(cutoffs)
                upstreams:
                  api: { targets: [ "http://127.0.0.1:9" ] }
                routes:
                  - \(route)
                """
            try self.write("tokengate.yaml", yaml, mode: 0o644)
        }

        func write(_ name: String, _ text: String, mode: Int) throws {
            let path = self.directory + "/" + name
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        }

        func checkConfig(_ options: [String] = []) throws -> ChildProcess.Result {
            try ChildProcess.run("/usr/bin/timeout", ["60", ServeCommandTests.binary, "check-config"] + options + [self.path])
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: self.directory)
        }
    }

    /// A certificate's key that is not its own fails under the key's setting, and an expired certificate warns under
    /// the certificate's, like every other configuration message; `serve` says the same. The expired certificate is
    /// made by python3-cryptography, the mismatched key by openssl: no part of tokengate writes them.
    @Test func certificateProblemsNameTheirSetting() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let setup = try Setup()
        defer { setup.remove() }
        let other = try ChildProcess.run(
            "/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", setup.directory + "/other.key"])
        try #require(other.status == 0, "\(other.stderr)")
        let expired = try ChildProcess.run("/usr/bin/env", ["python3", "-c", """
            import datetime, sys
            from cryptography import x509
            from cryptography.x509.oid import NameOID
            from cryptography.hazmat.primitives import hashes, serialization
            key = serialization.load_pem_private_key(open(sys.argv[1] + "/key.pem", "rb").read(), None)
            name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
            certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(7).not_valid_before(datetime.datetime(2020, 1, 1)).not_valid_after(datetime.datetime(2020, 2, 1))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False).sign(key, hashes.SHA256()))
            open(sys.argv[1] + "/expired.pem", "wb").write(certificate.public_bytes(serialization.Encoding.PEM))
            """, setup.directory])
        try #require(expired.status == 0, "\(expired.stderr)")
        let yaml = try String(contentsOfFile: setup.path, encoding: .utf8)

        try setup.write(
            "tokengate.yaml",
            yaml.replacingOccurrences(
                of: "certificates: [ { cert: cert.pem, key: key.pem } ]",
                with: "certificates: [ { cert: cert.pem, key: key.pem }, { cert: cert.pem, key: other.key, server_names: [ b.test ] } ]"),
            mode: 0o644)
        let mismatch = try setup.checkConfig()
        #expect(mismatch.status == 78, "\(mismatch.stdout) \(mismatch.stderr)")
        #expect(
            mismatch.stderr.contains("listen[0].tls.certificates[1].key: the private key in \(setup.directory)/other.key does not match"),
            "\(mismatch.stderr)")
        #expect(!mismatch.stderr.contains("PRIVATE KEY"))

        try setup.write(
            "tokengate.yaml",
            yaml.replacingOccurrences(of: "{ cert: cert.pem, key: key.pem }", with: "{ cert: expired.pem, key: key.pem }"),
            mode: 0o644)
        let warned = try setup.checkConfig()
        #expect(warned.status == 0, "\(warned.stdout) \(warned.stderr)")
        #expect(
            warned.stderr.contains("warning: listen[0].tls.certificates[0].cert: \(setup.directory)/expired.pem has expired"),
            "\(warned.stderr)")
        #expect(!warned.stderr.contains("TLSError"), "a configuration message, not an error's type name: \(warned.stderr)")
    }

    /// An empty or short admin secret file fails `check-config` with words for what is wrong, and `serve`
    /// refuses it the same way before any public listener says "listening". Before, `check-config` said ok
    /// and `serve` called an empty (readable) file unreadable, after its listeners had started.
    @Test func checksTheAdminSecretFileAsServeReadsIt() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let setup = try Setup(admin: "admin: { address: 127.0.0.1:0, secret_file: admin.secret }")
        defer { setup.remove() }

        try setup.write("admin.secret", "\n", mode: 0o600)
        let empty = try setup.checkConfig()
        #expect(empty.status == 78, "\(empty.stdout) \(empty.stderr)")
        #expect(empty.stderr.contains("admin.secret") && empty.stderr.contains("is empty"), "\(empty.stderr)")
        #expect(!empty.stdout.contains("ok"), "\(empty.stdout)")

        let serve = try ChildProcess.run("/usr/bin/timeout", ["60", ServeCommandTests.binary, "serve", "--config", setup.path])
        #expect(serve.status == 78, "\(serve.stdout) \(serve.stderr)")
        #expect(serve.stderr.contains("is empty"), "\(serve.stderr)")
        #expect(!(serve.stdout + serve.stderr).contains("listening"), "nothing may start before the secret is read: \(serve.stdout) \(serve.stderr)")

        try setup.write("admin.secret", "short-secret\n", mode: 0o600)
        let short = try setup.checkConfig()
        #expect(short.status == 78, "\(short.stdout) \(short.stderr)")
        #expect(short.stderr.contains("too short"), "\(short.stderr)")
        #expect(!short.stderr.contains("short-secret"), "the secret itself is never printed: \(short.stderr)")

        try setup.write("admin.secret", String(repeating: "a", count: 32) + "\n", mode: 0o600)
        let good = try setup.checkConfig()
        #expect(good.status == 0, "\(good.stdout) \(good.stderr)")
        #expect(good.stdout.contains(": ok ("), "\(good.stdout)")
    }

    /// A cutoffs file that `serve` would refuse to start on is refused by `check-config` too, in the same words and
    /// with the same status (69). Before, `check-config` did not read the file and said ok.
    @Test func checksTheCutoffsFileAsServeReadsIt() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let setup = try Setup()
        defer { setup.remove() }
        try setup.write("cutoffs.json", #"{"users": {"alice": {"revoked_before": 5}, "alice": {}}}"#, mode: 0o600)
        let refused = try setup.checkConfig()
        #expect(refused.status == 69, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains(#"users["alice"] appears twice"#), "\(refused.stderr)")
        let serve = try ChildProcess.run("/usr/bin/timeout", ["60", ServeCommandTests.binary, "serve", "--config", setup.path])
        #expect(serve.status == 69, "\(serve.stdout) \(serve.stderr)")
        #expect(serve.stderr.contains(#"users["alice"] appears twice"#), "\(serve.stderr)")

        // A BOM and a time Python's json wrote as a float are fine.
        try setup.write("cutoffs.json", "\u{FEFF}" + #"{"users": {"alice": {"revoked_before": 1700000000.0}}}"#, mode: 0o600)
        let good = try setup.checkConfig()
        #expect(good.status == 0, "\(good.stdout) \(good.stderr)")
    }

    /// Private keys other users may read pass (Kubernetes mounts secrets 0644 by default) but are named in a
    /// warning, by `check-config` and in `serve`'s log; with mode 0600 there is no warning.
    @Test func warnsAboutPrivateKeysOthersMayRead() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let setup = try Setup()
        defer { setup.remove() }
        let clean = try setup.checkConfig()
        #expect(clean.status == 0, "\(clean.stdout) \(clean.stderr)")
        #expect(!clean.stderr.contains("warning"), "\(clean.stderr)")

        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: setup.directory + "/key.pem")
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: setup.directory + "/private.jwks")
        let ownGroup = try setup.checkConfig()
        #expect(ownGroup.stderr.split(separator: "\n").count == 1, "0640 with the gateway's own group is how a service gets a secret: \(ownGroup.stderr)")
        // A group the gateway is not in (the suite runs as root, which may give a file any group).
        try FileManager.default.setAttributes([.groupOwnerAccountID: 65_534], ofItemAtPath: setup.directory + "/private.jwks")
        let readable = try setup.checkConfig()
        #expect(readable.status == 0, "a warning, not a refusal: \(readable.stdout) \(readable.stderr)")
        #expect(readable.stdout.contains(": ok ("), "\(readable.stdout)")
        let lines = readable.stderr.split(separator: "\n")
        #expect(lines.count == 2, "\(readable.stderr)")
        #expect(
            lines.contains { $0.contains("warning: listen[0].tls.certificates[0].key") && $0.contains("mode 0644") && $0.contains("every user") },
            "\(readable.stderr)"
        )
        #expect(
            lines.contains { $0.contains("warning: signing_key.jwks") && $0.contains("mode 0640") && $0.contains("not one of the gateway's groups") },
            "\(readable.stderr)"
        )
        #expect(!readable.stderr.contains("BEGIN"), "no key material in a warning")
    }

    /// An HMAC JWK Set under `keys` is a secret (the key that verifies also signs): readable by others, it is
    /// named in a warning like the other secret files. A review found it passed silently.
    @Test func warnsAboutAnHMACKeySetOthersMayRead() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let setup = try Setup(keys: "keys: [ { jwks: hmac.jwks } ]\nsigning_key: { jwks: hmac.jwks }")
        defer { setup.remove() }
        let hmac = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-hmac")
        try setup.write("hmac.jwks", hmac.privateJWKS, mode: 0o600)
        let clean = try setup.checkConfig()
        #expect(clean.status == 0, "\(clean.stdout) \(clean.stderr)")
        #expect(!clean.stderr.contains("warning"), "\(clean.stderr)")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: setup.directory + "/hmac.jwks")
        let readable = try setup.checkConfig()
        #expect(readable.status == 0, "\(readable.stdout) \(readable.stderr)")
        #expect(
            readable.stderr.contains("warning: keys[0].jwks") && readable.stderr.contains("mode 0644"), "\(readable.stderr)")
    }

    /// A verification key set with private keys in it works, but copies the signing key to wherever
    /// verification keys go: `check-config` says so.
    @Test func warnsAboutPrivateKeysInTheVerificationKeySet() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let setup = try Setup(keys: "keys: [ { jwks: public.jwks }, { jwks: private.jwks } ]")
        defer { setup.remove() }
        // Two sets holding the same kid do not merge; give the public one another key.
        let other = try KeyGenerator.generate(algorithm: .edDSA, keyID: "other")
        try setup.write("public.jwks", other.publicJWKS, mode: 0o644)
        let result = try setup.checkConfig()
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains("warning: keys[1].jwks"), "\(result.stderr)")
        #expect(result.stderr.contains("private key material") && result.stderr.contains("kid \"test-only\""), "\(result.stderr)")
        #expect(!result.stderr.contains("keys[0]"), "the public set is fine: \(result.stderr)")
    }

    /// A token page whose signing key the verification keys do not hold mints tokens every API call refuses
    /// (`unknown_key`); the apps would loop back to the page. `check-config` warns (a review found it silent),
    /// and says nothing once the public key is listed.
    @Test func warnsAboutATokenPageWhoseTokensNoRouteAccepts() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let routes = "{ path_prefix: /api/, upstream: api, accept: [api] }\n"
            + "  - { path_prefix: /token, kind: token_page, login: { session_cookie: s, login_url: /login } }"
        let setup = try Setup(route: routes)
        defer { setup.remove() }
        let listed = try setup.checkConfig()
        #expect(listed.status == 0, "\(listed.stdout) \(listed.stderr)")
        #expect(!listed.stderr.contains("token page"), "\(listed.stderr)")

        let other = try KeyGenerator.generate(algorithm: .edDSA, keyID: "other")
        try setup.write("public.jwks", other.publicJWKS, mode: 0o644)
        let result = try setup.checkConfig()
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(
            result.stderr.contains("warning: routes[1] (token page /token) mints tokens that no route accepting api tokens accepts (/api/: unknown_key)"),
            "\(result.stderr)")
    }

    /// `server_names` that the certificate does not hold only choose which certificate a client with that SNI
    /// gets; the client then fails its name check. `check-config` names each such name and the certificate,
    /// and stays quiet about the names the certificate covers (its own, and one under its wildcard).
    @Test func warnsAboutServerNamesTheCertificateDoesNotHold() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let setup = try Setup()
        defer { setup.remove() }
        let certificate = try SelfSignedCertificate.generate(hostnames: ["api.example.com", "*.apps.example.com"])
        try setup.write("named.pem", certificate.certificatePEM, mode: 0o644)
        try setup.write("named.key", certificate.privateKeyPEM, mode: 0o600)
        let yaml = try String(contentsOfFile: setup.path, encoding: .utf8).replacingOccurrences(
            of: "tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }",
            with: "tls: { certificates: [ { cert: cert.pem, key: key.pem }, { cert: named.pem, key: named.key, "
                + "server_names: [ api.example.com, \"*.apps.example.com\", apl.example.com, \"*.example.com\" ] } ] }"
        )
        try setup.write("tokengate.yaml", yaml, mode: 0o644)
        let result = try setup.checkConfig()
        #expect(result.status == 0, "a warning, not an error: \(result.stdout) \(result.stderr)")
        let warnings = result.stderr.split(separator: "\n").filter { $0.contains("server_names") }
        #expect(warnings.count == 1, "\(result.stderr)")
        let warning = String(warnings.first ?? "")
        #expect(warning.contains("warning: listen[0].tls.certificates[1].server_names: apl.example.com, *.example.com are not in the certificate named.pem"), "\(warning)")
        #expect(!warning.contains("api.example.com") && !warning.contains("*.apps.example.com"), "\(warning)")
    }

    /// An RSA JWK without `alg` serves RS256 and PS256, so the token's header would choose: `check-config`
    /// and `serve` refuse it, naming the file, the kid and both fixes; `alg` on the keys entry binds it.
    /// Before, it loaded and accepted both algorithms.
    @Test func refusesAJWKWhoseAlgorithmIsAmbiguous() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let setup = try Setup(keys: "keys: [ { jwks: rsa.jwks } ]")
        defer { setup.remove() }
        let rsa = try KeyGenerator.generate(algorithm: .rs256, keyID: "rsa-1")
        let withoutAlg = rsa.publicJWKS.replacingOccurrences(of: #""alg" : "RS256","#, with: "")
        try #require(withoutAlg != rsa.publicJWKS)
        try setup.write("rsa.jwks", withoutAlg, mode: 0o644)

        let refused = try setup.checkConfig()
        #expect(refused.status == 78, "\(refused.stdout) \(refused.stderr)")
        for part in ["rsa.jwks", "kid 'rsa-1'", "RS256, PS256", "set 'alg' on the JWK", "its keys entry"] {
            #expect(refused.stderr.contains(part), "\(part): \(refused.stderr)")
        }
        let serve = try ChildProcess.run("/usr/bin/timeout", ["60", ServeCommandTests.binary, "serve", "--config", setup.path])
        #expect(serve.status == 78, "\(serve.stdout) \(serve.stderr)")
        #expect(serve.stderr.contains("kid 'rsa-1'") && serve.stderr.contains("RS256, PS256"), "\(serve.stderr)")
        #expect(!serve.stderr.contains("listening"), "\(serve.stderr)")

        let text = try String(contentsOfFile: setup.path, encoding: .utf8)
        try setup.write(
            "tokengate.yaml",
            text.replacingOccurrences(of: "{ jwks: rsa.jwks }", with: "{ jwks: rsa.jwks, alg: PS256 }"),
            mode: 0o644
        )
        let bound = try setup.checkConfig()
        #expect(bound.status == 0, "\(bound.stdout) \(bound.stderr)")
    }

    /// A key entry that fails to load is named by its index and source, not only by what is wrong with it
    /// ("the HMAC secret has 5 bytes" alone does not say which of several entries).
    @Test func aKeyThatFailsToLoadIsNamedByItsEntry() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let setup = try Setup(keys: "keys: [ { jwks: public.jwks }, { hmac_file: short.key, alg: HS256, kid: h1 } ]")
        defer { setup.remove() }
        try setup.write("short.key", "12345", mode: 0o600)
        let refused = try setup.checkConfig()
        #expect(refused.status == 78, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("keys[1] (hmac_file short.key): "), "\(refused.stderr)")
        #expect(!refused.stderr.contains("12345"), "the secret itself is never shown")
    }

    /// `keys` is required only when a route takes tokens: without any, a gateway of public routes passes
    /// `check-config` (before: "keys: no verification key is configured"); a route that takes tokens is still
    /// refused, by name.
    @Test func keysAreNeededOnlyByRoutesThatTakeTokens() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let open = try Setup(keys: "", route: "{ path_prefix: /, upstream: api, accept: none }")
        defer { open.remove() }
        let passed = try open.checkConfig()
        #expect(passed.status == 0, "\(passed.stdout) \(passed.stderr)")
        #expect(passed.stdout.contains(": ok ("), "\(passed.stdout)")

        let guarded = try Setup(keys: "")
        defer { guarded.remove() }
        let refused = try guarded.checkConfig()
        #expect(refused.status == 78, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("routes[0].accept") && refused.stderr.contains("no keys"), "\(refused.stderr)")
    }

    /// A SQLite path naming a directory or a file that is not a database: `serve` refuses to start, and
    /// `check-config` refuses it too, with the same words. Before, `check-config` said ok. A path with nothing
    /// there yet passes both: `serve` creates the store at its first start.
    @Test func refusesASQLitePathThatServeRefusesInTheSameWords() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let setup = try Setup(cutoffs: "cutoffs: { sqlite: cutoffs.db }")
        defer { setup.remove() }
        let path = setup.directory + "/cutoffs.db"

        let missing = try setup.checkConfig()
        #expect(missing.status == 0, "serve creates a missing file: \(missing.stdout) \(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path), "check-config creates nothing")

        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        try self.expectRefusedAlike(setup, saying: "\(path) is a directory, not a SQLite database file")
        try FileManager.default.removeItem(atPath: path)

        try setup.write("cutoffs.db", String(repeating: "not a database\n", count: 100), mode: 0o600)
        try self.expectRefusedAlike(setup, saying: "\(path) is not a SQLite database")

        // An existing file is never given a schema: an empty one (a store that lost its content), a database without
        // tables, another application's. Before, check-config passed all three and serve made them a new, empty
        // store (and added its tables to the other application's database).
        try setup.write("cutoffs.db", "", mode: 0o600)
        try self.expectRefusedAlike(setup, saying: "\(path) is empty (0 bytes), so it is not a tokengate cutoff store")
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == 0)
        for (sql, what) in [
            ("PRAGMA user_version = 7", "a SQLite database without tables"),
            ("CREATE TABLE orders (id INTEGER PRIMARY KEY)", "a SQLite database with 1 table, none of them tokengate's"),
        ] {
            try FileManager.default.removeItem(atPath: path)
            let created = try ChildProcess.run(
                "/usr/bin/env", ["python3", "-c", "import sqlite3, sys; sqlite3.connect(sys.argv[1]).executescript(sys.argv[2])", path, sql])
            try #require(created.status == 0, "\(created.stderr)")
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            try self.expectRefusedAlike(
                setup, saying: "\(path): the file is \(what), not a tokengate cutoff store",
                prefix: "cutoff store: invalid_store_file: sqlite ")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(what): left as it was")
            #expect(try FileManager.default.contentsOfDirectory(atPath: setup.directory).filter { $0.hasPrefix("cutoffs.db") } == ["cutoffs.db"])
        }
    }

    /// `check-config` and `serve` both exit 69 (the store cannot be used as it is, as `revoke` says of it) naming
    /// `cutoffs.sqlite` with `reason`, and `serve` starts nothing.
    private func expectRefusedAlike(_ setup: Setup, saying reason: String, prefix: String = "cutoff store: cutoffs.sqlite: ") throws {
        let check = try setup.checkConfig()
        #expect(check.status == 69, "\(check.stdout) \(check.stderr)")
        #expect(!check.stdout.contains("ok"), "\(check.stdout)")
        let serve = try ChildProcess.run("/usr/bin/timeout", ["60", ServeCommandTests.binary, "serve", "--config", setup.path])
        #expect(serve.status == 69, "\(serve.stdout) \(serve.stderr)")
        #expect(!(serve.stdout + serve.stderr).contains("listening"), "\(serve.stdout) \(serve.stderr)")
        let expected = prefix + reason
        #expect(check.stderr.contains(expected), "\(check.stderr)")
        #expect(serve.stderr.contains(expected), "\(serve.stderr)")
    }

    /// `--connect` asks the PostgreSQL server what only it can say (here: that it is not there, 75, as `serve` would
    /// exit), and without the flag nothing is connected to (0, as before).
    @Test func connectReachesThePostgresStoreOnlyWhenAsked() throws {
        let port = try GatewayIntegrationTests.unusedPort()
        let setup = try Setup(cutoffs: "cutoffs: { postgres: \"postgres://tokengate@127.0.0.1:\(port)/tokengate?sslmode=disable\" }")
        defer { setup.remove() }
        let offline = try setup.checkConfig()
        #expect(offline.status == 0, "\(offline.stdout) \(offline.stderr)")
        let connected = try setup.checkConfig(["--connect"])
        #expect(connected.status == 75, "\(connected.stdout) \(connected.stderr)")
        #expect(connected.stderr.contains("cutoff store") && connected.stderr.contains("store_unavailable"), "\(connected.stderr)")
    }

    /// With a real server (`TOKENGATE_TEST_POSTGRES_URL`): a fresh table name passes, saying the first start will
    /// create the tables, and nothing is created by the check.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["TOKENGATE_TEST_POSTGRES_URL"]?.isEmpty == false))
    func connectReportsTablesTheFirstStartWillCreate() throws {
        let url = try #require(ProcessInfo.processInfo.environment["TOKENGATE_TEST_POSTGRES_URL"])
        let table = "tg_check_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let setup = try Setup(cutoffs: "cutoffs: { postgres: \"\(url)\", table: \(table), channel: \(table) }")
        defer { setup.remove() }
        let result = try setup.checkConfig(["--connect"])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("cutoff store: connected; tokengate's tables do not exist yet"), "\(result.stdout)")
        let exists = try ChildProcess.run(
            "/usr/bin/env", ["psql", url, "-X", "-q", "-At", "-c", "SELECT to_regclass('\(table)_global') IS NULL"])
        #expect(exists.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "t", "check-config created a table")
    }

}

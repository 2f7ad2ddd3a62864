//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateConfig
import TokengateTestSupport

@testable import TokengateGateway

#if canImport(Glibc)
    import Glibc
#endif

/// `tls.client_certificate` and `secret_header` against a backend that accepts the gateway only: Python's
/// http.server behind Python's `ssl` with `CERT_REQUIRED` (scripts/backends/tls_backend.py), with certificates
/// made by the `openssl` command. With the certificate the requests pass and the backend sees exactly one copy of
/// the secret; without one, or with one from another CA, the backend's TLS refuses and the gateway answers 502
/// and logs why.
extension GatewayIntegrationTests {
    /// A CA, the backend's certificate for 127.0.0.1, the gateway's client certificate from the same CA, and a
    /// client certificate from another CA, all made with `openssl`.
    struct TrustFiles {
        let directory: String

        init(directory: String) throws {
            self.directory = directory
            func openssl(_ arguments: [String]) throws {
                let result = try ChildProcess.run("/usr/bin/openssl", arguments)
                guard result.status == 0 else { throw GatewayStartupError("openssl \(arguments.first ?? ""): \(result.stderr)") }
            }
            func authority(_ name: String) throws {
                try openssl([
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "\(directory)/\(name).key",
                    "-out", "\(directory)/\(name).crt", "-days", "2", "-subj", "/CN=\(name)", "-addext", "basicConstraints=critical,CA:TRUE",
                ])
            }
            func leaf(_ name: String, by issuer: String, extensions: String) throws {
                try openssl([
                    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "\(directory)/\(name).key",
                    "-out", "\(directory)/\(name).csr", "-subj", "/CN=\(name)",
                ])
                try extensions.write(toFile: "\(directory)/\(name).ext", atomically: true, encoding: .utf8)
                try openssl([
                    "x509", "-req", "-in", "\(directory)/\(name).csr", "-CA", "\(directory)/\(issuer).crt", "-CAkey", "\(directory)/\(issuer).key",
                    "-CAcreateserial", "-days", "2", "-out", "\(directory)/\(name).crt", "-extfile", "\(directory)/\(name).ext",
                ])
            }
            try authority("backend-ca")
            try authority("other-ca")
            try leaf("backend", by: "backend-ca", extensions: "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
            try leaf("gateway-client", by: "backend-ca", extensions: "extendedKeyUsage=clientAuth\n")
            try leaf("stranger", by: "other-ca", extensions: "extendedKeyUsage=clientAuth\n")
        }
    }

    /// scripts/backends/tls_backend.py on a loopback port, stopped with ``stop()``.
    final class PythonTLSBackend {
        let process = Process()
        let port: Int

        init(files: TrustFiles, secretHeader: String, secretFile: String) async throws {
            self.port = try GatewayIntegrationTests.unusedPort()
            self.process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            self.process.arguments = [
                "python3", FrameworkScript.packageRoot.appendingPathComponent("scripts/backends/tls_backend.py").path,
                "--port", "\(self.port)", "--cert", "\(files.directory)/backend.crt", "--key", "\(files.directory)/backend.key",
                "--client-ca", "\(files.directory)/backend-ca.crt", "--secret-header", secretHeader, "--secret-file", secretFile,
            ]
            self.process.standardOutput = FileHandle.nullDevice
            self.process.standardError = FileHandle.nullDevice
            try self.process.run()
            for _ in 0..<100 where !GatewayIntegrationTests.acceptsQuickly(port: self.port) {
                try await Task.sleep(for: .milliseconds(50))
            }
        }

        func stop() {
            kill(self.process.processIdentifier, SIGKILL)
            self.process.waitUntilExit()
        }
    }

    @Test func aBackendRequiringClientCertificatesAcceptsTheGatewayOnly() async throws {
        let harness = GatewayHarness()
        try FileManager.default.createDirectory(atPath: harness.directory, withIntermediateDirectories: true)
        let files = try TrustFiles(directory: harness.directory)
        let secret = "s3cr3t-" + UUID().uuidString.lowercased()
        try (secret + "\n").write(toFile: harness.directory + "/backend.secret", atomically: true, encoding: .utf8)
        let backend = try await PythonTLSBackend(files: files, secretHeader: "X-Backend-Secret", secretFile: harness.directory + "/backend.secret")
        defer { backend.stop() }
        let target = "\"https://127.0.0.1:\(backend.port)\""
        let secretHeader = "secret_header: { name: X-Backend-Secret, value_file: backend.secret }, health_check: { path: /health, interval: 300ms, timeout: 300ms }"
        do {
            try await harness.start(
                routes: """
                      - { path_prefix: /mtls/, upstream: mtls, accept: none }
                      - { path_prefix: /nocert/, upstream: nocert, accept: none }
                      - { path_prefix: /stranger/, upstream: stranger, accept: none }
                      - { path_prefix: /, upstream: api, accept: none }
                    """,
                upstreams: """
                      api: { targets: [ "http://127.0.0.1:{UPSTREAM}" ] }
                      mtls: { targets: [ \(target) ], retries: 0, tls: { ca_file: backend-ca.crt, client_certificate: { cert: gateway-client.crt, key: gateway-client.key } }, \(secretHeader) }
                      nocert: { targets: [ \(target) ], retries: 0, tls: { ca_file: backend-ca.crt }, \(secretHeader) }
                      stranger: { targets: [ \(target) ], retries: 0, tls: { ca_file: backend-ca.crt, client_certificate: { cert: stranger.crt, key: stranger.key } }, \(secretHeader) }
                    """
            )
            // With the certificate: the backend saw the gateway's certificate and one secret, the gateway's, though
            // the client sent two of its own.
            let passed = try self.curl(harness, [
                "-H", "X-Backend-Secret: forged", "-H", "x-backend-secret: \(secret)", "-H", "X-Request-Id: mtls-ok", "\(harness.baseURL)/mtls/x",
            ])
            #expect(passed.status == 200, "\(passed.status) \(passed.body)")
            #expect(passed.body == #"{"client": "gateway-client", "secret_fields": 1, "secret_ok": true, "user": null}"#, "\(passed.body)")

            for (path, alert) in [("nocert", "certificate required"), ("stranger", "unknown ca")] {
                let refused = try self.curl(harness, ["-H", "X-Request-Id: mtls-\(path)", "\(harness.baseURL)/\(path)/x"])
                #expect(refused.status == 502, "\(path): \(refused.status) \(refused.body)")
                let lines = harness.logLines.all.filter { $0.contains("request_id=mtls-\(path)") }
                let warning = lines.first { $0.contains("upstream TLS connection failed") } ?? ""
                #expect(warning.contains("upstream=\(path)") && warning.contains("target=https://127.0.0.1:\(backend.port)"), "\(lines)")
                #expect(warning.contains(alert), "\(path): \(warning)")
                #expect(lines.contains { $0.contains(" request ") && $0.contains("status=502") }, "\(lines)")
            }
            // The health checks go the same way: over TLS with the client certificate and the secret (the backend
            // answers 403 without it), and refused without the certificate.
            func lastCheck(_ upstream: String) throws -> String {
                let json = harness.server.upstreamsJSON()
                let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
                let entry = (object?["upstreams"] as? [[String: Any]])?.first { $0["name"] as? String == upstream }
                return ((entry?["targets"] as? [[String: Any]])?.first?["last_check"] as? String) ?? "none yet"
            }
            var checks: (String, String) = ("", "")
            for _ in 0..<100 {
                checks = (try lastCheck("mtls"), try lastCheck("nocert"))
                if checks.0 != "none yet", checks.1 != "none yet" { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(checks.0 == "status 200", "\(checks)")
            #expect(checks.1.contains("certificate required"), "\(checks)")
            // The secret is in no log line, not even at debug.
            #expect(!harness.logLines.all.contains { $0.contains(secret) })
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    @Test func clientCertificatesAndSecretsThatDoNotLoadAreRefusedAndAReloadKeepsThePreviousOnes() async throws {
        let harness = GatewayHarness()
        try FileManager.default.createDirectory(atPath: harness.directory, withIntermediateDirectories: true)
        let files = try TrustFiles(directory: harness.directory)
        let directory = harness.directory
        let secret = "0123456789abcdef-" + UUID().uuidString
        try secret.write(toFile: directory + "/backend.secret", atomically: true, encoding: .utf8)
        let backend = try await PythonTLSBackend(files: files, secretHeader: "X-Backend-Secret", secretFile: directory + "/backend.secret")
        defer { backend.stop() }
        // Copies the client certificate's files do not change under a running test.
        for name in ["gateway-client.crt", "gateway-client.key"] {
            try FileManager.default.copyItem(atPath: "\(directory)/\(name)", toPath: "\(directory)/live-\(name)")
        }
        do {
            try await harness.start(
                routes: "  - { path_prefix: /, upstream: mtls, accept: none }",
                upstreams: """
                      mtls: { targets: [ "https://127.0.0.1:\(backend.port)" ], tls: { ca_file: backend-ca.crt, client_certificate: { cert: live-gateway-client.crt, key: live-gateway-client.key } }, secret_header: { name: X-Backend-Secret, value_file: backend.secret } }
                    """
            )
            let path = directory + "/tokengate.yaml"
            let original = try String(contentsOfFile: path, encoding: .utf8)
            func passes() throws -> Bool {
                let answer = try self.curl(harness, ["\(harness.baseURL)/x"])
                return answer.status == 200 && answer.body.contains(#""secret_ok": true"#)
            }
            #expect(try passes())

            // A key that is not the certificate's: the configuration names the key, and the reload is refused.
            let mismatched = original.replacingOccurrences(of: "key: live-gateway-client.key", with: "key: stranger.key")
            try mismatched.write(toFile: path, atomically: true, encoding: .utf8)
            let mismatch = "\((try? harness.server.reload(configurationPath: path)).map { "reloaded" } ?? "")"
            #expect(mismatch.isEmpty)
            do {
                try harness.server.reload(configurationPath: path)
            } catch {
                #expect("\(error)".hasPrefix("upstreams.mtls.tls.client_certificate.key: the private key in "), "\(error)")
                #expect("\(error)".contains("does not match the certificate"), "\(error)")
            }
            // The certificate file gone, then unreadable content: refused, naming the setting; the previous
            // certificate keeps serving.
            try original.write(toFile: path, atomically: true, encoding: .utf8)
            try FileManager.default.removeItem(atPath: directory + "/live-gateway-client.crt")
            #expect(throws: (any Error).self) { try harness.server.reload(configurationPath: path) }
            try "not a certificate".write(toFile: directory + "/live-gateway-client.crt", atomically: true, encoding: .utf8)
            do {
                try harness.server.reload(configurationPath: path)
                Issue.record("a certificate file without PEM was accepted")
            } catch {
                #expect("\(error)".hasPrefix("upstreams.mtls.tls.client_certificate.cert: "), "\(error)")
                #expect("\(error)".contains("is not PEM"), "\(error)")
            }
            // A secret that is too short, or holds a line break inside: refused without quoting it.
            try FileManager.default.removeItem(atPath: directory + "/live-gateway-client.crt")
            try FileManager.default.copyItem(atPath: "\(directory)/gateway-client.crt", toPath: "\(directory)/live-gateway-client.crt")
            for bad in ["short-secret", "first-half-of-it\nsecond-half-of-it"] {
                try bad.write(toFile: directory + "/backend.secret", atomically: true, encoding: .utf8)
                do {
                    try harness.server.reload(configurationPath: path)
                    Issue.record("the secret \(bad.count) bytes long was accepted")
                } catch {
                    #expect("\(error)".hasPrefix("upstreams.mtls.secret_header.value_file: the secret in "), "\(error)")
                    #expect(!"\(error)".contains("short-secret") && !"\(error)".contains("half-of-it"), "\(error)")
                }
            }
            #expect(harness.server.generation == 1)
            #expect(try passes(), "the first certificate and secret still serve")
            // Fixed: the reload goes through.
            try secret.write(toFile: directory + "/backend.secret", atomically: true, encoding: .utf8)
            try harness.server.reload(configurationPath: path)
            #expect(harness.server.generation == 2)
            #expect(try passes())
            #expect(!harness.logLines.all.contains { $0.contains(secret) })
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }
}

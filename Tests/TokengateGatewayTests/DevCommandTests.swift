//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

/// `tokengate dev`, started as a first-time user starts it: the banner it prints must work for the
/// configuration it runs.
@Suite(.serialized)
struct DevCommandTests {
    static let shippedConfiguration = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Config/dev.yaml").path

    /// Runs `tokengate dev` on the shipped dev configuration with its addresses moved to free ports, by
    /// `edit`, and returns what it printed once it served (or after 30 s), or, when it stopped by itself,
    /// what it printed on both outputs. `whileServing` runs before `dev` is stopped, given that text.
    private func banner(
        _ edit: (String, [String: Int]) -> String,
        whileServing: (String) throws -> Void = { _ in }
    ) async throws -> String {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let directory = NSTemporaryDirectory() + "tokengate-dev-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/Config", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var ports: [String: Int] = [:]
        for name in ["tls", "plain", "admin", "backend"] { ports[name] = try GatewayIntegrationTests.unusedPort() }
        var yaml = try String(contentsOfFile: Self.shippedConfiguration, encoding: .utf8)
        yaml = yaml.replacingOccurrences(of: "127.0.0.1:8443", with: "127.0.0.1:\(ports["tls"]!)")
            .replacingOccurrences(of: "127.0.0.1:9901", with: "127.0.0.1:\(ports["admin"]!)")
            .replacingOccurrences(of: "127.0.0.1:9000", with: "127.0.0.1:\(ports["backend"]!)")
        yaml = edit(yaml, ports)
        try yaml.write(toFile: directory + "/Config/dev.yaml", atomically: true, encoding: .utf8)

        let output = directory + "/stdout"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ServeCommandTests.binary)
        process.arguments = [
            "dev", "--config", directory + "/Config/dev.yaml", "--backend-port", String(ports["backend"]!),
        ]
        let outputHandle = FileHandle(forWritingAtPath: output)
        process.standardOutput = outputHandle
        process.standardError = outputHandle
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        var text = ""
        for _ in 0..<300 where !text.contains("Ctrl-C stops the gateway.") && process.isRunning {
            try await Task.sleep(for: .milliseconds(100))
            text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        }
        if !process.isRunning {
            text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            text += "\n[exit \(process.terminationStatus)]"
        }
        try whileServing(text)
        return text
    }

    /// On a terminal (a real pseudo-terminal from util-linux's `script`), `dev` writes console lines, not JSON,
    /// at `info`: the access line of a request reads `request GET /api/hello 426 tls_required …`, and no debug
    /// line is printed.
    @Test func onATerminalDevLogsConsoleLinesAtInfo() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let directory = NSTemporaryDirectory() + "tokengate-dev-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/Config", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var ports: [String: Int] = [:]
        for name in ["tls", "plain", "admin", "backend"] { ports[name] = try GatewayIntegrationTests.unusedPort() }
        let yaml = try String(contentsOfFile: Self.shippedConfiguration, encoding: .utf8)
            .replacingOccurrences(of: "127.0.0.1:8443", with: "127.0.0.1:\(ports["tls"]!)")
            .replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(ports["plain"]!)")
            .replacingOccurrences(of: "127.0.0.1:9901", with: "127.0.0.1:\(ports["admin"]!)")
            .replacingOccurrences(of: "127.0.0.1:9000", with: "127.0.0.1:\(ports["backend"]!)")
        try yaml.write(toFile: directory + "/Config/dev.yaml", atomically: true, encoding: .utf8)
        let output = directory + "/terminal"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = [
            "-qfec",
            "exec '\(ServeCommandTests.binary)' dev --config '\(directory)/Config/dev.yaml' --backend-port \(ports["backend"]!)",
            "/dev/null",
        ]
        process.standardOutput = FileHandle(forWritingAtPath: output)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        defer {
            // `script`'s child is the gateway: SIGTERM to it by its id (closing the terminal would send SIGHUP,
            // which reloads), and `script` ends with it.
            let children = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/task/\(process.processIdentifier)/children", encoding: .utf8)) ?? ""
            for child in children.split(separator: " ").compactMap({ Int32($0) }) { kill(child, SIGTERM) }
            process.waitUntilExit()
        }
        var text = ""
        for _ in 0..<300 where !text.contains("Ctrl-C stops the gateway.") && process.isRunning {
            try await Task.sleep(for: .milliseconds(100))
            text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        }
        try #require(text.contains("Ctrl-C stops the gateway."), "\(text)")
        let refused = try Curl.run(["-A", "terminal-test", "http://127.0.0.1:\(ports["plain"]!)/api/hello?x=1"], caFile: nil)
        #expect(refused.status == 426)
        var line: Substring?
        for _ in 0..<50 where line == nil {
            text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            line = text.split(whereSeparator: \.isNewline).first { $0.contains("request GET /api/hello 426 tls_required") }
            if line == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let requestLine = try #require(line, "no console access line: \(text)")
        #expect(requestLine.contains(" info ") && requestLine.contains("client=127.0.0.1") && requestLine.contains("user_agent=terminal-test"))
        let lines = text.split(whereSeparator: \.isNewline)
        #expect(!lines.contains { $0.hasPrefix("{") }, "JSON on a terminal: \(text)")
        #expect(!lines.contains { $0.contains("Z debug ") }, "debug lines from dev: \(text)")
        #expect(lines.contains { $0.contains(" info    starting version=") }, "\(text)")
    }

    /// The plain-HTTP line names the configured plain listener, not a fixed `127.0.0.1:8080`.
    @Test func theBannerNamesTheConfiguredPlainListener() async throws {
        var plainPort = 0
        let text = try await self.banner { yaml, ports in
            plainPort = ports["plain"]!
            return yaml.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(plainPort)")
        }
        #expect(text.contains("curl http://127.0.0.1:\(plainPort)/api/hello"), "\(text)")
        #expect(!text.contains(":8080"), "\(text)")
        #expect(text.contains("over plain HTTP (426)"), "\(text)")
    }

    /// Without a plain listener there is no plain-HTTP line at all.
    @Test func theBannerHasNoPlainLineWithoutAPlainListener() async throws {
        let text = try await self.banner { yaml, _ in
            yaml.replacingOccurrences(of: "  - address: 127.0.0.1:8080\n    plain_http: reject          # never forwards: 426 with a JSON error\n", with: "")
        }
        #expect(text.contains("Ctrl-C stops the gateway."), "\(text)")
        #expect(!text.contains("curl http://"), "\(text)")
        #expect(!text.contains("plain HTTP"), "\(text)")
    }

    /// The banner's first `curl` line, run as printed (from the same directory), reaches the demo backend
    /// with its token, and its second is refused: the certificate it names is the one the gateway serves
    /// and the token is signed by the key the gateway checks. The configuration keeps its files outside any
    /// `.dev/` directory: `dev` generates them where the configuration reads them.
    @Test func theBannersCurlLinesWorkForAConfigurationWithItsOwnPaths() async throws {
        var results: [Curl.Result] = []
        var banner = ""
        _ = try await self.banner { yaml, _ in
            yaml.replacingOccurrences(of: "../.dev/tls/cert.pem", with: "../pki/gateway.crt")
                .replacingOccurrences(of: "../.dev/tls/key.pem", with: "../pki/private/gateway.key")
                .replacingOccurrences(of: "../.dev/keys/public.jwks", with: "../jwks/verify.jwks")
                .replacingOccurrences(of: "../.dev/keys/private.jwks", with: "../jwks/private/sign.jwks")
        } whileServing: { text in
            banner = text.split(separator: "\n").filter { $0.contains("curl ") || $0.contains("token mint") }.joined(separator: "\n")
            let line = try #require(text.split(separator: "\n").first { $0.contains("Authorization: Bearer") }, "\(text)")
            let words = line.split(separator: " ").map(String.init)
            let caFile = try #require(words.firstIndex(of: "--cacert").map { words[$0 + 1] }, "\(line)")
            let token = try #require(words.firstIndex(of: "Bearer").map { words[$0 + 1].trimmingCharacters(in: ["\""]) }, "\(line)")
            let url = try #require(words.last, "\(line)")
            results.append(try Curl.run(["-H", "Authorization: Bearer \(token)", url], caFile: caFile))
            results.append(try Curl.run([url], caFile: caFile))
        }
        #expect(banner.contains("--cacert /") && banner.contains("pki/gateway.crt"), "\(banner)")
        #expect(banner.contains("jwks/private/sign.jwks") && !banner.contains(".dev/"), "\(banner)")
        try #require(results.count == 2)
        #expect(results[0].status == 200, "\(results[0].body) \(results[0].stderr)")
        #expect(results[1].status == 401, "\(results[1].body) \(results[1].stderr)")
    }

    /// A configuration `dev` cannot generate keys for (its signing key is a PEM file) is refused with a
    /// message that says so, before anything is bound.
    @Test func aConfigurationWithoutAJWKSSigningKeyIsRefusedByName() async throws {
        let text = try await self.banner { yaml, _ in
            yaml.replacingOccurrences(of: "signing_key:\n  jwks: ../.dev/keys/private.jwks", with: "signing_key:\n  pem: ../.dev/keys/private.pem\n  alg: EdDSA")
        }
        #expect(text.contains("[exit 78]"), "a configuration `dev` cannot use: \(text)")
        #expect(text.contains("`signing_key` must be a `jwks:` file"), "\(text)")
        #expect(!text.contains("Ctrl-C stops the gateway."), "\(text)")
    }
}

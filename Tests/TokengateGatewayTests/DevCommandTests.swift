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
    /// `edit`, and returns what it printed once it served (or after 30 s).
    private func banner(_ edit: (String, [String: Int]) -> String) async throws -> String {
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
            "dev", "--config", directory + "/Config/dev.yaml", "--directory", directory + "/.dev",
            "--backend-port", String(ports["backend"]!),
        ]
        process.standardOutput = FileHandle(forWritingAtPath: output)
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        var text = ""
        for _ in 0..<300 where !text.contains("Ctrl-C stops the gateway.") {
            try await Task.sleep(for: .milliseconds(100))
            text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        }
        return text
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
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTestSupport
import TokengateTokens

/// The `tokengate-bench` binary's HTTP/2 client (`--http 2`) against a real gateway on loopback: every kind of
/// token in the mix gets its own answer over many concurrent streams, and a server without h2 is refused
/// clearly instead of being measured over HTTP/1.1.
@Suite(.serialized)
struct BenchHTTP2Tests {
    static let binary = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build/debug/tokengate-bench").path

    /// Runs `body` against a gateway started with the bench's cutoffs (every bench user revoked one day ago),
    /// so all five kinds have their default expectation: api 200, session 403, revoked 401, bad_signature 401,
    /// form 200. The gateway is stopped afterwards, whatever `body` did.
    private func withGateway(
        limits: String = "",
        _ body: (GatewayHarness) async throws -> Void
    ) async throws {
        let harness = GatewayHarness()
        do {
            try await harness.start(limits: limits)
            let cutoffs = harness.directory + "/bench-cutoffs.json"
            let written = try ChildProcess.run(Self.binary, ["cutoffs", "--users", "40", "--out", cutoffs])
            try #require(written.status == 0, "\(written.stderr)")
            harness.cutoffs.store(try CutoffSnapshot.load(jsonFile: cutoffs))
            try await body(harness)
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    private func bench(_ harness: GatewayHarness, _ arguments: [String]) throws -> ChildProcess.Result {
        let common = [
            "run", "--url", "https://127.0.0.1:\(harness.tlsPort)/api/bench", "--cacert", harness.certificatePath,
            "--key", harness.directory + "/private.jwks", "--users", "40", "--max-time", "60", "--grace", "5",
        ]
        return try ChildProcess.run("/usr/bin/timeout", ["120", Self.binary] + common + arguments)
    }

    @Test func closedLoopOverManyStreamsGetsEveryKindsExpectedAnswer() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build tokengate-bench first")
        try await self.withGateway { harness in
            let json = harness.directory + "/report.json"
            let result = try self.bench(
                harness,
                ["--http", "2", "--connections", "2", "--streams", "8", "--requests", "600", "--json", json, "--strict"]
            )
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
            let report = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any]
            )
            #expect(report["protocol"] as? String == "h2")
            #expect(report["alpn"] as? String == "h2")
            #expect(report["streams_per_connection"] as? Int == 8)
            #expect(report["requests_completed"] as? Int == 600)
            #expect(report["unexpected_statuses"] as? Int == 0)
            #expect((report["errors"] as? [String: Int])?.isEmpty == true, "\(report["errors"] ?? "")")
            let kinds = try #require(report["kinds"] as? [String: [String: Any]])
            let expected = ["api": "200", "session": "403", "revoked": "401", "bad_signature": "401", "form": "200"]
            for (kind, status) in expected {
                let statuses = kinds[kind]?["statuses"] as? [String: Int]
                #expect(statuses?.keys.sorted() == [status], "\(kind): \(statuses ?? [:])")
                #expect((statuses?[status] ?? 0) > 0, "\(kind) was never sent")
            }
        }
    }

    @Test func fixedRateOverHTTP2AnswersEveryRequest() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build tokengate-bench first")
        try await self.withGateway { harness in
            let json = harness.directory + "/report.json"
            let result = try self.bench(
                harness,
                [
                    "--http", "2", "--connections", "2", "--streams", "4", "--rate", "200", "--duration", "1",
                    "--json", json,
                ]
            )
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
            let report = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any]
            )
            #expect(report["mode"] as? String == "fixed-rate")
            // 200/s for one second: the schedule holds exactly 200 intended send times.
            #expect(report["requests_sent"] as? Int == 200)
            #expect(report["requests_completed"] as? Int == 200)
            #expect(report["unexpected_statuses"] as? Int == 0)
        }
    }

    @Test func refusesAServerWithoutH2() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build tokengate-bench first")
        try await self.withGateway(limits: "http2: { enabled: false }") { harness in
            let result = try self.bench(harness, ["--http", "2", "--connections", "1", "--duration", "1"])
            #expect(result.status == 2, "\(result.stdout)\n\(result.stderr)")
            #expect(result.stderr.contains("h2"), "the failure must say that h2 was not negotiated: \(result.stderr)")
            #expect(!result.stdout.contains("req/s"), "no report for a run that never started")
        }
    }

    @Test func refusesStreamsOverHTTP1() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build tokengate-bench first")
        let result = try ChildProcess.run(
            "/usr/bin/timeout", ["60", Self.binary, "run", "--http", "1.1", "--streams", "4", "--key", "/nonexistent"]
        )
        #expect(result.status != 0)
        #expect(result.stderr.contains("--streams"), "\(result.stderr)")
    }
}

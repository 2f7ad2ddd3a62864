//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateHTTP
import TokengateTestSupport
import TokengateTokens

/// The `tokengate-bench` binary's HTTP/2 client (`--http 2`) against a real gateway on loopback: every kind of
/// token in the mix gets its own answer over many concurrent streams, and a server without h2 is refused
/// clearly instead of being measured over HTTP/1.1; the same client holds `idle --http 2`'s connections. Also
/// the fields `--header` adds to every request, over both protocols.
@Suite(.serialized)
struct BenchHTTP2Tests {
    static let binary = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build/debug/tokengate-bench").path

    /// Runs `body` against a gateway started with the bench's cutoffs (every bench user revoked one day ago),
    /// so all five kinds have their default expectation: api 200, session 403, revoked 401, bad_signature 401,
    /// form 200. The gateway is stopped afterwards, whatever `body` did. The failed-token guard is off: the mix
    /// sends hundreds of revoked and badly signed tokens from one address, and each must get its own answer.
    private func withGateway(
        limits: String = "",
        _ body: (GatewayHarness) async throws -> Void
    ) async throws {
        let harness = GatewayHarness()
        do {
            try await harness.start(limits: limits + "\nrate_limits: { failed_tokens: off }")
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

    /// `--header` fields are on the wire: a second token field (`X-Api-Token`, a token source of the route next to
    /// the bench's `Authorization`) makes the gateway refuse every request with 400, and `--strict` passes only
    /// if every single answer was that 400. The report names the field (not its value).
    @Test(arguments: ["1.1", "2"])
    func extraFieldsReachTheGatewayOnEveryRequest(http: String) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build tokengate-bench first")
        try await self.withGateway { harness in
            let json = harness.directory + "/report.json"
            let result = try self.bench(
                harness,
                [
                    "--http", http, "--connections", "2", "--requests", "60", "--mix", "api=1", "--expect", "api=400",
                    "-H", "Accept-Language: en-GB,en;q=0.9", "--header", "X-Api-Token:  not-a-token ", "--json", json,
                    "--strict",
                ]
            )
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
            #expect(result.stdout.contains("fields Accept-Language, X-Api-Token on every request"), "\(result.stdout)")
            let report = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any]
            )
            #expect(report["extra_fields"] as? [String] == ["Accept-Language", "X-Api-Token"])
            #expect(report["statuses"] as? [String: Int] == ["400": 60])
            #expect(!String(decoding: try Data(contentsOf: URL(fileURLWithPath: json)), as: UTF8.self).contains("not-a-token"))
        }
    }

    /// A field the bench cannot send as given is refused before the run, naming the problem, with no report.
    @Test(arguments: [
        ("X-No-Colon", "not 'Name: value'"),
        ("Bad Name: x", "the name must be"),
        (": no name", "the name must be"),
        ("authorization: Bearer x", "set by the bench itself"),
        ("Content-Length: 5", "set by the bench itself"),
        ("X-Control: a\u{01}b", "control byte"),
        ("X-Newline: a\rb", "control byte"),
    ])
    func malformedExtraFieldsAreRefused(field: String, why: String) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build tokengate-bench first")
        try await self.withGateway { harness in
            let result = try self.bench(harness, ["--connections", "1", "--requests", "1", "--header", field])
            #expect(result.status == 2, "\(result.stdout)\n\(result.stderr)")
            #expect(result.stderr.contains("--header"), "\(result.stderr)")
            #expect(result.stderr.contains(why), "\(result.stderr)")
            #expect(!result.stdout.contains("req/s"), "no report for a run that never started")
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

    /// `tokengate-bench idle --http 2` (the same nghttp2 client as `run --http 2`, one stream per connection)
    /// with `key` (default: the gateway's own), `connections` connections held one second; the parsed report.
    private func idle(
        _ harness: GatewayHarness,
        key: String? = nil,
        connections: Int
    ) throws -> (result: ChildProcess.Result, report: [String: Any]?) {
        let json = harness.directory + "/idle-\(UUID().uuidString).json"
        let arguments = [
            "idle", "--url", "https://127.0.0.1:\(harness.tlsPort)/api/bench", "--cacert", harness.certificatePath,
            "--key", key ?? harness.directory + "/private.jwks", "--users", "40", "--http", "2",
            "--connections", String(connections), "--warmup", "2", "--concurrency", "3", "--hold", "1",
            "--settle", "0", "--json", json, "--strict",
        ]
        let result = try ChildProcess.run("/usr/bin/timeout", ["120", Self.binary] + arguments)
        let report = (try? Data(contentsOf: URL(fileURLWithPath: json)))
            .flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
        return (result, report)
    }

    @Test func idleOverHTTP2GetsEveryAnswerAndHoldsTheConnections() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build tokengate-bench first")
        try await self.withGateway { harness in
            let (result, report) = try self.idle(harness, connections: 7)
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
            let json = try #require(report, "no JSON report: \(result.stderr)")
            #expect(json["http_version"] as? String == "2")
            #expect(json["statuses"] as? [String: Int] == ["200": 7])
            #expect((json["failures"] as? [String: Int])?.isEmpty == true, "\(json["failures"] ?? "")")
            #expect(json["closed_during_hold"] as? Int == 0)
            let stages = try #require(json["stages"] as? [[String: Any]])
            let end = stages.first { $0["name"] as? String == "end" }
            #expect(end?["open_connections"] as? Int == 7, "every connection still open after the hold")
        }
    }

    /// The status is nghttp2's decoded `:status`, whatever its HPACK form: 401 has no static-table entry of
    /// its own, so a client that only recognised the indexed static statuses would report it as 0.
    @Test func idleOverHTTP2ReportsARejectedTokensRealStatus() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build tokengate-bench first")
        try await self.withGateway { harness in
            // The gateway's key id with another secret: every token's signature is wrong.
            let foreign = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-hs")
            let path = harness.directory + "/foreign-private.jwks"
            try foreign.privateJWKS.write(toFile: path, atomically: true, encoding: .utf8)
            let (result, report) = try self.idle(harness, key: path, connections: 4)
            #expect(result.status == 1, "--strict exits 1 on a status other than 200: \(result.stderr)")
            let json = try #require(report, "no JSON report: \(result.stderr)")
            #expect(json["statuses"] as? [String: Int] == ["401": 4])
            #expect((json["failures"] as? [String: Int])?.isEmpty == true, "\(json["failures"] ?? "")")
        }
    }

    @Test func idleOverHTTP2CountsEveryConnectionAsFailedWithoutH2() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build tokengate-bench first")
        try await self.withGateway(limits: "http2: { enabled: false }") { harness in
            let (result, report) = try self.idle(harness, connections: 3)
            #expect(result.status == 1, "\(result.stdout)\n\(result.stderr)")
            let json = try #require(report, "no JSON report: \(result.stderr)")
            #expect((json["statuses"] as? [String: Int])?.isEmpty == true)
            let failures = try #require(json["failures"] as? [String: Int])
            #expect(failures.values.reduce(0, +) == 3, "\(failures)")
            #expect(
                failures.keys.allSatisfy { $0.contains("h2") }, "each failure must say h2 was not negotiated: \(failures)"
            )
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

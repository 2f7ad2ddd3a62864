//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Foundation
import Logging
import NIOCore
import TokengateTLS

/// `tokengate-bench run`: one load run against a gateway, with a table on stdout and optionally a JSON report.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Drive the gateway closed-loop (default) or at a fixed rate (--rate) and report.",
        discussion: """
            Every token is minted at start from --key, one per user and kind (--users per kind), so no cache \
            can answer for the gateway. Revoked tokens are issued three days ago; for them to be rejected the \
            gateway's cutoffs must come from `tokengate-bench cutoffs` (or pass --expect revoked=200).
            """
    )

    @OptionGroup var gateway: GatewayTargetOptions

    @Option(help: "Distinct users (and tokens) per kind of request.")
    var users = 5_000

    @Option(help: "Weights per kind: api, session, revoked, bad_signature, form.")
    var mix = TokenMix.standard

    @Option(name: .customLong("expect"), help: "Override an expected status, KIND=STATUS (repeatable).")
    var expectations: [String] = []

    @Option(
        name: [.customShort("H"), .customLong("header")],
        help: "A field sent on every request, 'Name: value' (repeatable): what a real client sends besides the token."
    )
    var fields: [String] = []

    @Option(help: "Connections (HTTP/1.1 keep-alive or HTTP/2).")
    var connections = 32

    @Option(help: "HTTP/2: concurrent streams (requests in flight) per connection; default 10. HTTP/1.1: 1 only.")
    var streams: Int?

    @Option(help: "Client event loop threads.")
    var threads = 1

    @Option(help: "Seconds of load (default 10 unless --requests is given).")
    var duration: Double?

    @Option(help: "Total requests (split across connections).")
    var requests: Int?

    @Option(help: "Fixed-rate (open-loop) mode at this many requests/s in total; latency from intended send time.")
    var rate: Double?

    @Option(help: "HTTP version: 1.1, or 2 (ALPN h2 required).")
    var http = "1.1"

    @Option(help: "Seconds to wait for answers in flight when the load stops.")
    var grace = 5.0

    @Option(name: .customLong("max-time"), help: "Hard stop, seconds, for a run bounded by --requests only.")
    var maxTime = 300.0

    @Option(name: .customLong("gateway-pid"), help: "Process to measure CPU time and RSS of (repeatable, summed).")
    var gatewayPIDs: [Int32] = []

    @Option(help: "Write the report as JSON to this file.")
    var json: String?

    @Flag(help: "Exit 1 when any answer had an unexpected status or any error happened.")
    var strict = false

    func validate() throws {
        guard (1...100_000).contains(self.connections) else { throw ValidationError("--connections: 1 through 100000") }
        guard (1...64).contains(self.threads) else { throw ValidationError("--threads: 1 through 64") }
        if let streams = self.streams {
            guard (1...1_000).contains(streams) else { throw ValidationError("--streams: 1 through 1000") }
            guard self.http == LoadPlan.WireProtocol.http2.rawValue || streams == 1 else {
                throw ValidationError("--streams: HTTP/1.1 sends one request at a time per connection; use --http 2")
            }
        }
        if let duration = self.duration, !(0.1...86_400).contains(duration) {
            throw ValidationError("--duration: 0.1 through 86400 seconds")
        }
        if let requests = self.requests, !(1...1_000_000_000).contains(requests) {
            throw ValidationError("--requests: 1 through 1000000000")
        }
        if let rate = self.rate, !(1...10_000_000).contains(rate) {
            throw ValidationError("--rate: 1 through 10000000 requests/s")
        }
        guard (0...600).contains(self.grace) else { throw ValidationError("--grace: 0 through 600 seconds") }
        guard (1...86_400).contains(self.maxTime) else { throw ValidationError("--max-time: 1 through 86400 seconds") }
    }

    func run() async throws {
        do {
            try await self.execute()
        } catch let error as BenchError {
            FileHandle.standardError.write(Data("tokengate-bench: \(error.message)\n".utf8))
            throw ExitCode(2)
        }
    }

    private func execute() async throws {
        guard let wire = LoadPlan.WireProtocol(rawValue: self.http) else {
            throw BenchError("invalid_http", "--http must be 1.1 or 2")
        }
        let target = try self.gateway.target()
        let mix = try TokenMix(parsing: self.mix)
        let expected = try self.parseExpectations()
        let extraFields = try self.fields.map(ExtraField.init(parsing:))
        let signers = try BenchSigners(paths: self.gateway.keys)
        let now = Int64(Date().timeIntervalSince1970)
        let started = Date()
        let pool = try TokenPool(
            signers: signers,
            mix: mix,
            users: self.users,
            target: target,
            now: now,
            extraFields: extraFields,
            http2: wire == .http2
        )
        let mintSeconds = Date().timeIntervalSince(started)
        let tokenCount = pool.requests.reduce(0) { $0 + $1.count }
        FileHandle.standardError.write(
            Data("minted \(tokenCount) tokens (\(signers.algorithms.joined(separator: "+"))) in \(BenchReport.number(mintSeconds, 2)) s\n".utf8)
        )
        let tls: TLSClientContext
        do {
            // One protocol offered: a server that cannot speak it must not be measured on another.
            tls = try TLSClientContext(
                trustRootsPath: self.gateway.cacert,
                verifyPeer: !self.gateway.insecure,
                alpnProtocols: [wire.alpn]
            )
        } catch {
            throw BenchError("tls_config", "TLS client: \(error)")
        }
        let duration = self.duration ?? (self.requests == nil ? 10 : nil)
        let plan = LoadPlan(
            mode: self.rate.map { .fixedRate(perSecond: $0) } ?? .closedLoop,
            wireProtocol: wire,
            connections: self.connections,
            streams: wire == .http2 ? self.streams ?? 10 : 1,
            threads: self.threads,
            duration: duration.map { .nanoseconds(Int64($0 * 1e9)) },
            requests: self.requests,
            grace: .nanoseconds(Int64(self.grace * 1e9)),
            maxTime: .nanoseconds(Int64(self.maxTime * 1e9)),
            connectTimeout: .seconds(5)
        )
        var logger = Logger(label: "tokengate-bench")
        logger.logLevel = .warning
        let shared = LoadShared(pool: pool, plan: plan, target: target, tls: tls, logger: logger)
        let outcome = try await LoadRunner(shared: shared, gatewayPIDs: self.gatewayPIDs).run()
        let report = BenchReport(outcome: outcome, shared: shared, expected: expected, gatewayPIDs: self.gatewayPIDs)
        print(report.table, terminator: "")
        if let path = self.json {
            do {
                try report.json().write(to: URL(fileURLWithPath: path))
            } catch {
                throw BenchError("json_unwritable", "cannot write \(path): \(error)")
            }
        }
        if self.strict, report.unexpectedStatuses > 0 || !report.errors.isEmpty {
            throw ExitCode(1)
        }
    }

    private func parseExpectations() throws -> [BenchTokenKind: Int] {
        var expected: [BenchTokenKind: Int] = [:]
        for item in self.expectations {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let kind = BenchTokenKind(rawValue: parts[0]), let status = Int(parts[1]),
                (100...599).contains(status)
            else {
                throw BenchError("invalid_expect", "--expect: '\(item)' is not KIND=STATUS")
            }
            expected[kind] = status
        }
        return expected
    }
}

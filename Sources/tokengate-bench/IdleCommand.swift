//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import TokengateTLS

#if canImport(Glibc)
import Glibc
#endif

/// `tokengate-bench idle`: opens N TLS connections, one request each, holds them idle in keep-alive and
/// reports the gateway's memory per connection (the resident memory at, say, 10,000 idle TLS connections).
struct IdleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "idle",
        abstract: "Hold N idle keep-alive TLS connections and report the gateway's memory per connection.",
        discussion: """
            Each connection completes its handshake and one request (a token minted from --key; HTTP/1.1, \
            or one stream with --http 2), then stays idle. The gateway's VmRSS and RssAnon are read before, \
            at half, with all open and idle, at the end of --hold, and after every connection is closed \
            again. For a meaningful figure the gateway's limits.idle_timeout must be longer than --settle + \
            --hold (otherwise it closes the idle connections: the report counts those closes) and \
            limits.max_connections at least N.
            """
    )

    @OptionGroup var gateway: GatewayTargetOptions

    @Option(help: "Distinct users (and tokens); connection i uses user i modulo this.")
    var users = 1_000

    @Option(help: "Idle connections to hold.")
    var connections = 10_000

    @Option(help: "Connections opened first and closed again before the 'before' reading (one-time costs).")
    var warmup = 64

    @Option(help: "Seconds to hold all connections idle after the idle reading.")
    var hold = 30.0

    @Option(help: "Seconds to wait before each reading so that freed memory and in-flight work settle.")
    var settle = 2.0

    @Option(help: "Connections being opened at once.")
    var concurrency = 100

    @Option(help: "Source addresses 127.0.0.1…127.0.0.N to spread the connections over (default: enough for the ephemeral port range).")
    var sources: Int?

    @Option(help: "Client event loop threads.")
    var threads = 1

    @Option(help: "HTTP version: 1.1 (keep-alive) or 2 (ALPN h2; one stream, then an idle connection).")
    var http = "1.1"

    @Option(name: .customLong("gateway-pid"), help: "The gateway process to read memory from (/proc/PID/status).")
    var gatewayPID: Int32?

    @Option(name: .customLong("expect-status"), help: "The status the one request per connection should get.")
    var expectStatus = 200

    @Option(help: "Write the report as JSON to this file.")
    var json: String?

    @Flag(help: "Exit 1 when a connection failed, got another status, or was closed during the hold.")
    var strict = false

    /// Every connection attempt (connect, handshake, request, answer) ends within this.
    static let attemptTimeout: TimeAmount = .seconds(20)
    /// Closing all connections at the end (close_notify and the peer's answer) is waited for this long.
    static let closeWait: Duration = .seconds(15)

    func validate() throws {
        guard (1...200_000).contains(self.connections) else { throw ValidationError("--connections: 1 through 200000") }
        guard (0...10_000).contains(self.warmup) else { throw ValidationError("--warmup: 0 through 10000") }
        guard (0...3_600).contains(self.hold) else { throw ValidationError("--hold: 0 through 3600 seconds") }
        guard (0...60).contains(self.settle) else { throw ValidationError("--settle: 0 through 60 seconds") }
        guard (1...10_000).contains(self.concurrency) else { throw ValidationError("--concurrency: 1 through 10000") }
        guard (1...100_000).contains(self.users) else { throw ValidationError("--users: 1 through 100000") }
        guard (1...64).contains(self.threads) else { throw ValidationError("--threads: 1 through 64") }
        if let sources = self.sources, !(1...250).contains(sources) {
            throw ValidationError("--sources: 1 through 250")
        }
        guard (100...599).contains(self.expectStatus) else { throw ValidationError("--expect-status: 100 through 599") }
        guard self.http == "1.1" || self.http == "2" else { throw ValidationError("--http: 1.1 or 2") }
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
        try Self.raiseFileLimit(to: self.connections + self.warmup + 256)
        let target = try self.gateway.target()
        let sources = try self.sourceAddresses(target: target)
        let signers = try BenchSigners(paths: self.gateway.keys)
        let pool = try TokenPool(
            signers: signers,
            mix: try TokenMix(parsing: "api=100"),
            users: self.users,
            target: target,
            now: Int64(Date().timeIntervalSince1970),
            http2: self.http == "2"
        )
        let tls: TLSClientContext
        do {
            tls = try TLSClientContext(
                trustRootsPath: self.gateway.cacert,
                verifyPeer: !self.gateway.insecure,
                alpnProtocols: [self.http == "2" ? "h2" : "http/1.1"]
            )
        } catch {
            throw BenchError("tls_config", "TLS client: \(error)")
        }
        var logger = Logger(label: "tokengate-bench")
        logger.logLevel = .critical
        let opener = Opener(
            requests: pool.requests[BenchTokenKind.api.index],
            target: target,
            tls: tls,
            logger: logger,
            sources: sources,
            http2: self.http == "2"
        )

        let group = MultiThreadedEventLoopGroup(numberOfThreads: self.threads)
        let report: IdleReport
        do {
            report = try await self.measure(opener: opener, group: group, target: target)
            try? await group.shutdownGracefully()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        print(report.table, terminator: "")
        if let path = self.json {
            do {
                try report.json().write(to: URL(fileURLWithPath: path))
            } catch {
                throw BenchError("json_unwritable", "cannot write \(path): \(error)")
            }
        }
        let bad = report.failures.values.reduce(0, +) + report.statuses.filter { $0.key != String(self.expectStatus) }.values.reduce(0, +)
        if self.strict, bad > 0 || report.closedDuringHold > 0 {
            throw ExitCode(1)
        }
    }

    private func measure(opener: Opener, group: MultiThreadedEventLoopGroup, target: BenchTarget) async throws -> IdleReport {
        var stages: [IdleReport.Stage] = []
        var statuses: [String: Int] = [:]
        var failures: [String: Int] = [:]
        let closes = CloseLog()
        var channels: [any Channel] = []
        channels.reserveCapacity(self.connections)

        func reading(_ name: String, open: [any Channel]) throws {
            let memory = try self.gatewayPID.map { try GatewayMemory.sample(pid: $0) }
            stages.append(IdleReport.Stage(name: name, openConnections: open.count { $0.isActive }, memory: memory))
        }
        func settle() async throws {
            if self.settle > 0 { try await Task.sleep(for: .milliseconds(Int(self.settle * 1_000))) }
        }

        try reading("start", open: [])
        if self.warmup > 0 {
            var warm: [any Channel] = []
            for first in stride(from: 0, to: self.warmup, by: self.concurrency) {
                let batch = try await opener.open(first..<min(first + self.concurrency, self.warmup), on: group)
                for case .success(let opened) in batch { warm.append(opened.channel) }
            }
            try await Self.closeAll(warm)
            try await settle()
            try reading("before", open: [])
        }

        let started = ContinuousClock.now
        var halfRead = false
        for first in stride(from: 0, to: self.connections, by: self.concurrency) {
            let batch = try await opener.open(first..<min(first + self.concurrency, self.connections), on: group)
            for result in batch {
                switch result {
                case .success(let opened):
                    statuses[String(opened.status), default: 0] += 1
                    channels.append(opened.channel)
                    opened.channel.closeFuture.whenComplete { _ in closes.record() }
                case .failure(let error):
                    let reason = (error as? BenchError).map { "\($0.code): \($0.message)" } ?? String(describing: error)
                    failures[String(reason.prefix(100)), default: 0] += 1
                }
            }
            if !halfRead, first + self.concurrency >= self.connections / 2, self.connections >= 4 {
                halfRead = true
                try await settle()
                try reading("half", open: channels)
            }
        }
        let openSeconds = Self.seconds(ContinuousClock.now - started)
        try await settle()
        try reading("idle", open: channels)
        let idleAt = ContinuousClock.now
        if self.hold > 0 { try await Task.sleep(for: .milliseconds(Int(self.hold * 1_000))) }
        try reading("end", open: channels)
        let endAt = ContinuousClock.now
        let duringHold = closes.times.filter { $0 > idleAt && $0 <= endAt }

        try await Self.closeAll(channels)
        try await settle()
        try reading("closed", open: channels)
        return IdleReport(
            target: target.description,
            httpVersion: self.http,
            connectionsRequested: self.connections,
            sourceAddresses: opener.sources.map { $0?.ipAddress ?? "127.0.0.1 (kernel's choice)" },
            warmupConnections: self.warmup,
            statuses: statuses,
            failures: failures,
            openSeconds: openSeconds,
            settleSeconds: self.settle,
            holdSeconds: self.hold,
            stages: stages,
            closedDuringHold: duringHold.count,
            firstCloseAfterSeconds: duringHold.min().map { Self.seconds($0 - idleAt) }
        )
    }

    /// Closes every channel (TLS close_notify, then the socket) and waits, bounded, until all are closed.
    private static func closeAll(_ channels: [any Channel]) async throws {
        for channel in channels { channel.close(promise: nil) }
        let deadline = ContinuousClock.now + Self.closeWait
        while channels.contains(where: { $0.isActive }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// 127.0.0.1…127.0.0.N as explicit source addresses when one address' ephemeral ports might not be
    /// enough for every connection to the same gateway port; nil (the kernel picks) for a single one.
    private func sourceAddresses(target: BenchTarget) throws -> [SocketAddress?] {
        let count: Int
        if let sources = self.sources {
            count = sources
        } else {
            let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))
                .map { $0.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) } }
            let ports = range.flatMap { $0.count == 2 ? $0[1] - $0[0] + 1 : nil } ?? 28_232
            // Leave a quarter of the range for TIME_WAIT leftovers and everything else on the machine.
            count = max(1, (self.connections + self.warmup + ports * 3 / 4 - 1) / (ports * 3 / 4))
        }
        guard count > 1 else { return [nil] }
        guard target.connectHost.hasPrefix("127.") else {
            throw BenchError("sources_ipv4_only", "--sources above 1 needs an IPv4 loopback --url")
        }
        return try (1...count).map { try SocketAddress(ipAddress: "127.0.0.\($0)", port: 0) }
    }

    /// Raises the soft RLIMIT_NOFILE (up to the hard limit) so that `needed` sockets fit.
    private static func raiseFileLimit(to needed: Int) throws {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        guard limit.rlim_cur < rlim_t(needed) else { return }
        limit.rlim_cur = min(limit.rlim_max, rlim_t(needed))
        _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        guard limit.rlim_cur >= rlim_t(needed) else {
            throw BenchError(
                "fd_limit",
                "need \(needed) file descriptors, the hard limit is \(limit.rlim_max) (raise it: ulimit -Hn, or fewer --connections)"
            )
        }
    }
}

extension IdleCommand {
    /// An open connection that got its answer.
    struct Opened: Sendable {
        let channel: any Channel
        let status: Int
    }

    /// Opens connections: TLS, one request, wait for the answer. Shared, read-only state only.
    struct Opener: Sendable {
        let requests: [PreparedRequest]
        let target: BenchTarget
        let tls: TLSClientContext
        let logger: Logger
        let sources: [SocketAddress?]
        let http2: Bool

        /// Opens `indices` at once and waits until each has its answer or has failed.
        func open(_ indices: Range<Int>, on group: MultiThreadedEventLoopGroup) async throws -> [Result<Opened, any Error>] {
            var futures: [EventLoopFuture<Opened>] = []
            for index in indices {
                let loop = group.next()
                futures.append(loop.flatSubmit { self.openOnLoop(index, loop: loop) })
            }
            return try await EventLoopFuture.whenAllComplete(futures, on: group.next()).get()
        }

        private func openOnLoop(_ index: Int, loop: any EventLoop) -> EventLoopFuture<Opened> {
            let attempt = IdleClientHandler.Attempt(promise: loop.makePromise())
            let bound = NIOLoopBound(attempt, eventLoop: loop)
            let request = self.requests[index % self.requests.count]
            let tls = self.tls
            let serverName = self.target.serverName
            let logger = self.logger
            let http2 = self.http2
            var bootstrap = ClientBootstrap(group: loop)
                .connectTimeout(.seconds(10))
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            if let source = self.sources[index % self.sources.count] {
                bootstrap = bootstrap.bind(to: source)
            }
            let connecting = bootstrap.channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(TLSHandler(context: tls, serverHostname: serverName, logger: logger))
                    if http2 {
                        let client = IdleHTTP2Client(
                            request: request,
                            attempt: bound.value,
                            channel: channel,
                            answerTimeout: IdleCommand.attemptTimeout
                        )
                        try sync.addHandler(BenchHTTP2Handler(owner: .idle(client)))
                    } else {
                        try sync.addHTTPClientHandlers()
                        try sync.addHandler(
                            IdleClientHandler(request: request, attempt: bound.value, answerTimeout: IdleCommand.attemptTimeout)
                        )
                    }
                }
            }
            .connect(host: self.target.connectHost, port: self.target.port)
            connecting.assumeIsolated().whenFailure { error in
                attempt.fail(error)
            }
            return connecting.flatMap { channel in
                bound.value.promise.futureResult.map { Opened(channel: channel, status: $0) }
            }
        }
    }

    /// When connections closed (monotonic clock), from the channels' close futures on any event loop.
    final class CloseLog: Sendable {
        private let state = Mutex<[ContinuousClock.Instant]>([])

        func record() {
            let now = ContinuousClock.now
            self.state.withLock { $0.append(now) }
        }

        var times: [ContinuousClock.Instant] {
            self.state.withLock { $0 }
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Prometheus
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import TokengateTLS
import TokengateHTTP

/// Keep-alive connections from one event loop to the backends of one upstream.
///
/// Each event loop has its own pool, so an exchange never hops threads: the client connection, its
/// upstream connection and this pool all live on one loop, and nothing here takes a lock. Targets are
/// used round-robin; one whose connects failed ``UpstreamSettings/failuresBeforeEjection`` times in a row is
/// skipped for ``UpstreamSettings/ejectionTime`` (passive ejection). For an `https://` target a connect includes
/// the TLS handshake: a connection is handed out only once it is usable. The count and the ejection belong to this
/// pool, so to one event loop: each loop finds out about a dead target by its own failures.
final class UpstreamPool {
    /// A connection to one target could not be made (refused, timed out, name not resolved, or for `https://`
    /// the TLS handshake failed or timed out): nothing of the request was sent, so the caller may try again, on
    /// another target when there is one (``acquire(after:requestID:)``). Answered as ``UpstreamError/connectFailed``.
    struct ConnectFailure: Error {
        let targetIndex: Int
    }

    let settings: UpstreamSettings
    let eventLoop: any EventLoop
    private let logger: Logger
    private var idle: [[UpstreamConnection]]
    private var open: [Int]
    private var ejectedUntil: [NIODeadline]
    /// What ``ejectedUntil`` holds for a target that is not ejected (never was, or connected since).
    private static let neverEjected = NIODeadline.uptimeNanoseconds(0)
    /// Connect failures since the target's last successful connect. Not reset when an ejection ends: a target
    /// back from one that fails again is skipped again at once, until a connect succeeds.
    private var failuresInARow: [Int]
    private var cursor = 0
    /// ``closeAll()`` was called (the configuration generation was replaced, or the gateway stops): connections
    /// given back from now on are closed instead of kept idle.
    private var closed = false

    private let connectFailures: Prometheus.Counter
    /// Logs failed connects and recoveries, throttled per target; shared with the other loops' pools.
    private let failureLog: UpstreamConnectFailureLog
    /// The loop's flush batch, shared by every connection of every pool on the loop.
    private let flushBatch: UpstreamFlushBatch
    /// The targets' active health (`health_check:`), shared with the checker and every loop; `nil` without checks.
    /// A target it says is down is skipped like an ejected one, but never used as the last resort: when every
    /// target is down it says every one is usable (``UpstreamTargetHealth/isUsable(_:)``).
    private let health: UpstreamTargetHealth?

    init(
        settings: UpstreamSettings,
        eventLoop: any EventLoop,
        logger: Logger,
        connectFailures: Prometheus.Counter,
        failureLog: UpstreamConnectFailureLog,
        flushBatch: UpstreamFlushBatch,
        health: UpstreamTargetHealth? = nil
    ) {
        self.health = health
        self.settings = settings
        self.failureLog = failureLog
        self.flushBatch = flushBatch
        self.connectFailures = connectFailures
        self.eventLoop = eventLoop
        self.logger = logger
        self.idle = Array(repeating: [], count: settings.targets.count)
        self.open = Array(repeating: 0, count: settings.targets.count)
        self.ejectedUntil = Array(repeating: Self.neverEjected, count: settings.targets.count)
        self.failuresInARow = Array(repeating: 0, count: settings.targets.count)
    }

    /// The number of open connections (idle and busy), for metrics and tests.
    var openConnections: Int { self.open.reduce(0, +) }

    /// The open connections not idle in the pool: in use by an exchange, or connecting. Back to 0 once no request
    /// is under way; one that never comes back is a slot lost against `max_connections_per_target`.
    var busyConnections: Int { self.openConnections - self.idle.reduce(0) { $0 + $1.count } }

    /// An idle connection to a usable target, when the target the round-robin picks next has one: the
    /// common case under load, served without a future. `nil` means ``acquire()`` decides.
    func acquireIdle() -> UpstreamConnection? {
        self.eventLoop.preconditionInEventLoop()
        let index = self.cursor % self.settings.targets.count
        // The clock is read only for a target that was ever ejected.
        let ejectedUntil = self.ejectedUntil[index]
        guard !self.idle[index].isEmpty, ejectedUntil == Self.neverEjected || ejectedUntil <= .now(),
            self.health?.isUsable(index) ?? true, let connection = self.takeIdle(index)
        else { return nil }
        self.cursor = (index + 1) % self.settings.targets.count
        return connection
    }

    /// A connection to a usable target: an idle one if there is one, else a new one. Fails with
    /// ``ConnectFailure`` when the connect fails, and with ``UpstreamError/noTargetAvailable`` when every
    /// target is at its connection limit.
    ///
    /// - Parameter failedTarget: For a retry, the target whose connect just failed: the search starts after
    ///   it, so every other usable target comes first and the failed one last (the only one, for a
    ///   single-target upstream). `nil` follows the round-robin.
    /// - Parameter requestID: the request the connection is for, named in the log line of a failed connect.
    func acquire(after failedTarget: Int? = nil, requestID: String) -> EventLoopFuture<UpstreamConnection> {
        self.eventLoop.preconditionInEventLoop()
        let now = NIODeadline.now()
        let count = self.settings.targets.count
        let first = failedTarget.map { $0 + 1 } ?? self.cursor
        var fallback: Int?
        for step in 0..<count {
            let index = (first + step) % count
            if let health = self.health, !health.isUsable(index) {
                continue
            }
            if self.ejectedUntil[index] > now {
                fallback = fallback ?? index
                continue
            }
            self.cursor = (index + 1) % count
            if let connection = self.takeIdle(index) {
                return self.eventLoop.makeSucceededFuture(connection)
            }
            if self.open[index] < self.settings.maxConnectionsPerTarget {
                return self.connect(index, requestID: requestID)
            }
        }
        // Every usable target is ejected: try the first ejected one rather than refuse outright, so a
        // single-backend upstream recovers as soon as its backend does.
        if let index = fallback, self.open[index] < self.settings.maxConnectionsPerTarget {
            if let connection = self.takeIdle(index) {
                return self.eventLoop.makeSucceededFuture(connection)
            }
            return self.connect(index, requestID: requestID)
        }
        return self.eventLoop.makeFailedFuture(UpstreamError.noTargetAvailable)
    }

    /// Gives a connection back after an exchange. A connection that is not reusable (the response said
    /// `close`, the exchange was aborted), or of an upstream that keeps none (`keep_alive: false`), is closed
    /// instead.
    func release(_ connection: UpstreamConnection, reusable: Bool) {
        self.eventLoop.preconditionInEventLoop()
        connection.handler.detach()
        guard reusable, self.settings.keepAlive, !self.closed, connection.handler.isOpen else {
            connection.responseTimer.cancel()
            connection.channel.close(promise: nil)
            return
        }
        connection.reused = true
        connection.responseTimer.disarm()
        connection.idleTimer?.arm(at: self.eventLoop.now + self.settings.idleTimeout)
        self.idle[connection.targetIndex].append(connection)
    }

    /// Counts a failed connect to target `index`, and ejects the target once the failures in a row reach
    /// ``UpstreamSettings/failuresBeforeEjection``.
    private func connectFailed(_ index: Int) {
        // Capped: past the threshold the count only has to say "reached".
        self.failuresInARow[index] = min(self.failuresInARow[index] + 1, self.settings.failuresBeforeEjection)
        if self.failuresInARow[index] >= self.settings.failuresBeforeEjection {
            self.ejectedUntil[index] = .now() + self.settings.ejectionTime
        }
    }

    /// A connect to target `index` succeeded: the target is up, whatever it did before.
    private func connectSucceeded(_ index: Int) {
        self.failuresInARow[index] = 0
        self.ejectedUntil[index] = Self.neverEjected
    }

    func closeAll() {
        self.closed = true
        for connections in self.idle {
            for connection in connections {
                connection.idleTimer?.cancel()
                connection.responseTimer.cancel()
                connection.channel.close(promise: nil)
            }
        }
        self.idle = Array(repeating: [], count: self.settings.targets.count)
    }

    private func takeIdle(_ index: Int) -> UpstreamConnection? {
        // Most recently used first: it is the least likely to have been closed by the backend. One still in
        // the read batch that ended its last response is skipped (``UpstreamResponseHandler/isInReadBatch``).
        var position = self.idle[index].count - 1
        while position >= 0 {
            let connection = self.idle[index][position]
            if connection.handler.isOpen, connection.handler.isInReadBatch {
                position -= 1
                continue
            }
            self.idle[index].remove(at: position)
            connection.idleTimer?.disarm()
            if connection.handler.isOpen {
                return connection
            }
            position = min(position, self.idle[index].count) - 1
        }
        return nil
    }

    private func closeIdle(_ connection: UpstreamConnection) {
        if let position = self.idle[connection.targetIndex].firstIndex(where: { $0 === connection }) {
            self.idle[connection.targetIndex].remove(at: position)
        }
        connection.channel.close(promise: nil)
    }

    private func forget(_ connection: UpstreamConnection) {
        self.open[connection.targetIndex] -= 1
        if let position = self.idle[connection.targetIndex].firstIndex(where: { $0 === connection }) {
            self.idle[connection.targetIndex].remove(at: position)
        }
    }

    /// A connection to target `index` on `channel`, wired to this pool: forgotten when its channel closes, closed
    /// when idle too long. The closures hold the connection and this pool strongly, so a pool lives as long as
    /// any of its connections is open; every cycle ends when the channel closes (the handler drops its close
    /// callback once called, ``UpstreamConnection/tearDown()`` drops the idle timer). A pool whose generation
    /// was replaced closes its idle connections at once and every busy one when it comes back (``closeAll()``).
    /// Not `weak`: a weak reference gives the pool a side table, after which every retain and release of it —
    /// each request acquires and releases a connection — takes the runtime's slow path.
    func adopt(_ channel: any Channel, index: Int, handler: UpstreamResponseHandler) -> UpstreamConnection {
        let connection = UpstreamConnection(channel: channel, targetIndex: index, handler: handler)
        handler.onClose = {
            connection.tearDown()
            self.forget(connection)
        }
        connection.idleTimer = DeadlineTimer(eventLoop: channel.eventLoop) { [connection] in
            self.closeIdle(connection)
        }
        return connection
    }

    /// A new connection to target `index`: TCP, then for an `https://` target the TLS handshake, both within
    /// the upstream's `connect_timeout`. A failure of either is a connect failure (counted, toward ejection too,
    /// logged through ``UpstreamConnectFailureLog``): nothing of the request was sent, so it may be retried.
    private func connect(_ index: Int, requestID: String) -> EventLoopFuture<UpstreamConnection> {
        let target = self.settings.targets[index]
        let tlsContext = target.useTLS ? self.settings.tlsContext : nil
        // One bound for the whole connect: the handshake gets what TCP left of it.
        let deadline = NIODeadline.now() + self.settings.connectTimeout
        // The initializer runs on this loop (the bootstrap's group is the loop), where the batch lives.
        let flushBatch = NIOLoopBound(self.flushBatch, eventLoop: self.eventLoop)
        self.open[index] += 1
        let bootstrap = ClientBootstrap(group: self.eventLoop)
            .connectTimeout(self.settings.connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.autoRead, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // The HTTP/1.1 codec is the last handler itself (no NIOHTTP1 client handlers); the TLS handler
                    // goes in front of it once TCP is up (``startTLS(on:context:target:deadline:)``).
                    try channel.pipeline.syncOperations.addHandler(UpstreamResponseHandler(flushBatch: flushBatch.value))
                }
            }
        // The bootstrap runs on this pool's loop, so the callbacks below run here too and may touch the pool.
        return bootstrap.connect(host: target.host, port: target.port).assumeIsolated().flatMap { channel in
            self.startTLS(on: channel, context: tlsContext, target: target, deadline: deadline)
        }.flatMapThrowing { channel in
            self.connectSucceeded(index)
            self.failureLog.connected(target: index)
            let handler = try channel.pipeline.syncOperations.handler(type: UpstreamResponseHandler.self)
            handler.connected()
            return self.adopt(channel, index: index, handler: handler)
        }.flatMapErrorThrowing { error in
            self.open[index] -= 1
            self.connectFailed(index)
            self.connectFailures.increment()
            self.failureLog.failed(target: index, cause: Self.describe(error), requestID: requestID)
            throw ConnectFailure(targetIndex: index)
        }.nonisolated()
    }

    /// For an `https://` target (`context` set): adds the TLS handler in front of the codec now that TCP is up,
    /// with what is left until `deadline` as its handshake timeout, and succeeds once the handshake completed.
    /// A failed or timed-out handshake closes the channel and fails with the ``TLSError``. The TLS handler's
    /// own line about it is at debug level: the failure is logged here, once, with the upstream and request.
    private func startTLS(
        on channel: any Channel,
        context: TLSClientContext?,
        target: UpstreamSettings.Target,
        deadline: NIODeadline
    ) -> EventLoopFuture<any Channel> {
        guard let context else { return channel.eventLoop.makeSucceededFuture(channel) }
        let sync = channel.pipeline.syncOperations
        let handler: UpstreamResponseHandler
        do {
            handler = try sync.handler(type: UpstreamResponseHandler.self)
        } catch {
            channel.close(promise: nil)
            return channel.eventLoop.makeFailedFuture(error)
        }
        let handshake = channel.eventLoop.makePromise(of: Void.self)
        handler.awaitTLSHandshake(handshake)
        // At least a millisecond: a TCP connect that took all of the time still gets a (failing) handshake.
        let left = max(deadline - .now(), .milliseconds(1))
        do {
            try sync.addHandler(
                TLSHandler(
                    context: context,
                    serverHostname: self.settings.tlsServerName ?? target.host,
                    handshakeTimeout: left,
                    handshakeFailureLogLevel: .debug,
                    logger: self.logger
                ),
                position: .first
            )
        } catch {
            channel.close(promise: nil)  // Fails the handshake promise (the codec sees the channel close).
        }
        return handshake.futureResult.map { channel }.flatMapErrorThrowing { error in
            channel.close(promise: nil)
            throw error
        }
    }

    /// Why a connect failed, for the log line: the TLS alert and reason as OpenSSL gives them (e.g. `unknown_CA: certificate verify
    /// failed: self-signed certificate`), never key material.
    static func describe(_ error: any Error) -> String {
        if let error = error as? TLSError {
            if error.code == .handshakeTimeout {
                return "TLS handshake not completed within connect_timeout"
            }
            return "TLS handshake failed: \(error.message)"
        }
        if case ChannelError.connectTimeout = error {
            return "TCP connect not completed within connect_timeout"
        }
        if error as? UpstreamError == .connectionClosed {
            return "connection closed during the TLS handshake"
        }
        return "\(error)"
    }
}

@available(*, unavailable)
extension UpstreamPool: Sendable {}

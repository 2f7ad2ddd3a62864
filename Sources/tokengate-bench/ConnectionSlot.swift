//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Histogram
import NIOCore
import NIOHTTP1
import NIOPosix
import TokengateTLS

/// One of the run's N connections, across reconnects: opens the TLS connection (HTTP/1.1 or HTTP/2 on top),
/// sends requests when its SlotStateMachine says so (one at a time on HTTP/1.1, up to `--streams` at once on
/// HTTP/2), records answers in its loop's LoopStats.
///
/// Confined to its event loop (every method runs there), so it needs no locks; it leaves the loop only
/// wrapped in `NIOLoopBound`.
final class ConnectionSlot {
    private let index: Int
    private let loop: any EventLoop
    private let stats: LoopStats
    private let shared: LoadShared
    private var machine: SlotStateMachine
    private var handler: BenchConnection?
    private var timer: Scheduled<Void>?
    /// Pending until the first connection's handshake completes (or fails).
    private var ready: EventLoopPromise<Void>?
    private let done: EventLoopPromise<Void>
    private var doneCompleted = false
    private var lastError: String?
    private var mixCursor: Int
    private var userCursor: Int
    private(set) var alpn: String?
    private(set) var tlsVersion: String?

    /// Sends that leave more than this late (fixed rate) count in the send-lag histogram.
    private static let lagThreshold: UInt64 = 1_000_000

    init(index: Int, loop: any EventLoop, stats: LoopStats, shared: LoadShared) {
        self.index = index
        self.loop = loop
        self.stats = stats
        self.shared = shared
        let pacing: SlotStateMachine.Pacing
        switch shared.plan.mode {
        case .closedLoop:
            pacing = .closedLoop
        case .fixedRate(let perSecond):
            // Each connection carries rate/N; their schedules are staggered by 1/rate so the total is even.
            let connections = Double(shared.plan.connections)
            pacing = .fixedRate(
                offset: UInt64(Double(index) * 1e9 / perSecond),
                interval: UInt64(connections * 1e9 / perSecond)
            )
        }
        self.machine = SlotStateMachine(
            pacing: pacing,
            budget: shared.plan.budget(forConnection: index),
            maxInFlight: shared.plan.streams
        )
        self.done = loop.makePromise()
        // Different connections start at different places in the mix and among the users.
        self.mixCursor = (index &* 7_919) % shared.pool.mix.schedule.count
        self.userCursor = index &* 104_729
    }

    /// Opens the first connection. The future succeeds when its TLS handshake is done.
    func connect() -> EventLoopFuture<Void> {
        let ready = self.loop.makePromise(of: Void.self)
        self.ready = ready
        self.openConnection()
        return ready.futureResult
    }

    /// Completes when the slot is finished and its connection closed.
    var finished: EventLoopFuture<Void> { self.done.futureResult }

    func start(at start: UInt64, duration: UInt64?) {
        self.machine.started(at: start, duration: duration)
        self.pump()
    }

    /// The hard stop: whatever is still in flight counts as unanswered.
    func abort() {
        let lost = self.machine.inFlight.count
        if lost > 0 {
            self.stats.error("unanswered_at_end", count: lost)
            _ = self.machine.disconnected()
        }
        self.finish()
    }

    // MARK: Events from the connection.

    func handshakeCompleted(_ handler: BenchConnection, alpn: String?, tlsVersion: String) {
        self.handler = handler
        self.alpn = alpn
        self.tlsVersion = tlsVersion
        self.machine.didConnect()
        if let ready = self.ready {
            self.ready = nil
            ready.succeed()
        }
        self.pump()
    }

    /// An answer to the request tagged `tag` (0 on HTTP/1.1, the stream id on HTTP/2).
    func responseCompleted(tag: Int32, status: Int, keepAlive: Bool) {
        guard let request = self.machine.answered(tag: tag) else {
            self.stats.error("unsolicited_response")
            return
        }
        let now = NIODeadline.now().uptimeNanoseconds
        self.stats.record(kind: request.kind, status: status, micros: (now &- request.intendedAt) / 1_000)
        self.stats.lastAnswerAt = max(self.stats.lastAnswerAt, now)
        if keepAlive {
            self.pump()
        } else {
            // The server is closing; channelClosed() reconnects if there is more to send.
            self.handler?.close()
        }
    }

    /// An HTTP/2 stream ended without a complete answer (RST_STREAM, or refused after a GOAWAY): an error,
    /// and the stream is free again.
    func streamFailed(tag: Int32, reason: String) {
        guard self.machine.answered(tag: tag) != nil else { return }
        self.stats.error(reason)
        self.stats.lastAnswerAt = max(self.stats.lastAnswerAt, NIODeadline.now().uptimeNanoseconds)
        self.pump()
    }

    /// The HTTP/2 server sent GOAWAY: an error; no new stream on this connection, those in flight may still
    /// be answered. The connection closes once they are done, and a new one is opened if there is more to do.
    func goawayReceived(reason: String) {
        self.stats.error(reason)
        self.machine.draining()
        self.pump()
    }

    func channelError(_ error: any Error) {
        let name: String
        if let bench = error as? BenchError {
            name = bench.message
        } else if let tls = error as? TLSError {
            name = "tls: \(tls.code)"
        } else {
            name = String(String(describing: error).prefix(80))
        }
        // Before the first handshake the error is reported by the failed `ready` future instead, in full (the
        // counted name stays short so that errors group).
        guard self.ready == nil else {
            self.lastError = name
            if let tls = error as? TLSError {
                self.lastError = "tls: \(tls.code): \(tls.message)"
                if tls.code == .handshakeFailed, self.shared.plan.wireProtocol == .http2 {
                    self.lastError! += " (--http 2 offers ALPN h2 only: a server without HTTP/2 may refuse it)"
                }
            }
            return
        }
        self.lastError = name
        self.stats.error(name)
    }

    func channelClosed() {
        self.handler = nil
        self.timer?.cancel()
        self.timer = nil
        let lost = self.machine.disconnected()
        if lost > 0 {
            self.stats.error("connection_lost_in_flight", count: lost)
        }
        if let ready = self.ready {
            self.ready = nil
            self.finishNow()
            ready.fail(BenchError("connect_failed", "connection \(self.index): \(self.lastError ?? "closed during TLS")"))
            return
        }
        if self.machine.finished {
            self.completeDone()
        } else if self.machine.wantsConnection(now: NIODeadline.now().uptimeNanoseconds) {
            self.stats.reconnects += 1
            self.openConnection()
        } else {
            self.finish()
        }
    }

    // MARK: Sending.

    /// Sends every request that is due and has a free stream, then flushes them together (HTTP/2: one
    /// write for the burst).
    private func pump() {
        var sent = false
        defer {
            if sent { self.handler?.flush() }
        }
        while true {
            let now = NIODeadline.now().uptimeNanoseconds
            switch self.machine.next(now: now) {
            case .idle:
                return
            case .finish:
                self.finish()
                return
            case .waitUntil(let time):
                guard self.timer == nil else { return }
                self.timer = self.loop.assumeIsolated().scheduleTask(deadline: .uptimeNanoseconds(time)) {
                    self.timer = nil
                    self.pump()
                }
                return
            case .send(let intendedAt):
                guard let handler = self.handler else { return }
                let pool = self.shared.pool
                let kind = Int(pool.mix.schedule[self.mixCursor])
                let requests = pool.requests[kind]
                let request = requests[self.userCursor % requests.count]
                guard let tag = handler.send(request) else {
                    // The HTTP/2 session takes no new stream; it closes (and the slot reconnects) on its own.
                    self.machine.draining()
                    return
                }
                self.mixCursor = self.mixCursor + 1 == pool.mix.schedule.count ? 0 : self.mixCursor + 1
                self.userCursor = (self.userCursor &+ 1) & Int.max
                self.machine.sent(tag: tag, kind: kind, intendedAt: intendedAt)
                self.stats.sent[kind] += 1
                if now &- intendedAt > Self.lagThreshold, case .fixedRate = self.machine.pacing {
                    _ = self.stats.sendLag.record((now &- intendedAt) / 1_000)
                }
                sent = true
            }
        }
    }

    private func finish() {
        guard self.machine.finish() else { return }
        self.finishNow()
    }

    private func finishNow() {
        _ = self.machine.finish()
        self.timer?.cancel()
        self.timer = nil
        if let handler = self.handler {
            handler.close()  // channelClosed() completes `done`.
        } else {
            self.completeDone()
        }
    }

    private func completeDone() {
        guard !self.doneCompleted else { return }
        self.doneCompleted = true
        self.done.succeed()
    }

    private func connectFailed(_ error: any Error) {
        self.lastError = String(String(describing: error).prefix(80))
        if let ready = self.ready {
            self.ready = nil
            self.finishNow()
            ready.fail(BenchError("connect_failed", "connection \(self.index): \(self.lastError!)"))
            return
        }
        self.stats.error("connect_failed")
        guard self.machine.wantsConnection(now: NIODeadline.now().uptimeNanoseconds) else {
            self.finish()
            return
        }
        // Refused connections are retried, not spun on.
        self.timer = self.loop.assumeIsolated().scheduleTask(in: .milliseconds(50)) {
            self.timer = nil
            self.stats.reconnects += 1
            self.openConnection()
        }
    }

    private func openConnection() {
        let bound = NIOLoopBound(self, eventLoop: self.loop)
        let shared = self.shared
        let connecting = ClientBootstrap(group: self.loop)
            .connectTimeout(shared.plan.connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(
                        TLSHandler(context: shared.tls, serverHostname: shared.target.serverName, logger: shared.logger)
                    )
                    switch shared.plan.wireProtocol {
                    case .http1:
                        try sync.addHTTPClientHandlers()
                        try sync.addHandler(BenchClientHandler(slot: bound.value))
                    case .http2:
                        try sync.addHandler(BenchHTTP2Handler(owner: .slot(bound.value)))
                    }
                }
            }
            .connect(host: shared.target.connectHost, port: shared.target.port)
        connecting.assumeIsolated().whenFailure { error in
            self.connectFailed(error)
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import TokengateConfig
import TokengateTLS

#if canImport(Glibc)
import Glibc
#endif

/// The active health checks of one generation's upstreams (`health_check:`), off the request path: every
/// target of a checked upstream is asked `GET path` every `interval` on a connection of its own (TCP, TLS with the
/// upstream's context and client certificate, the secret header), and each result goes through the target's
/// ``TargetHealthState``; a change is published to the upstream's ``UpstreamTargetHealth``, which every event
/// loop's pool reads, and logged.
///
/// Everything runs on one event loop of the gateway's group: a check is a connect and a few hundred bytes every
/// few seconds, and no request ever waits for one. The generation that replaces this one at a reload starts
/// its own checker with the health found so far (``init(upstreams:eventLoop:logger:inheriting:)``), and this one
/// is stopped (``stop()``): its checks still under way end within their timeout and are not counted.
///
/// `@unchecked Sendable`: the mutable state (the states, the timers, `stopped`) is touched only on `eventLoop`
/// (every method that reads it runs there, checked by `preconditionInEventLoop`); the rest is immutable.
final class UpstreamHealthChecker: @unchecked Sendable {
    /// Per upstream, indexed like ``GatewayRuntime/upstreams``: `nil` for one without `health_check`.
    let health: [UpstreamTargetHealth?]
    private let upstreams: [UpstreamSettings]
    private let eventLoop: any EventLoop
    private let logger: Logger
    /// `[upstream][target]`, on `eventLoop` only.
    private var states: [[TargetHealthState]]
    /// Each target's next check, `[upstream * 256 + target]` (at most 256 targets an upstream).
    private var scheduled: [Int: Scheduled<Void>] = [:]
    private var stopped = false

    /// - Parameter previous: the checker of the generation this one replaces: a target it knew (same upstream
    ///   name, same address) starts with the health it had, so a reload neither returns a dead target to the
    ///   rotation nor takes a live one out.
    init(upstreams: [UpstreamSettings], eventLoop: any EventLoop, logger: Logger, inheriting previous: UpstreamHealthChecker? = nil) {
        self.upstreams = upstreams
        self.eventLoop = eventLoop
        self.logger = logger
        var health: [UpstreamTargetHealth?] = []
        var states: [[TargetHealthState]] = []
        for upstream in upstreams {
            guard let check = upstream.healthCheck else {
                health.append(nil)
                states.append([])
                continue
            }
            let known = previous?.health.first { $0?.upstream == upstream.name }??.snapshot ?? []
            let flags = upstream.targets.map { target in known.first { $0.target == target.display }?.healthy ?? true }
            health.append(UpstreamTargetHealth(upstream: upstream.name, targets: upstream.targets.map(\.display), initiallyHealthy: flags))
            states.append(flags.map {
                TargetHealthState(healthy: $0, healthyThreshold: check.healthyThreshold, unhealthyThreshold: check.unhealthyThreshold)
            })
        }
        self.health = health
        self.states = states
    }

    /// Starts the checks: the first of every target at once, then one every `interval`.
    func start() {
        guard self.health.contains(where: { $0 != nil }) else { return }
        self.eventLoop.execute {
            for (upstream, settings) in self.upstreams.enumerated() where settings.healthCheck != nil {
                for target in settings.targets.indices {
                    self.check(upstream: upstream, target: target)
                }
            }
        }
    }

    /// Stops scheduling checks; one under way ends within its timeout and is not counted.
    func stop() {
        self.eventLoop.execute {
            self.stopped = true
            self.scheduled.values.forEach { $0.cancel() }
            self.scheduled = [:]
        }
    }

    private func check(upstream: Int, target: Int) {
        self.eventLoop.preconditionInEventLoop()
        guard !self.stopped, let check = self.upstreams[upstream].healthCheck else { return }
        let started = NIODeadline.now()
        self.probe(upstream: upstream, target: target, check: check).whenComplete { outcome in
            guard !self.stopped else { return }
            let passed: Bool
            let result: String
            switch outcome {
            case .success(let status):
                passed = check.accepts(status: status)
                result = passed ? "status \(status)" : "status \(status), not in expected_status"
            case .failure(let error):
                passed = false
                result = "\(error)"
            }
            self.record(upstream: upstream, target: target, passed: passed, result: result)
            // Every `interval` from the start of the last check (which took at most `timeout` ≤ `interval`).
            let next = started + TimeAmount(check.interval)
            self.scheduled[upstream * 256 + target] = self.eventLoop.scheduleTask(deadline: next) {
                self.check(upstream: upstream, target: target)
            }
        }
    }

    private func record(upstream: Int, target: Int, passed: Bool, result: String) {
        let transition = self.states[upstream][target].record(passed: passed)
        let state = self.states[upstream][target]
        guard let health = self.health[upstream] else { return }
        health.publish(target, state: state, result: result, passed: passed)
        let settings = self.upstreams[upstream]
        let metadata: Logger.Metadata = [
            "upstream": "\(settings.name)", "target": "\(settings.targets[target].display)", "check": "\(result)",
        ]
        switch transition {
        case .none:
            break
        case .becameUnhealthy:
            var metadata = metadata
            metadata["failures"] = "\(state.failuresInARow)"
            let allDown = (0..<health.targetCount).allSatisfy { !health.isHealthy($0) }
            if allDown {
                metadata["note"] = "every target is unhealthy: requests go to all of them until one passes again"
            }
            self.logger.warning("upstream target unhealthy, out of the rotation", metadata: metadata)
        case .becameHealthy:
            var metadata = metadata
            metadata["successes"] = "\(state.successesInARow)"
            self.logger.notice("upstream target healthy again, back in the rotation", metadata: metadata)
        }
    }

    /// One check of target `target`: its status, or a ``HealthProbeHandler/Failure`` saying what went wrong.
    /// The whole check — connect, handshake, response head — is bounded by `timeout`.
    private func probe(upstream: Int, target: Int, check: HealthCheckConfiguration) -> EventLoopFuture<Int> {
        let settings = self.upstreams[upstream]
        let address = settings.targets[target]
        let timeout = TimeAmount(check.timeout)
        let promise = self.eventLoop.makePromise(of: Int.self)
        var headers = HTTPHeaders()
        let hostName = address.host.contains(":") ? "[\(address.host)]" : address.host
        headers.add(name: "host", value: "\(hostName):\(address.port)")
        headers.add(name: "user-agent", value: "tokengate-health-check")
        headers.add(name: "connection", value: "close")
        if let secret = settings.secretHeader {
            headers.add(name: secret.name, value: String(decoding: secret.value, as: UTF8.self))
        }
        let request = HTTPRequestHead(version: .http1_1, method: .GET, uri: check.path, headers: headers)
        let tlsContext = address.useTLS ? settings.tlsContext : nil
        let serverName = settings.tlsServerName ?? address.host
        let logger = self.logger
        let bootstrap = ClientBootstrap(group: self.eventLoop)
            .connectTimeout(timeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tlsContext {
                        try sync.addHandler(
                            TLSHandler(
                                context: tlsContext, serverHostname: serverName, handshakeTimeout: timeout,
                                handshakeFailureLogLevel: .debug, logger: logger))
                    }
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(HealthProbeHandler(request: request, promise: promise))
                }
            }
        let timer = self.eventLoop.scheduleTask(in: timeout) {
            promise.fail(HealthProbeHandler.Failure(description: "no response head within timeout (\(Self.text(check.timeout)))"))
        }
        bootstrap.connect(host: address.host, port: address.port).whenComplete { result in
            switch result {
            case .success(let channel):
                // Closed when the check ends, whichever way; closing twice is harmless.
                promise.futureResult.whenComplete { _ in channel.close(promise: nil) }
            case .failure(let error):
                promise.fail(HealthProbeHandler.Failure(description: "connect failed: \(Self.connectFailure(error))"))
            }
        }
        return promise.futureResult.always { _ in timer.cancel() }
    }

    /// Why a connect failed, short: the system's words for the first address's error (`Connection refused`)
    /// rather than NIO's description of every attempt; anything else as ``UpstreamPool/describe(_:)`` says it.
    static func connectFailure(_ error: any Error) -> String {
        if let error = error as? NIOConnectionError, let first = error.connectionErrors.first?.error as? IOError {
            return String(cString: strerror(first.errnoCode))
        }
        if let error = error as? NIOConnectionError, error.dnsAAAAError != nil || error.dnsAError != nil,
            error.connectionErrors.isEmpty
        {
            return "host name not resolved"
        }
        return UpstreamPool.describe(error)
    }

    /// `150ms`, `2s`: a duration as the configuration writes it.
    static func text(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }
}

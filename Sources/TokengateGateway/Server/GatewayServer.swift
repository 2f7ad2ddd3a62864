//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import TokengateConfig
import TokengateTLS
import TokengateTokens
import TokengateHTTP

/// The running gateway: its listeners, the runtime they serve, and the way down.
///
/// Built from a validated ``GatewayConfiguration``; ``start()`` binds every listener (or fails on the
/// first that cannot be bound, closing the others), ``shutdown(drainTimeout:)`` stops accepting,
/// lets in-flight exchanges finish within the drain timeout, then closes what is left.
public final class GatewayServer: Sendable {
    private let generations: GatewayGenerationHolder
    private let cutoffs: CutoffSnapshotHolder
    private let group: any EventLoopGroup
    private let registry: ConnectionRegistry
    private let logger: Logger
    private let metricsRegistry: MetricsRegistry
    /// `limits.token_body_memory` for the whole process, across reloads.
    private let tokenBodyMemory: TokenBodyMemory
    /// `limits.response_buffer_total` for the whole process, across reloads.
    private let responseBuffers: ResponseBufferBudget
    /// Token page login checks under way, for the process: `login.whoami.max_in_flight` caps them across routes
    /// and across reloads (a reload's new clients count the old ones' calls still under way).
    private let whoamiCallsInFlight = ManagedAtomic<Int>(0)
    /// The PKCE codes the token pages redeemed, for the process: a code redeemed before a reload is still
    /// refused after it (a memory per generation would forget them all at each SIGHUP).
    private let redeemedCodes: RedeemedCodeMemory
    /// Where token pages store the devices they mint for (nil: the cutoff store keeps none).
    private let devices: DeviceRegistry?
    private let now: (@Sendable () -> Int64)?
    private let nowMilliseconds: (@Sendable () -> Int64)?
    private let serverChannels = NIOLockedValueBox<[any Channel]>([])
    /// The listening descriptors of `serverChannels`, in the same order (NIO does not expose a channel's).
    private let descriptors = NIOLockedValueBox<[CInt]>([])
    /// Set by ``endDrainNow()``: the drain in progress stops waiting and closes what is left.
    private let drainCutShort = NIOLockedValueBox(false)
    /// Serializes reloads (SIGHUP and the admin API may race) and key set publications; requests never take it.
    private let reloadLock = NIOLock()
    /// The fetched key sets (`jwks_url`, `discovery`), kept across reloads.
    private let remoteKeys: RemoteKeySets

    /// - Parameters:
    ///   - cutoffs: the holder the cutoff store keeps current; requests read it without locks.
    ///   - now: the clock for token checks (UNIX seconds); tests inject one.
    ///   - nowMilliseconds: the same clock in milliseconds (the confirmation page's minimum delay); by default
    ///     `now` times 1000 when `now` is injected, else the system clock.
    ///   - devices: where token pages store the devices of the tokens they mint (the cutoff store's sync service);
    ///     nil when the store keeps none, and tokens then carry no device.
    public init(
        configuration: GatewayConfiguration,
        cutoffs: CutoffSnapshotHolder,
        group: any EventLoopGroup,
        logger: Logger,
        now: (@Sendable () -> Int64)? = nil,
        nowMilliseconds: (@Sendable () -> Int64)? = nil,
        devices: DeviceRegistry? = nil
    ) throws {
        self.devices = devices
        self.cutoffs = cutoffs
        self.group = group
        self.logger = logger
        self.now = now
        self.nowMilliseconds = nowMilliseconds
        self.metricsRegistry = MetricsRegistry()
        self.tokenBodyMemory = TokenBodyMemory(limit: configuration.limits.tokenBodyMemory)
        self.responseBuffers = ResponseBufferBudget(limit: configuration.limits.responseBufferTotal)
        self.redeemedCodes = RedeemedCodeMemory(logger: logger)
        self.remoteKeys = RemoteKeySets(group: group, logger: logger, registry: self.metricsRegistry)
        let remoteSources = try self.remoteKeys.prepare(configuration)
        let generation = try GatewayGeneration(
            number: 1,
            configuration: configuration,
            cutoffs: cutoffs,
            metrics: nil,
            registry: self.metricsRegistry,
            tokenBodyMemory: self.tokenBodyMemory,
            responseBuffers: self.responseBuffers,
            whoamiCallsInFlight: self.whoamiCallsInFlight,
            redeemedCodes: self.redeemedCodes,
            devices: devices,
            group: group,
            logger: logger,
            now: now,
            nowMilliseconds: nowMilliseconds,
            remoteKeys: remoteSources
        )
        generation.runtime.metrics.configGeneration.record(1)
        generation.healthChecker.start()
        self.generations = GatewayGenerationHolder(generation)
        self.registry = ConnectionRegistry(limit: configuration.limits.maxConnections)
        self.remoteKeys.adopt(remoteSources) { [weak self] in self?.republishKeys() }
    }

    /// A fetched key set changed: the current generation is rebuilt with the new keys (its files are not read
    /// again) and swapped in like a reload's, so requests keep reading their verifiers lock-free. A set that
    /// cannot join the others (a `kid` a key file also uses) is logged and the generation keeps its keys.
    private func republishKeys() {
        self.reloadLock.withLock {
            let current = self.generations.load()
            do {
                let runtime = try GatewayRuntime.build(
                    from: current.configuration,
                    cutoffs: self.cutoffs,
                    metrics: current.runtime.metrics,
                    registry: self.metricsRegistry,
                    tokenBodyMemory: self.tokenBodyMemory,
                    whoamiCallsInFlight: self.whoamiCallsInFlight,
                    redeemedCodes: self.redeemedCodes,
                    now: self.now,
                    nowMilliseconds: self.nowMilliseconds,
                    fileKeys: current.runtime.fileKeys,
                    remoteKeys: self.remoteKeys.current
                )
                _ = self.generations.exchange(GatewayGeneration(republishing: current, runtime: runtime))
            } catch {
                self.logger.error("fetched keys not published", metadata: ["error": "\(error)"])
            }
        }
    }

    /// The gateway's metrics, for the admin listener's `/metrics`.
    public var metrics: GatewayMetrics { self.generations.load().runtime.metrics }

    /// The metrics written at each scrape rather than kept: the served certificates' expiry and the process's
    /// `process_*` (``CertificateExpiryMetric``, ``ProcessMetrics``).
    public func scrapeTimeExposition() -> String {
        let generation = self.generations.load()
        var certificates: [CertificateExpiryMetric.Certificate] = []
        for (index, listener) in generation.configuration.listeners.enumerated() {
            guard let tls = listener.tls ?? listener.forwardAuth?.tls, let context = generation.tlsContexts[index] else { continue }
            for (certificate, notAfter) in zip(tls.certificates, context.certificateExpiries) {
                guard let notAfter else { continue }
                certificates.append(.init(listener: "\(listener.address)", file: certificate.cert.original, notAfter: notAfter))
            }
        }
        return CertificateExpiryMetric.exposition(certificates)
            + UpstreamHealthMetric.exposition(generation.healthChecker.health) + ProcessMetrics.exposition()
    }

    /// The admin listener's `GET /upstreams`: every upstream's targets and, with `health_check`, their health
    /// (``UpstreamHealthMetric/json(upstreams:health:)``). Not part of `/readyz`: one dead backend must not take
    /// every gateway instance out of its load balancer.
    public func upstreamsJSON() -> String {
        let generation = self.generations.load()
        return UpstreamHealthMetric.json(upstreams: generation.runtime.upstreams, health: generation.healthChecker.health)
    }

    /// The number of the configuration generation now serving (1 at start, +1 per successful reload).
    public var generation: Int { self.generations.load().number }

    /// Connections of upstream `index` (configuration order) in use or connecting, on every loop.
    func busyUpstreamConnections(upstream index: Int) async throws -> Int {
        try await self.generations.load().pools.busyConnections(upstream: index)
    }

    /// How many verified tokens each event loop's cache holds in the generation now serving (empty when
    /// `tokens.verified_cache.entries` is 0).
    func verifiedTokenCacheCounts() async throws -> [Int] {
        try await self.generations.load().tokenCaches.counts()
    }

    /// Reloads configuration, keys and certificates: `configuration` is built into a complete new
    /// generation first (every key file parsed, every certificate loaded), and only then swapped in. A
    /// configuration that fails to build throws, and the old one keeps serving, untouched.
    ///
    /// Requests in flight finish with the generation they started with; open connections stay open and
    /// take the new one at their next request. Listener addresses are not rebound: changing them needs a
    /// restart, and such a change is refused.
    public func reload(configuration: GatewayConfiguration) throws {
        try self.reloadLock.withLock {
            try self.reloadLocked(configuration: configuration)
        }
    }

    /// Reads the configuration file at `path` and reloads it (``reload(configuration:)``). A file that does not
    /// load (YAML, an unknown key, a missing file) is a refused reload like any other: it counts in
    /// `tokengate_config_reload_failures_total`, the metric operators watch after a SIGHUP.
    public func reload(configurationPath path: String) throws {
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(path: path)
        } catch {
            self.metrics.configReloadFailures.increment()
            throw error
        }
        try self.reload(configuration: configuration)
    }

    private func reloadLocked(configuration: GatewayConfiguration) throws {
        let current = self.generations.load()
        let restartOnly = configuration.restartOnlyChanges(comparedTo: current.configuration)
        guard restartOnly.isEmpty else {
            current.runtime.metrics.configReloadFailures.increment()
            throw GatewayStartupError(
                "\(restartOnly.joined(separator: ", ")) cannot change on reload (restart the gateway to change "
                    + "\(restartOnly.count == 1 ? "it" : "them")); nothing was reloaded"
            )
        }
        let next: GatewayGeneration
        let remoteSources: [RemoteKeySource.Identity: RemoteKeySource]
        do {
            remoteSources = try self.remoteKeys.prepare(configuration)
            next = try GatewayGeneration(
                number: current.number + 1,
                configuration: configuration,
                cutoffs: self.cutoffs,
                metrics: nil,
                registry: self.metricsRegistry,
                tokenBodyMemory: self.tokenBodyMemory,
                responseBuffers: self.responseBuffers,
                whoamiCallsInFlight: self.whoamiCallsInFlight,
                redeemedCodes: self.redeemedCodes,
                devices: self.devices,
                group: self.group,
                logger: self.logger,
                now: self.now,
                nowMilliseconds: self.nowMilliseconds,
                remoteKeys: remoteSources,
                replacing: current
            )
        } catch {
            current.runtime.metrics.configReloadFailures.increment()
            throw error
        }
        self.registry.limit = configuration.limits.maxConnections
        self.tokenBodyMemory.limit = configuration.limits.tokenBodyMemory
        self.responseBuffers.limit = configuration.limits.responseBufferTotal
        next.healthChecker.start()
        let previous = self.generations.exchange(next)
        previous.healthChecker.stop()
        previous.pools.closeAll()
        self.remoteKeys.adopt(remoteSources) { [weak self] in self?.republishKeys() }
        next.runtime.metrics.configReloads.increment()
        next.runtime.metrics.configGeneration.record(Int64(next.number))
        if configuration.log.level != current.configuration.log.level {
            // Before the line below, so that it is written at the new level. Process-wide: a gateway is
            // the only server in its process (an in-process test harness logs through its own handler).
            ProcessLogLevel.set(configuration.log.level)
        }
        self.logger.info("configuration reloaded", metadata: ["generation": "\(next.number)"])
        // As at start: a reload that brings in a mistake `check-config` would warn about says so in the log too.
        for warning in Self.warnings(for: configuration, runtime: next.runtime) {
            self.logger.warning("configuration: \(warning)", metadata: ["generation": "\(next.number)"])
        }
    }

    /// What `check-config` prints and `serve` logs as warnings: the configuration's own
    /// (``GatewayConfiguration/warnings``, which never reads a file), and what only the key files show: a
    /// verification key set (`keys:`) that holds private keys; and what only the certificates show: configured
    /// `server_names` a certificate does not hold (``TLSServerContext/serverNamesNotCovered(_:certificatePath:)``).
    public static func warnings(for configuration: GatewayConfiguration) -> [String] {
        Self.warnings(for: configuration, runtime: nil)
    }

    /// ``warnings(for:)``; `runtime` is the one built from `configuration` when there is one (a reload), which the
    /// token page check then uses instead of building its own.
    static func warnings(for configuration: GatewayConfiguration, runtime: GatewayRuntime?) -> [String] {
        var warnings = configuration.warnings
        for (index, key) in configuration.keys.enumerated() {
            guard case .jwks(let path) = key.source,
                let data = FileManager.default.contents(atPath: path.path), data.count <= 1 << 20
            else { continue }
            if KeySet.holdsSymmetricKeys(jwks: data),
                let warning = GatewayConfiguration.readableSecretWarning(key: "keys[\(index)].jwks", file: path)
            {
                warnings.append(warning)
            }
            let privateKeys = KeySet.keysWithPrivateMembers(jwks: data)
            guard !privateKeys.isEmpty else { continue }
            warnings.append(
                "keys[\(index)].jwks: \(path) holds private key material (\(privateKeys.joined(separator: ", "))); "
                    + "verification needs only the public keys: list the public key set here and keep the private "
                    + "one for signing_key"
            )
        }
        warnings += Self.tokenPageWarnings(configuration, runtime: runtime)
        var tlsListeners = configuration.listeners.enumerated().compactMap { index, listener in
            listener.tls.map { ("listen[\(index)].tls", $0) }
        }
        if let tls = configuration.admin?.tls {
            tlsListeners.append(("admin.tls", tls))
        }
        for (key, tls) in tlsListeners {
            warnings += TLSServerContext.warnings(listener: tls, key: key)
            for (index, certificate) in tls.certificates.enumerated() {
                let missing = TLSServerContext.serverNamesNotCovered(certificate.serverNames, certificatePath: certificate.cert.path)
                guard !missing.isEmpty else { continue }
                warnings.append(
                    "\(key).certificates[\(index)].server_names: \(missing.joined(separator: ", ")) "
                        + "\(missing.count == 1 ? "is" : "are") not in the certificate \(certificate.cert); a client asking "
                        + "for \(missing.count == 1 ? "it" : "one of them") gets this certificate and fails its name check"
                )
            }
        }
        return warnings
    }

    /// A token page whose tokens no route of this gateway accepts: its `signing_key` is not among `keys` (or
    /// a route's `algorithms`, `issuer` or `audience` refuse what it mints). The apps would get tokens that every
    /// API call answers `401`, and send their users back to the page in a loop. Found by minting a token as the
    /// page would and verifying it as each route that takes api tokens would; a configuration that does not
    /// build gets no warning here (`check` and `serve` say what is wrong with it).
    static func tokenPageWarnings(_ configuration: GatewayConfiguration, runtime: GatewayRuntime? = nil) -> [String] {
        guard configuration.routes.contains(where: { $0.tokenPage != nil }),
            let runtime = runtime
                ?? (try? GatewayRuntime.build(
                    from: configuration, cutoffs: CutoffSnapshotHolder(.empty), redeemedCodes: .unused()))
        else {
            return []
        }
        let now = runtime.now()
        let apiRoutes = runtime.routes.compactMap { route -> (String, TokenVerifier)? in
            guard let tokens = route.tokens, tokens.accept.contains(.api), let verifier = tokens.verifier else {
                return nil
            }
            return (route.name, verifier)
        }
        var warnings: [String] = []
        for (index, route) in runtime.routes.enumerated() {
            guard let page = route.tokenPage, !apiRoutes.isEmpty,
                let token = page.responder.mint(for: "tokengate-check-config", now: now)
            else { continue }
            var refusals: [String] = []
            for (name, verifier) in apiRoutes {
                guard case .invalid(let reason) = verifier.verify(token, accept: .api, cutoffs: .empty, now: now) else {
                    refusals = []
                    break
                }
                refusals.append("\(name): \(reason.code)")
            }
            guard !refusals.isEmpty else { continue }
            warnings.append(
                "routes[\(index)] (token page \(route.name)) mints tokens that no route accepting api tokens accepts "
                    + "(\(refusals.joined(separator: ", "))): its apps would be answered 401 on every call; list "
                    + "the public key of signing_key in keys (or check the routes' algorithms, issuer and audience)"
            )
        }
        return warnings
    }

    /// Everything `init` checks without binding anything: the keys parse, the certificates load and match
    /// their keys. For `tokengate check-config` (with the admin listener's own check,
    /// `AdminServer.check(_:)`), which must not pass a file that `serve` then refuses.
    public static func check(_ configuration: GatewayConfiguration) throws {
        _ = try GatewayRuntime.build(from: configuration, cutoffs: CutoffSnapshotHolder(.empty), redeemedCodes: .unused())
        _ = try GatewayGeneration.makeTLSContexts(configuration)
    }

    /// Fetches every `jwks_url` and `discovery` key set of `configuration` once, as `serve` would, for
    /// `check-config --connect`: one line per entry saying which keys it would use and which it skips, or why the
    /// fetch failed. `ok` is false when an entry gave no usable key.
    public static func probeKeySets(_ configuration: GatewayConfiguration) async -> (ok: Bool, lines: [String]) {
        var ok = true
        var lines: [String] = []
        let logger = Logger(label: "tokengate.check-config")
        for identity in RemoteKeySets.identities(configuration) {
            let name = "\(identity.configuration.kind == .discovery ? "discovery" : "jwks_url") \(identity.configuration.url)"
            do {
                let source = try RemoteKeySource(
                    identity: identity, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: logger,
                    registry: MetricsRegistry())
                let set = try await source.probe().get()
                let kids = set.keys?.keyIDs.map { $0 ?? "-" } ?? []
                var line = "\(name): \(kids.count) usable key\(kids.count == 1 ? "" : "s")"
                if !kids.isEmpty { line += " (kid \(kids.joined(separator: ", ")))" }
                for skipped in set.skipped {
                    line += "; skipped key \(skipped.index)\(skipped.keyID.map { " (kid \($0))" } ?? ""): \(skipped.reason)"
                }
                if kids.isEmpty { ok = false }
                lines.append(line)
            } catch {
                ok = false
                lines.append("\(name): \(error)")
            }
        }
        return (ok, lines)
    }

    /// Binds every listener, or takes the socket passed for it (`passedSockets`, by listener index: systemd's socket
    /// activation or a binary hand-over, ``PassedSockets``). Returns the bound addresses in configuration order
    /// (useful with port 0).
    @discardableResult
    public func start(passedSockets: [Int: CInt] = [:]) async throws -> [SocketAddress] {
        var bound: [SocketAddress] = []
        let configuration = self.generations.load().configuration
        var current: SocketAddressSpec?
        do {
            for (index, listener) in configuration.listeners.enumerated() {
                current = listener.address
                let passed = passedSockets[index]
                let descriptor = try passed ?? ListeningSocket.bind(host: listener.address.host, port: listener.address.port)
                let channel: any Channel
                switch listener.mode {
                case .tls:
                    channel = try await self.bindTLS(listener.address, index: index, descriptor: descriptor)
                case .plain:
                    channel = try await self.bindPlain(listener.address, index: index, descriptor: descriptor)
                case .forwardAuth:
                    channel = try await self.bindForwardAuth(listener.address, index: index, descriptor: descriptor)
                }
                ListeningSocket.setBacklog(descriptor)
                self.serverChannels.withLockedValue { $0.append(channel) }
                self.descriptors.withLockedValue { $0.append(descriptor) }
                if let address = channel.localAddress { bound.append(address) }
                var metadata: Logger.Metadata = ["address": "\(listener.address)", "tls": "\(listener.tls != nil)"]
                if passed != nil { metadata["socket"] = "passed" }
                self.logger.info("listening", metadata: metadata)
            }
        } catch {
            for channel in self.serverChannels.withLockedValue({ $0 }) { try? await channel.close() }
            let address = current.map { " on \($0)" } ?? ""
            throw GatewayStartupError("cannot listen\(address): \(error)", errnoCode: (error as? IOError)?.errnoCode)
        }
        return bound
    }

    /// The listening sockets' descriptors in configuration order, for a binary hand-over to pass on. Valid while
    /// the gateway accepts (until ``shutdown(drainTimeout:)`` closes them).
    package var listeningDescriptors: [CInt] { self.descriptors.withLockedValue { $0 } }

    /// `limits.drain_timeout` of the running configuration (a reload may have changed it).
    public var drainTimeout: TimeAmount {
        TimeAmount(self.generations.load().configuration.limits.drainTimeout)
    }

    /// Graceful shutdown: stop accepting, let in-flight exchanges finish (up to `drainTimeout`), close.
    public func shutdown(drainTimeout: TimeAmount) async {
        self.descriptors.withLockedValue { $0 = [] }
        for channel in self.serverChannels.withLockedValue({ $0 }) {
            try? await channel.close()
        }
        // A connection a listener accepted just before it closed is handed to its event loop in a task queued
        // then; the registry sees it only once that task has run. One more turn of every loop lets those tasks
        // run, so that the drain below does not find no connection, and end the process, while one is still on
        // its way in (its client would see its handshake cut). Any that still register later are told by the
        // registry as they come.
        for loop in self.group.makeIterator() {
            try? await loop.submit {}.get()
        }
        let open = self.registry.beginDrain()
        if drainTimeout > .zero {
            self.logger.info("draining", metadata: ["connections": "\(open.count)", "drain_timeout": "\(drainTimeout)"])
        }
        for channel in open {
            channel.pipeline.fireUserInboundEventTriggered(GatewayShutdownEvent())
        }
        let deadline = NIODeadline.now() + drainTimeout
        while self.registry.count > 0, NIODeadline.now() < deadline, !self.drainCutShort.withLockedValue({ $0 }) {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for channel in self.registry.all {
            // In order on the channel's loop: the exchanges log themselves as cut, then the close.
            channel.pipeline.fireUserInboundEventTriggered(GatewayDrainEndedEvent())
            channel.close(promise: nil)
        }
        self.generations.load().healthChecker.stop()
        self.generations.load().pools.closeAll()
        self.remoteKeys.stopAll()
        self.logger.info("stopped", metadata: ["forced_connections": "\(self.registry.count)"])
    }

    /// Ends a drain in progress at once (an operator's second SIGTERM or SIGINT): connections still open
    /// are closed, as at the end of `drain_timeout`, and ``shutdown(drainTimeout:)`` returns. Before, a second
    /// signal was ignored and the process waited out the whole drain. Harmless when no drain is running.
    public func endDrainNow() {
        let alreadyCut = self.drainCutShort.withLockedValue { cut in
            defer { cut = true }
            return cut
        }
        if !alreadyCut {
            self.logger.warning("drain cut short by a second signal", metadata: ["connections": "\(self.registry.count)"])
        }
    }

    // MARK: Listeners

    /// Serves the TLS listener `index` on `descriptor` (bound, not yet listening, or passed in listening). Everything but its address is read from the generation current when a
    /// connection arrives (a reload keeps each listener's address and kind at its index), so a reload's new
    /// certificates and handshake timeout apply to the next connection.
    private func bindTLS(_ address: SocketAddressSpec, index: Int, descriptor: CInt) async throws -> any Channel {
        let generations = self.generations
        let registry = self.registry
        let logger = self.logger
        let backoff = AcceptBackoff(listener: "\(address)", logger: logger)
        let connectionGauges = ListenerConnectionGauges.Lazy(address: address, tls: true, registry: self.metricsRegistry)
        return try await self.serverBootstrap(backoff).childChannelInitializer { channel in
            guard backoff.admit(channel) else {
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            guard registry.add(channel) else {
                if let refused = registry.refusalsToReport() {
                    // At most one line a second under a flood, with the count since the last one.
                    logger.warning("connection limit reached", metadata: ["limit": "\(registry.limit)", "refused": "\(refused)"])
                }
                return channel.close()
            }
            // The certificates and limits of the generation current when the connection arrives.
            let generation = generations.load()
            let listener = generation.configuration.listeners[index]
            let tls = listener.tls
            let handshakeTimeout = tls.map { TimeAmount($0.handshakeTimeout) } ?? .seconds(10)
            let tlsContext = generation.tlsContexts[index]!
            let openConnection = OpenConnectionSlot.track(channel, gauges: connectionGauges, tls: true)
            // A listed load balancer must start with a PROXY header; anyone else is a client itself.
            let sendsProxyHeader = listener.proxyProtocolFrom.map { from in
                channel.remoteAddress?.ipAddress.map { ip in from.contains { $0.contains(ipAddress: ip) } } ?? false
            } ?? false
            return channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                let proxiedAddress = sendsProxyHeader ? ProxiedAddress() : nil
                if let proxiedAddress {
                    try sync.addHandler(
                        ProxyProtocolHandler(target: proxiedAddress, logger: logger) {
                            generation.runtime.metrics.recordTLSFailure("proxyProtocol")
                        }
                    )
                }
                try sync.addHandler(
                    PlainHTTPOnTLSPortHandler(logger: logger, accessLog: generation.runtime.accessLog, proxiedAddress: proxiedAddress) {
                        generation.runtime.metrics.recordTLSFailure("plainHTTP")
                    }
                )
                try sync.addHandler(TLSHandler(context: tlsContext, handshakeTimeout: handshakeTimeout, logger: logger))
                // The codec (HTTP/2 or HTTP/1.1) is chosen by ALPN once the handshake completes.
                try sync.addHandler(
                    ALPNRouter(
                        generations: generations,
                        tlsContext: tlsContext,
                        misdirectedRequests: tls?.misdirectedRequests ?? .refuse,
                        openConnection: openConnection,
                        listenerIndex: index,
                        proxiedAddress: proxiedAddress,
                        logger: logger
                    )
                )
            }
        }.withBoundSocket(descriptor).get()
    }

    /// Serves the plain-HTTP listener `index` on `descriptor`; its mode and redirect port are read per connection, like
    /// ``bindTLS(_:index:)``'s settings.
    private func bindPlain(_ address: SocketAddressSpec, index: Int, descriptor: CInt) async throws -> any Channel {
        let generations = self.generations
        let registry = self.registry
        let logger = self.logger
        let backoff = AcceptBackoff(listener: "\(address)", logger: logger)
        let connectionGauges = ListenerConnectionGauges.Lazy(address: address, tls: false, registry: self.metricsRegistry)
        return try await self.serverBootstrap(backoff).childChannelInitializer { channel in
            guard backoff.admit(channel) else {
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            let generation = generations.load()
            let listener = generation.configuration.listeners[index]
            let mode: PlainHTTPMode = if case .plain(let mode) = listener.mode { mode } else { .reject }
            let httpsPort = listener.redirectPort ?? generation.configuration.listeners.first { $0.tls != nil }?.address.port
            let limits = generation.configuration.limits
            let peer = channel.remoteAddress?.ipAddress
            // Behind a TLS-terminating load balancer: requests from a configured proxy address are served
            // (when it says the client used https); everyone else only ever gets the refusal or redirect.
            let trusted = peer.map { ip in generation.configuration.trustedProxies.contains { $0.contains(ipAddress: ip) } } ?? false
            // Plain connections count against the same limit as TLS ones, and idle ones are closed.
            guard registry.add(channel) else {
                return channel.close()
            }
            _ = OpenConnectionSlot.track(channel, gauges: connectionGauges, tls: false)
            guard trusted else {
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    // Idle for as long as a head may take: nothing useful comes from a silent plain connection.
                    try sync.addHandler(
                        Self.http1Handler(limits: limits, idleTimeout: limits.requestHeaderTimeout) { readDeadlines in
                            PlainHTTPHandler(
                                mode: mode,
                                httpsPort: httpsPort,
                                runtime: generation.runtime,
                                limits: limits,
                                readDeadlines: readDeadlines,
                                logger: logger
                            )
                        }
                    )
                }
            }
            return channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(
                    Self.http1Handler(limits: limits) { readDeadlines in
                        HTTP1ConnectionHandler(
                            generations: generations,
                            clientAddress: peer,
                            viaTrustedProxy: true,
                            listenerIndex: index,
                            readDeadlines: readDeadlines,
                            logger: logger
                        )
                    }
                )
            }
        }.withBoundSocket(descriptor).get()
    }

    /// Binds the check listener `index` (``ForwardAuthCheck``): HTTP/1.1, over TLS when configured, one exchange
    /// at a time as on the public listeners, but each exchange answers and never forwards. Whether the peer is a
    /// trusted front proxy is decided per connection from the generation current when it arrives.
    private func bindForwardAuth(_ address: SocketAddressSpec, index: Int, descriptor: CInt) async throws -> any Channel {
        let generations = self.generations
        let registry = self.registry
        let logger = self.logger
        let backoff = AcceptBackoff(listener: "\(address)", logger: logger)
        let connectionGauges = ListenerConnectionGauges.Lazy(address: address, tls: false, registry: self.metricsRegistry)
        return try await self.serverBootstrap(backoff).childChannelInitializer { channel in
            guard backoff.admit(channel) else {
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            let generation = generations.load()
            guard let settings = generation.configuration.listeners[index].forwardAuth, registry.add(channel) else {
                return channel.close()
            }
            let limits = generation.configuration.limits
            let peer = channel.remoteAddress?.ipAddress
            let check = ForwardAuthCheck(settings: settings, peer: peer)
            let tlsContext = generation.tlsContexts[index]
            _ = OpenConnectionSlot.track(channel, gauges: connectionGauges, tls: tlsContext != nil)
            return channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                if let tlsContext {
                    let timeout = TimeAmount(settings.tls?.handshakeTimeout ?? .seconds(10))
                    try sync.addHandler(TLSHandler(context: tlsContext, handshakeTimeout: timeout, logger: logger))
                }
                try sync.addHandler(
                    Self.http1Handler(limits: limits) { readDeadlines in
                        HTTP1ConnectionHandler(
                            generations: generations,
                            clientAddress: peer,
                            listenerIndex: index,
                            forwardAuth: check,
                            readDeadlines: readDeadlines,
                            logger: logger
                        )
                    }
                )
            }
        }.withBoundSocket(descriptor).get()
    }

    /// A listener's bootstrap; a failed `accept` pauses accepting on it and is logged (``AcceptBackoff``, whose
    /// ``AcceptBackoff/admit(_:)`` the child initializer calls first).
    func serverBootstrap(_ backoff: AcceptBackoff) -> ServerBootstrap {
        ServerBootstrap(group: self.group)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(backoff.handler()) }
            }
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: false)
    }

    /// The HTTP/1.1 handler `connection` makes, given the read deadlines it keeps (idle: `idleTimeout` or the
    /// configured one; and the slowloris guard on request heads). There is no codec handler and no deadline
    /// handler: the connection handler parses requests itself (``HTTP1RequestParser``, with the configured
    /// limits), serializes responses itself (``HTTP1ResponseSerializer``) and tells its deadlines about every
    /// read, so it reads and writes `ByteBuffer`s and is the only handler after the TLS handler.
    static func http1Handler(
        limits: LimitsConfiguration,
        idleTimeout: Duration? = nil,
        connection: (HTTP1ReadDeadlines) -> any ChannelHandler
    ) -> any ChannelHandler {
        let readDeadlines = HTTP1ReadDeadlines(
            headTimeout: TimeAmount(limits.requestHeaderTimeout),
            idleTimeout: TimeAmount(idleTimeout ?? limits.idleTimeout)
        )
        return connection(readDeadlines)
    }
}

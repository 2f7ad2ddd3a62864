//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import CoreMetrics
import ServiceLifecycle
import TokengateAdmin
import TokengateConfig
import TokengateGateway
import TokengateStores
import TokengateTLS
import TokengateTokens
import TokengateVersion
import UnixSignals

/// Starts everything a configuration asks for — the cutoff store and its sync service, the gateway's
/// listeners, the admin listener — and runs them until SIGTERM or SIGINT, then shuts down gracefully.
///
/// Order matters: the cutoff store is read completely before any listener binds, so the gateway never
/// serves a single request with an empty snapshot (which would accept every revoked token).
struct GatewayLauncher {
    let configuration: GatewayConfiguration
    /// `--log-format`, over the configuration's `log.format`.
    var logFormat: LogFormat?

    /// - Parameter onStarted: called once every listener is bound, with their addresses and the cutoff sync
    ///   service (the dev default's demo site writes its password changes through it).
    func run(onStarted: @escaping @Sendable ([SocketAddress], CutoffSyncService) async throws -> Void) async throws {
        let processStartedAt = CutoffSyncService.systemNow()
        // First: the shared libraries this process loaded may be older than the headers it was built with.
        do {
            try LibraryVersionCheck.verify()
        } catch {
            fail("\(error)", status: .unavailable)
        }
        // SIGHUP's default action ends the process. Until the reload service traps it (once the service group
        // runs, after the store is synced and the listeners are bound), a `systemctl reload` or a config
        // manager's "reload after start" would kill a gateway that already logged "listening". Ignored until
        // then; the configuration just loaded is the one the file holds.
        signal(SIGHUP, SIG_IGN)
        // Read first, before anything else is opened: the sockets systemd or the process handing over passed, and
        // the latter's readiness pipe. The path this binary was started by, while the start directory holds.
        let handoverReadiness = BinaryHandover.readinessDescriptor()
        let executable = BinaryHandover.executablePath(argumentZero: CommandLine.arguments[0])
        let passedSockets: PassedSockets.Assignment?
        do {
            passedSockets = try PassedSockets.fromEnvironment()?.assign(
                listeners: self.configuration.listeners.map(\.address), admin: self.configuration.admin?.address)
        } catch {
            fail("\(error)", status: .configuration)
        }
        Self.bootstrapLogging(self.configuration.log.level, format: self.logFormat ?? self.configuration.log.format)
        let logger = Logger(label: "tokengate")
        logger.info("starting", metadata: ["version": "\(TokengateVersion.string)"])
        for warning in GatewayServer.warnings(for: self.configuration) {
            logger.warning("configuration: \(warning)")
        }
        let openFiles = OpenFileLimit.raise(forConnections: self.configuration.limits.maxConnections)
        if let info = openFiles.info { logger.info("\(info)") }
        if let warning = openFiles.warning { logger.warning("\(warning)") }
        // Read before anything starts: a bad secret file or admin certificate must not let the public
        // listeners log "listening" and then take the process down.
        var adminCredentials: AdminCredentials?
        if let admin = self.configuration.admin {
            do {
                adminCredentials = try AdminCredentials(reading: admin)
            } catch {
                fail("\(error)", status: .configuration)
            }
        }
        let holder = CutoffSnapshotHolder(.empty)
        let opened: CutoffStoreFactory.Opened
        do {
            opened = try await CutoffStoreFactory.open(self.configuration.cutoffs, logger: logger)
        } catch {
            // The statuses `revoke` gives for the same store: 78 a setting refused, 69 a file that is not a usable
            // database, 75 a store that did not answer (a restart may find it back).
            fail("cutoff store: \(error)", status: ExitStatus(forStoreError: error))
        }
        let store = opened.store
        // A PostgreSQL store's connection loop must run before the first read.
        let storeTask = opened.run.map { run in Task { await run() } }
        var syncConfiguration = CutoffSyncService.Configuration()
        if let staleAfter = opened.staleAfter { syncConfiguration.staleAfter = staleAfter }
        if let resyncInterval = opened.resyncInterval { syncConfiguration.fullReloadInterval = resyncInterval }
        // A revoked device's entry outlives its tokens' last `exp` by at least the verifier's clock skew.
        syncConfiguration.deviceExpiryMargin = max(.seconds(3600), self.configuration.tokens.clockSkew)
        let sync = CutoffSyncService(store: store, configuration: syncConfiguration, logger: logger) { holder.store($0) }
        // When the enforced snapshot was last confirmed against the store, for the lag metric until the sync
        // service has synced once itself: the process start, or the cache file's own time when it stands in.
        var confirmedBeforeFirstSync = processStartedAt
        do {
            try await sync.start()
        } catch {
            // Never start with an empty snapshot (it would accept every revoked token): only a cache file of
            // the last good snapshot, recent enough, may stand in until the store answers.
            guard let cache = opened.cacheFile,
                let cached = SnapshotCache.load(path: cache, maxAge: opened.staleAfter ?? .seconds(300), logger: logger)
            else {
                fail(
                    "cannot read the cutoff store (\(store.storeDescription)): \(error); refusing to start",
                    status: ExitStatus(forStoreError: error)
                )
            }
            holder.store(cached.snapshot)
            confirmedBeforeFirstSync = cached.savedAt
            logger.warning(
                "cutoff store unreachable at start; enforcing the cached snapshot until it answers",
                metadata: ["cache_file": "\(cache)", "error": "\(error)"]
            )
        }

        let group = MultiThreadedEventLoopGroup(numberOfThreads: self.configuration.eventLoops ?? System.coreCount)
        let server: GatewayServer
        do {
            // Token pages mint tokens with a device only where the store keeps device records.
            let devices =
                sync.keepsDevices
                ? DeviceRegistry(
                    record: { try await sync.recordDevice($0) }, refresh: { try await sync.rotateRefresh($0) },
                    changes: sync.deviceChanges)
                : nil
            server = try GatewayServer(
                configuration: self.configuration, cutoffs: holder, group: group, logger: logger, devices: devices)
        } catch {
            fail("\(self.configuration.sourcePath): \(error)", status: .configuration)
        }
        let addresses: [SocketAddress]
        do {
            addresses = try await server.start(passedSockets: passedSockets?.listeners ?? [:])
        } catch {
            // Close the store before leaving: a store dropped open is an unclean end for its database.
            try? await store.close()
            // A listener that cannot bind: the operating system's refusal, told apart from the configuration and
            // the store (``ExitStatus/init(forBindError:)``).
            fail("\(error)", status: ExitStatus(forBindError: error))
        }

        let configurationPath = self.configuration.sourcePath
        var admin: AdminServer?
        if let adminConfiguration = self.configuration.admin, let adminCredentials {
            let api = AdminAPI(service: sync, logger: logger)
            do {
                let socket = try passedSockets?.admin
                    ?? ListeningSocket.bind(host: adminConfiguration.address.host, port: adminConfiguration.address.port)
                admin = try await AdminServer.start(
                    host: adminConfiguration.address.host,
                    port: adminConfiguration.address.port,
                    boundSocket: socket,
                    credentials: adminCredentials,
                    group: group,
                    logger: logger,
                    handler: AdminRoutes.handler(
                        server: server, sync: sync, api: api, configurationPath: configurationPath,
                        adminCredentials: adminCredentials, confirmedBeforeFirstSync: confirmedBeforeFirstSync,
                        logger: logger
                    )
                )
            } catch {
                await server.shutdown(drainTimeout: .zero)
                try? await store.close()
                fail(
                    "cannot listen on the admin address \(adminConfiguration.address): \(error)",
                    status: ExitStatus(forBindError: error)
                )
            }
        }
        try await onStarted(addresses, sync)
        // Every listener serves, with the cutoff snapshot loaded: `systemctl start` may return. Started by a hand-over,
        // the old process is told instead; it passes systemd the new main process id (``BinaryHandover``).
        if let handoverReadiness {
            if !BinaryHandover.reportReady(handoverReadiness) {
                logger.warning("the process handing over did not take the readiness report; it keeps serving too")
            }
        } else {
            SystemdNotifier.process?.ready()
        }
        let handedOver = NIOLockedValueBox(false)

        // Every service runs until shutdown: ServiceGroup treats one that returns early as a failure and
        // stops the gateway, so optional ones are only added when configured.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: CutoffSyncRunner(sync: sync)),
            .init(
                service: ReloadOnHangup(
                    server: server, path: configurationPath,
                    adminCredentials: adminCredentials,
                    logger: logger
                )
            ),
            .init(service: GatewayShutdownService(server: server, admin: admin, handedOver: handedOver)),
            .init(
                service: HandoverOnSignal(
                    server: server, admin: admin, executable: executable, arguments: Array(CommandLine.arguments.dropFirst()),
                    handedOver: handedOver, logger: logger
                ),
                successTerminationBehavior: .gracefullyShutdownGroup
            ),
        ]
        if let cacheFile = opened.cacheFile {
            services.append(.init(service: SnapshotCache(path: cacheFile, sync: sync, logger: logger)))
        }
        if let notifier = SystemdNotifier.process,
            let interval = SystemdNotifier.watchdogInterval(
                usec: SystemdNotifier.environment("WATCHDOG_USEC"), pid: SystemdNotifier.environment("WATCHDOG_PID"))
        {
            services.append(.init(service: SystemdWatchdog(notifier: notifier, interval: interval, group: group)))
        }
        let serviceGroup = ServiceGroup(
            configuration: .init(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        try await serviceGroup.run()
        try? await store.close()
        storeTask?.cancel()
        try? await group.shutdownGracefully()
    }

    static func bootstrapLogging(_ level: LogLevelName, format: LogFormat) {
        ProcessLogLevel.set(level)
        switch format {
        case .json: LoggingSystem.bootstrap { label in JSONLogHandler(label: label) }
        case .console: LoggingSystem.bootstrap { label in ConsoleLogHandler(label: label) }
        case .auto:
            // Lines go to standard output: a person reads them when it is a terminal, a program otherwise.
            if isatty(STDOUT_FILENO) == 1 {
                LoggingSystem.bootstrap { label in ConsoleLogHandler(label: label) }
            } else {
                LoggingSystem.bootstrap { label in JSONLogHandler(label: label) }
            }
        }
    }
}

/// Reloads on SIGHUP until shutdown.
struct ReloadOnHangup: Service {
    let server: GatewayServer
    let path: String
    let adminCredentials: AdminCredentials?
    let logger: Logger

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        await cancelWhenGracefulShutdown {
            for await _ in signals {
                _ = AdminRoutes.reload(server: self.server, path: self.path, adminCredentials: self.adminCredentials, logger: self.logger)
            }
        }
    }
}

/// Keeps the cutoff snapshot current until shutdown.
struct CutoffSyncRunner: Service {
    let sync: CutoffSyncService

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await self.sync.run()
        }
    }
}

/// Waits for the shutdown signal, then drains the gateway; a second SIGTERM or SIGINT during the drain ends
/// it at once (an operator pressing Ctrl-C twice, a supervisor that escalates before its SIGKILL).
struct GatewayShutdownService: Service {
    let server: GatewayServer
    let admin: AdminServer?
    /// Set when the shutdown follows a binary hand-over: systemd follows the new process, and must not hear
    /// `STOPPING=1` for the unit.
    let handedOver: NIOLockedValueBox<Bool>

    func run() async throws {
        try? await gracefulShutdown()
        if !self.handedOver.withLockedValue({ $0 }) {
            SystemdNotifier.process?.stopping()
        }
        // Trapped only now, so the signal that began the shutdown is not counted again. ServiceGroup ignores
        // its graceful-shutdown signals once shutdown has begun, and they cannot also be its cancellation
        // signals, so the second one is watched here.
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let server = self.server
        let secondSignal = Task {
            for await _ in signals {
                server.endDrainNow()
                return
            }
        }
        // The running configuration's: a reload may have changed it since start.
        await self.server.shutdown(drainTimeout: self.server.drainTimeout)
        secondSignal.cancel()
        await self.admin?.stop()
    }
}

/// Sends systemd's `WATCHDOG=1` every `interval` (half of `$WATCHDOG_USEC`) while every event loop runs a task
/// it is given: a loop stuck in a busy callback stops the pings, and systemd restarts the gateway
/// (`WatchdogSec=` in the unit) rather than leaving a process that accepts connections and never answers.
struct SystemdWatchdog: Service {
    let notifier: SystemdNotifier
    let interval: Duration
    let group: any EventLoopGroup

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                var allAnswered = true
                for loop in self.group.makeIterator() {
                    do {
                        try await loop.submit {}.get()
                    } catch {
                        allAnswered = false
                    }
                }
                if allAnswered {
                    self.notifier.notify("WATCHDOG=1")
                }
                try? await Task.sleep(for: self.interval)
            }
        }
    }
}

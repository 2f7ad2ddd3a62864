//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import NIOPosix
import CoreMetrics
import ServiceLifecycle
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
        Self.bootstrapLogging(self.configuration.log.level)
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
            server = try GatewayServer(configuration: self.configuration, cutoffs: holder, group: group, logger: logger)
        } catch {
            fail("\(self.configuration.sourcePath): \(error)", status: .configuration)
        }
        let addresses: [SocketAddress]
        do {
            addresses = try await server.start()
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
                admin = try await AdminServer.start(
                    host: adminConfiguration.address.host,
                    port: adminConfiguration.address.port,
                    credentials: adminCredentials,
                    group: group,
                    logger: logger,
                    handler: Self.adminHandler(
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
            .init(service: GatewayShutdownService(server: server, admin: admin)),
        ]
        if let cacheFile = opened.cacheFile {
            services.append(.init(service: SnapshotCache(path: cacheFile, sync: sync, logger: logger)))
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

    /// What the admin listener answers: probes, metrics, reload, and the cutoff admin API.
    ///
    /// - Parameter confirmedBeforeFirstSync: UNIX seconds when the enforced snapshot was last confirmed against
    ///   the store, used by the lag metric until the sync service synced: the cache file's time for a gateway that
    ///   started on its cache, else the process start. A lag of 0 there would look healthy to an alert while
    ///   `/readyz` says the snapshot is stale.
    static func adminHandler(
        server: GatewayServer,
        sync: CutoffSyncService,
        api: AdminAPI,
        configurationPath: String,
        adminCredentials: AdminCredentials?,
        confirmedBeforeFirstSync: Int64,
        logger: Logger
    ) -> AdminServer.Handler {
        { request in
            switch request.path {
            case "/healthz", "/readyz", "/metrics":
                // Read-only: a probe or scraper with another method is told so rather than answered.
                guard request.method == "GET" || request.method == "HEAD" else {
                    return Self.methodNotAllowed(allow: "GET, HEAD")
                }
            default:
                break
            }
            switch request.path {
            case "/healthz":
                return .init(status: 200, body: "{\"status\":\"ok\"}")
            case "/metrics":
                let snapshot = await sync.snapshot
                server.metrics.cutoffGeneration.record(Int64(snapshot.generation))
                let lastSync = await sync.lastSyncAt
                if let lastSync {
                    server.metrics.cutoffLastSync.record(lastSync)
                }
                let confirmedAt = lastSync ?? confirmedBeforeFirstSync
                let now = CutoffSyncService.systemNow()
                server.metrics.cutoffLag.record(max(0, now - confirmedAt))
                server.metrics.cutoffFutureCutoffs.record(Int64(await sync.futureCutoffCount(now: now)))
                return .init(status: 200, contentType: "text/plain; version=0.0.4", body: server.metrics.render())
            case "/admin/reload":
                guard request.method == "POST" else {
                    return Self.methodNotAllowed(allow: "POST")
                }
                return Self.reload(server: server, path: configurationPath, adminCredentials: adminCredentials, logger: logger)
            case "/readyz":
                guard await sync.isStale(now: CutoffSyncService.systemNow()) else {
                    return .init(status: 200, body: "{\"status\":\"ready\"}")
                }
                // Why the store cannot confirm the snapshot, as its error code only: the probe is open (no secret),
                // and the message, with the path or the host, is in the log. Absent before the first sync of a
                // gateway that started on its cache file and has not tried again yet.
                let storeError = await sync.lastError.map { ",\"store_error\":\"\($0.code)\"" } ?? ""
                return .init(status: 503, body: "{\"status\":\"not_ready\",\"reason\":\"cutoff snapshot is stale\"\(storeError)}")
            default:
                let response = await api.handle(method: request.method, path: request.path, body: request.body, client: request.client)
                // The API's own headers (`Allow` on its 405s) were dropped here before.
                return .init(
                    status: response.status,
                    body: response.json,
                    headers: response.headers.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
                )
            }
        }
    }

    /// The admin listener's 405, in the admin API's shape and with the `Allow` header it sends: a scraper
    /// or script using the wrong method is told so, instead of getting an answer it did not ask for.
    static func methodNotAllowed(allow: String) -> AdminServer.Response {
        .init(
            status: 405,
            body: "{\"error\":\"method_not_allowed\",\"error_description\":\"this endpoint accepts \(allow) only\"}",
            headers: [(name: "Allow", value: allow)]
        )
    }

    /// Reloads configuration, keys and certificates from `path`; a bad file is refused with its reason
    /// and the running configuration stays.
    /// Reloads the gateway and, with it, the admin listener's secret and certificates (``AdminCredentials``).
    /// The admin files are read first: a secret file that no longer reads refuses the whole reload (counted like
    /// any refused reload), and they are swapped in only after the gateway's own reload succeeded.
    static func reload(
        server: GatewayServer,
        path: String,
        adminCredentials: AdminCredentials?,
        logger: Logger
    ) -> AdminServer.Response {
        do {
            let adminFiles: AdminCredentials.Files?
            do {
                adminFiles = try adminCredentials?.readAgain()
            } catch {
                server.metrics.configReloadFailures.increment()
                throw error
            }
            try server.reload(configurationPath: path)
            if let adminCredentials, let adminFiles {
                adminCredentials.replace(with: adminFiles)
            }
            return .init(status: 200, body: "{\"status\":\"reloaded\",\"generation\":\(server.generation)}")
        } catch {
            logger.error("reload refused; the previous configuration keeps serving", metadata: ["reason": "\(error)"])
            return .init(
                status: 422,
                body: "{\"error\":\"reload_refused\",\"error_description\":\(JSONString.quote("\(error)"))}"
            )
        }
    }

    static func bootstrapLogging(_ level: LogLevelName) {
        ProcessLogLevel.set(level)
        LoggingSystem.bootstrap { label in JSONLogHandler(label: label) }
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
                _ = GatewayLauncher.reload(server: self.server, path: self.path, adminCredentials: self.adminCredentials, logger: self.logger)
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

    func run() async throws {
        try? await gracefulShutdown()
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

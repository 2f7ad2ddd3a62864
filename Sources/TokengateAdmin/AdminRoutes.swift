//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Prometheus
import Logging
import TokengateGateway
import TokengateHTTP
import TokengateStores
import TokengateTokens

/// What the admin listener answers — the probes, `/metrics`, `/version`, `/upstreams`, `/admin/reload` and the cutoff admin
/// API — and the reload that `/admin/reload` and SIGHUP share.
package enum AdminRoutes {
    /// What the admin listener answers: probes, metrics, reload, and the cutoff admin API.
    ///
    /// - Parameter confirmedBeforeFirstSync: UNIX seconds when the enforced snapshot was last confirmed against
    ///   the store, used by the lag metric until the sync service synced: the cache file's time for a gateway that
    ///   started on its cache, else the process start. A lag of 0 there would look healthy to an alert while
    ///   `/readyz` says the snapshot is stale.
    package static func handler(
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
            case "/healthz", "/readyz", "/metrics", "/version", "/upstreams":
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
            case "/version":
                return .init(status: 200, body: AdminVersion.json)
            case "/upstreams":
                return .init(status: 200, body: server.upstreamsJSON())
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
                let exposition = server.metrics.render()
                return .init(
                    status: 200, contentType: "text/plain; version=0.0.4",
                    body: exposition + (exposition.hasSuffix("\n") || exposition.isEmpty ? "" : "\n")
                        + server.scrapeTimeExposition() + AdminVersion.buildInfoMetric
                )
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
    package static func methodNotAllowed(allow: String) -> AdminServer.Response {
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
    package static func reload(
        server: GatewayServer,
        path: String,
        adminCredentials: AdminCredentials?,
        logger: Logger
    ) -> AdminServer.Response {
        // systemd (`Type=notify`) learns that a reload runs and when it is over, whichever way it went: the
        // configuration serving afterwards, old or new, is ready.
        SystemdNotifier.process?.reloading()
        defer { SystemdNotifier.process?.ready() }
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
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import TokengateConfig
import TokengateStores

/// Opens the cutoff store a configuration names, for `serve` and for `revoke`.
enum CutoffStoreFactory {
    /// An opened store. A PostgreSQL store also needs its connection loop running (``run``) for as long as
    /// it is used; the others have nothing to run.
    struct Opened {
        var store: any CutoffStore
        var run: (@Sendable () async -> Void)?
        /// How long without a successful sync before `/readyz` reports not ready.
        var staleAfter: Duration?
        /// How often the sync service reloads the whole store even when its change marker says nothing changed
        /// (`cutoffs.resync_interval`).
        var resyncInterval: Duration?
        /// Where the last good snapshot is kept, so a restart can serve while the store is unreachable.
        var cacheFile: String?
    }

    static func open(_ configuration: CutoffStoreConfiguration, logger: Logger) async throws -> Opened {
        switch configuration {
        case .file(let path):
            return Opened(store: JSONFileCutoffStore(path: path.path))
        case .sqlite(let path):
            // The directory is never created here: a missing directory is an unmounted volume, and a fresh
            // empty database there would accept every revoked token. The store refuses it with that reason.
            return Opened(store: try await SQLiteCutoffStore.open(path: path.path, logger: logger))
        case .postgres(let settings):
            let tls: PostgresCutoffStore.TLSMode
            switch settings.tlsMode {
            case .disable: tls = .disable
            // libpq's `require` encrypts without checking the certificate; tokengate verifies the server
            // whenever TLS is asked for (fail closed): both map to verify-full.
            case .require, .verifyFull: tls = .require
            }
            let store = try PostgresCutoffStore(
                configuration: .init(
                    host: settings.host,
                    port: settings.port,
                    user: settings.user,
                    database: settings.database,
                    // The store reads the file now (an unreadable one refuses the start) and again at every
                    // connection attempt, so a rotated password is picked up without a restart or reload.
                    passwordFile: settings.passwordFile?.path,
                    tls: tls,
                    table: settings.table,
                    notifyChannel: settings.notifyChannel,
                    rpTable: settings.rpTable.map {
                        .init(
                            table: $0.table,
                            userIDColumn: $0.userColumn,
                            passwordChangedColumn: $0.passwordChangedColumn,
                            apiDisabledColumn: $0.apiDisabledColumn
                        )
                    }
                ),
                logger: logger
            )
            return Opened(
                store: store,
                run: { await store.run() },
                staleAfter: settings.staleAfter,
                resyncInterval: settings.resyncInterval,
                cacheFile: settings.cacheFile?.path
            )
        }
    }
}

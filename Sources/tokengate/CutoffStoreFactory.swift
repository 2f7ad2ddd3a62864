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

    /// Who opens the store.
    enum Use {
        /// A gateway (`serve`, `dev`): a SQLite file that does not exist yet is created (the first start), and a
        /// PostgreSQL store keeps a LISTEN connection for changes made elsewhere.
        case gateway
        /// One write from the command line (`revoke`). A missing SQLite file is refused: a new, empty file is not
        /// the store any gateway reads, so the revocation would be lost, and a gateway whose file was moved away
        /// would take it for its own store, back again. A PostgreSQL store does not LISTEN: nothing here would act on a
        /// notification.
        case oneShotWrite
    }

    static func open(
        _ configuration: CutoffStoreConfiguration,
        logger: Logger,
        for use: Use = .gateway
    ) async throws -> Opened {
        switch configuration {
        case .file(let path):
            return Opened(store: JSONFileCutoffStore(path: path.path))
        case .sqlite(let path):
            let exists = try Self.checkSQLiteFile(path)
            if !exists && use == .oneShotWrite {
                throw CutoffStoreFactoryError(
                    description: "cutoffs.sqlite: \(path.path) does not exist; `tokengate serve` (or `tokengate dev`) "
                        + "creates it at its first start, and revoke never does (a new, empty store is not the one the "
                        + "gateway reads): check that the volume is mounted and that the path is the gateway's"
                )
            }
            // The directory is never created here: a missing directory is an unmounted volume, and a fresh
            // empty database there would accept every revoked token. The store refuses it with that reason.
            return Opened(
                store: try await SQLiteCutoffStore.open(
                    path: path.path,
                    createIfMissing: use == .gateway,
                    logger: logger
                )
            )
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
                            apiDisabledColumn: $0.apiDisabledColumn,
                            changeColumn: $0.changeColumn
                        )
                    }
                ),
                logger: logger
            )
            return Opened(
                store: store,
                run: { [listening = use == .gateway] in await store.run(listening: listening) },
                staleAfter: settings.staleAfter,
                resyncInterval: settings.resyncInterval,
                cacheFile: settings.cacheFile?.path
            )
        }
    }

    /// What `check-config` can say about the store without connecting to a database or changing anything, in the
    /// words `serve` uses: a SQLite path that names a directory, an empty file, a file that is not a database, or a
    /// database that is not a tokengate store (another application's, one without tables, a newer schema) is
    /// refused by both.
    static func check(_ configuration: CutoffStoreConfiguration, logger: Logger) async throws {
        switch configuration {
        case .sqlite(let path):
            if try Self.checkSQLiteFile(path) {
                try await SQLiteCutoffStore.checkExistingFile(path: path.path, logger: logger)
            }
        case .file(let path):
            // `serve` refuses to start on a file it cannot parse: say so now, in the same words.
            try JSONFileCutoffStore.check(path: path.path)
        case .postgres:
            break  // Not connected to here; see configuration.md.
        }
    }

    /// `check-config --connect`: connects to a PostgreSQL store and checks it as ``PostgresCutoffStore/probe()``
    /// does, changing nothing; `nil` for the other stores, which ``check(_:)`` has read already.
    static func probe(_ configuration: CutoffStoreConfiguration, logger: Logger) async throws
        -> PostgresCutoffStore.ProbeReport?
    {
        guard case .postgres = configuration else { return nil }
        // No LISTEN connection: nothing here would act on a notification.
        let opened = try await Self.open(configuration, logger: logger, for: .oneShotWrite)
        let storeTask = opened.run.map { run in Task { await run() } }
        defer { storeTask?.cancel() }
        guard let store = opened.store as? PostgresCutoffStore else {
            try? await opened.store.close()  // Not reached: `.postgres` opens a PostgresCutoffStore.
            return nil
        }
        do {
            let report = try await store.probe()
            try await store.close()
            return report
        } catch {
            try? await store.close()
            throw error
        }
    }

    /// Whether the SQLite file exists; throws when the path names something SQLite cannot open as a database.
    private static func checkSQLiteFile(_ path: ConfigPath) throws(CutoffStoreFactoryError) -> Bool {
        do {
            return try SQLiteDatabaseFile.check(path: path.path)
        } catch {
            throw CutoffStoreFactoryError(description: "cutoffs.sqlite: \(error)")
        }
    }
}

/// The SQLite store's file is missing where it must exist, or is not a database (`revoke`'s exit 69).
struct CutoffStoreFactoryError: Error, CustomStringConvertible {
    var description: String
}

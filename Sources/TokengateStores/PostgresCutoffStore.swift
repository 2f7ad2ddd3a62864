//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import Logging
import NIOConcurrencyHelpers
import NIOPosix
import TokengateTokens

/// The cutoff store for several gateway instances: one PostgreSQL database that every instance reads, with
/// changes pushed to all of them by `LISTEN`/`NOTIFY`.
///
/// ### Two modes
/// - **Copy mode** (default): tokengate's own tables, created on first start (see the schema below). Writes come
///   from the admin API and `tokengate revoke` of any instance.
/// - **RP-table mode** (``Configuration/rpTable``): the RP's own users table is read directly: the
///   time of each user's last password change, which the website keeps anyway. The users' cutoffs are read-only: their writes are
///   refused with ``CutoffStoreError/Code/readOnlyStore`` naming the table and column to update instead. The
///   global cutoff (the emergency switch, DESIGN §1) is tokengate's own, in `<table>_global` exactly as in copy
///   mode: the one table tokengate creates in the RP's database, written by the admin API and
///   `tokengate revoke --all`. See ``RPTable`` for the columns and `PostgresCutoffStore+RPTable.swift` for the
///   optional notify trigger.
///
/// ### Lifecycle
/// ```swift
/// let store = try PostgresCutoffStore(configuration: configuration, logger: logger)
/// let service = CutoffSyncService(store: store, publish: holder.store)
/// try await withThrowingDiscardingTaskGroup { group in
///     group.addTask { await store.run() }      // the libpq threads and the LISTEN connection
///     try await service.start()                // first load; throws → refuse to start
///     group.addTask { await service.run() }    // polls, and resyncs on every notification
///     ...                                      // the gateway
/// }
/// ```
/// ``run()`` must be running for any call to reach the database (it owns the threads libpq runs on; calls made
/// before it starts wait for it); it returns when its task is cancelled or after ``close()``. Every call is
/// bounded by ``Configuration/operationTimeout`` and then fails with ``CutoffStoreError/Code/storeUnavailable``,
/// so a lost database turns into a stale snapshot rather than a hung sync service. The schema is created (or
/// checked) by the first call that reaches the database, not by `init`, so a store can be made while the database
/// is down.
///
/// ### Threading (libpq)
/// The database is reached through libpq, PostgreSQL's own C client (TLS by the system OpenSSL 3). libpq blocks,
/// so none of it runs on a Swift-concurrency cooperative thread or a NIO event loop:
/// - A `NIOThreadPool` of ``Configuration/maxConnections`` + 1 threads, started and stopped by ``run()``. One
///   thread is the LISTEN connection's for as long as ``run()`` runs; the others run the calls.
/// - A call (`load`, `apply`, ...) stays on the actor only to read its own state; it then borrows a connection
///   from a ``PostgresConnectionPool`` (at most `maxConnections`, made on demand, kept while healthy), and runs
///   its statements synchronously on a pool thread with that one connection, so a `PGconn` is only ever used by
///   one thread at a time. The actor is not blocked meanwhile: other calls proceed on other connections.
/// - Every wait inside libpq is a `poll()` bounded by the call's deadline and interruptible (``close()``,
///   cancellation; see ``PostgresInterrupt``), so no thread can hang on a dead server (see ``PostgresConnection``
///   for the order of the libpq calls). On top, pooled sessions run with `statement_timeout` =
///   `operationTimeout`, so the server gives up too.
/// - Values are always parameters (`PQsendQueryParams`, text format); table, column and channel names are
///   validated and quoted (``PostgresIdentifier``). Connection settings go to libpq as keyword/value arrays, so no
///   value needs quoting. libpq's and the server's error texts are logged, never returned in errors (the admin
///   API would pass them to its client); errors say what failed and the SQLSTATE.
///
/// ### Writes (copy mode, and the global cutoff in RP-table mode)
/// One transaction: `SET LOCAL synchronous_commit = on` (so a role or database default of `off` cannot make an
/// acknowledged write vanish in a crash), the forward-only upsert decided inside one statement as in the SQLite
/// store, then `SELECT pg_notify(channel, user-id or '*')`, then `COMMIT`. PostgreSQL delivers the notification
/// only when the commit is durable, so no instance can reload before the write is there, and ``apply(_:)`` returns
/// after the commit. `'*'` (the global cutoff or a forced write) tells instances to take the whole table.
///
/// ### Schema (version 2; RP-table mode creates only `<table>_global` and its trigger)
/// - `<table>(user_id text PRIMARY KEY, revoked_before bigint, api_revoked_before bigint, updated_at bigint,
///   change_seq bigint)`, indexed on `change_seq`.
/// - `<table>_global(id = 1, schema_version, revoked_before, force_epoch, change_seq, updated_at, store_id)`: the
///   global cutoff, the schema version row, the force epoch (see ``CutoffTable/forceEpoch``), a counter that every
///   change bumps (read by ``changeMarker()``, and the source of the users' `change_seq`), and a random id naming
///   the change feed.
/// - A version 1 schema is brought to version 2 by the first instance that reaches it, in one transaction under
///   the schema's advisory lock (``migrateToVersion2(_:tables:in:)``); a tokengate of version 1 then refuses it.
/// - Statement-level triggers keep the two counters right whoever writes (the store, the CLI, an operator's own
///   SQL): any change bumps `change_seq`; a cutoff that moves back, a deleted row or a `TRUNCATE` also bumps
///   `force_epoch`. An operator's SQL does not send a notification; instances notice it at their next poll, or
///   at once if the operator runs `NOTIFY <channel>, '*'`.
///
/// ### Scale
/// In copy mode every user row carries the number of its last change (schema version 2, see
/// ``CopyLayout/version2Statements(tables:)``), and a notification makes every instance read only the rows numbered
/// after the last one it saw (``changes(since:limit:)``), whatever the table's size. Full loads (at start, every
/// `resync_interval`, after a forced write) read through a cursor in batches. RP-table mode reads the RP's table
/// whole at every change.
public actor PostgresCutoffStore: CutoffStore {
    /// The schema version this code writes and understands (copy mode).
    public static let schemaVersion: Int64 = 2

    nonisolated let configuration: Configuration
    nonisolated let source: Source
    /// libpq settings of the pooled connections and of the LISTEN connection.
    nonisolated let poolParameters: ConnectParameters
    nonisolated let listenParameters: ConnectParameters
    /// Read at every connection attempt (pooled and LISTEN), so a rotated password needs no restart.
    nonisolated let passwordFile: PostgresPasswordFile?
    nonisolated let pool: PostgresConnectionPool
    nonisolated let threadPool: NIOThreadPool
    nonisolated let logger: Logger
    /// The last libpq/server text logged, so an outage logs its cause once rather than at every poll.
    nonisolated let lastLoggedDetail = NIOLockedValueBox<String?>(nil)
    nonisolated let signalSink: AsyncStream<CutoffChangeSignal>.Continuation
    nonisolated let closedSignal: AsyncStream<Void>
    nonisolated let closedSink: AsyncStream<Void>.Continuation
    nonisolated let runState = NIOLockedValueBox(RunState())
    /// Whether `<table>_devices` exists (``keepsDevices``); set by ``ready()``.
    nonisolated let devicesReady = NIOLockedValueBox(false)

    /// The SQL for the configured mode, once tokengate's own tables exist (copy mode; the global table in RP-table
    /// mode) and the RP table's columns were checked (RP-table mode).
    private var statements: Statements?
    private(set) var isClosed = false

    public nonisolated let storeDescription: String
    public nonisolated let changeSignals: AsyncStream<CutoffChangeSignal>?

    struct RunState {
        var started = false
        var listening = false
    }

    /// Checks the configuration (identifiers, connection values, TLS files) without touching the network.
    ///
    /// The password file is read here once, so that a missing or unreadable one stops the start rather than the
    /// first connection; it is read again at every connection attempt (see ``Configuration/passwordFile``).
    ///
    /// - Throws: ``CutoffStoreError/Code/invalidStoreConfiguration`` for a table, column or channel name that is
    ///   not a plain SQL identifier, a host, user, database or password libpq cannot take, a password file that
    ///   cannot be read (or one given next to a password), or a TLS setting that cannot be used.
    public init(configuration: Configuration, logger: Logger = Logger(label: "tokengate.cutoffs.postgres")) throws {
        self.configuration = configuration
        self.logger = logger
        self.source = try Source(configuration)
        if let path = configuration.passwordFile {
            guard configuration.password == nil else {
                throw CutoffStoreError(
                    code: .invalidStoreConfiguration, message: "postgres: give a password or a password file, not both")
            }
            let file = PostgresPasswordFile(path: path, logger: logger)
            do {
                _ = try file.password()
            } catch {
                throw CutoffStoreError(code: .invalidStoreConfiguration, message: "postgres: \(error)")
            }
            self.passwordFile = file
        } else {
            self.passwordFile = nil
        }
        _ = try PostgresIdentifier(configuration.notifyChannel, what: "the notify channel", allowSchema: false)
        self.storeDescription = configuration.description
        self.poolParameters = try Self.connectParameters(configuration, listening: false)
        self.listenParameters = try Self.connectParameters(configuration, listening: true)
        let connections = max(1, configuration.maxConnections)
        self.pool = PostgresConnectionPool(maxConnections: connections)
        // One thread per pooled connection, plus the LISTEN connection's.
        self.threadPool = NIOThreadPool(numberOfThreads: connections + 1)

        // Newest-only: signals are hints to resync, so a burst of them needs one resync, not one each.
        let (signals, signalSink) = AsyncStream.makeStream(
            of: CutoffChangeSignal.self, bufferingPolicy: .bufferingNewest(1))
        self.changeSignals = signals
        self.signalSink = signalSink
        (self.closedSignal, self.closedSink) = AsyncStream.makeStream(of: Void.self)
    }

    /// Whether the LISTEN connection is up; while it is not, changes made elsewhere arrive only by polling.
    /// For readiness reports and tests.
    public nonisolated var isListening: Bool {
        self.runState.withLockedValue { $0.listening }
    }

    /// Runs the libpq threads, the connection pool and the LISTEN connection until the calling task is cancelled
    /// or ``close()`` is called. Call it once, in a task that lives as long as the store; a second call returns at
    /// once.
    ///
    /// Order on the way out: the LISTEN thread is woken and left to finish, the pool refuses new calls and drops
    /// its idle connections, then the thread pool is shut down, which waits for calls still on a thread (each
    /// ends by its deadline, or at once when interrupted by ``close()`` or its caller's cancellation).
    ///
    /// - Parameter listening: `false` for a one-shot writer (`tokengate revoke`), which has no snapshot to resync
    ///   and no use for a LISTEN connection, nor for its "connection lost" warnings.
    public nonisolated func run(listening: Bool = true) async {
        let first = self.runState.withLockedValue { state in
            defer { state.started = true }
            return !state.started
        }
        guard first else {
            self.logger.error("PostgresCutoffStore.run() called twice; the second call does nothing")
            return
        }
        self.threadPool.start()
        self.pool.start()
        let stopListening: PostgresInterrupt?
        do {
            stopListening = listening ? try PostgresInterrupt() : nil
        } catch {
            self.logger.error(
                "cutoff store cannot start its LISTEN connection; changes arrive by polling only",
                metadata: ["error": "\(error)", "store": "\(self.storeDescription)"])
            stopListening = nil
        }
        await withTaskGroup(of: Void.self) { group in
            if let stopListening {
                group.addTask {
                    await withTaskCancellationHandler {
                        // Runs until stopped: this is the thread the LISTEN connection keeps.
                        try? await self.threadPool.runIfActive { self.listenLoop(stop: stopListening) }
                    } onCancel: {
                        stopListening.fire()
                    }
                }
            }
            group.addTask {
                for await _ in self.closedSignal {}
            }
            // Whichever ends first (close() finished the closed signal, or we were cancelled) ends them all.
            await group.next()
            stopListening?.fire()
            group.cancelAll()
        }
        self.pool.close()
        do {
            try await self.threadPool.shutdownGracefully()
        } catch {
            self.logger.error("cutoff store threads did not stop cleanly", metadata: ["error": "\(error)"])
        }
    }

    // MARK: CutoffStore

    public func load() async throws -> CutoffTable {
        try await self.load(onto: nil)
    }

    /// Rows fetched per round trip of the full load's cursor: libpq holds a whole result in memory, and a
    /// `SELECT` of ten million rows held all of them (and their copies) next to the table being built.
    static let loadBatchRows = 50_000

    /// `$1` = a quoted table name: its row estimate, as a `bigint`.
    static let sizeEstimate = "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass($1)"

    /// The full load: a cursor in one `REPEATABLE READ READ ONLY` transaction (one snapshot of both tables), read
    /// ``loadBatchRows`` at a time and merged into `base` row by row (``CutoffTable/mergeForward(_:_:)``), so memory
    /// holds one batch of rows besides the table. Bounded by ``Configuration/loadTimeout`` (each `FETCH` by the
    /// `statement_timeout` of ``Configuration/operationTimeout``).
    public func load(onto base: CutoffTable?) async throws -> CutoffTable {
        let statements = try await self.ready()
        let description = self.storeDescription
        let operationTimeout = self.configuration.operationTimeout
        return try await self.withConnection(timeout: self.configuration.loadTimeout) { whole in
            var accumulator = PostgresLoadAccumulator(base: base, hasFeed: statements.hasFeed)
            // Every statement on its own within the operation timeout; the load as a whole within the load timeout.
            let session = whole.bounded(by: operationTimeout)
            try session.transaction {
                try session.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                if base == nil {
                    // The planner's row estimate (kept by ANALYZE and autovacuum; -1 before the first): the map of a
                    // first load is built at about its size instead of growing (rehashing) to it. A hint only.
                    let estimate = try session.query(Self.sizeEstimate, [.text(statements.usersTable)])
                    if estimate.count == 1, let rows = try estimate.int64(0, 0), rows > 0 {
                        accumulator.builder = CutoffUserMapBuilder(expectedCount: Int(clamping: rows))
                    }
                }
                try session.execute("DECLARE tokengate_load NO SCROLL CURSOR FOR \(statements.load)")
                // The next FETCH is sent before the last one's rows are merged: the server reads and sends while
                // this thread builds the map. A FETCH past the end returns no row.
                let fetch = "FETCH FORWARD \(Self.loadBatchRows) FROM tokengate_load"
                try session.send(fetch)
                while true {
                    let rows = try session.receive()
                    let more = rows.count == Self.loadBatchRows
                    if more {
                        try session.send(fetch)
                    }
                    try accumulator.add(rows)
                    if !more {
                        break
                    }
                }
                if let devices = statements.devices {
                    for entry in try Self.revokedDevices(session.query(Self.revokedDevicesQuery(devices))) {
                        accumulator.table.revokedDevices[entry.device] = entry.revoked
                    }
                }
            }
            guard accumulator.sawGlobalRow else {
                throw CutoffStoreError(code: .invalidStoreFile, message: "\(description): the global row is missing")
            }
            accumulator.finishBuilding()
            return accumulator.table
        }
    }

    /// See ``CutoffStore/changes(since:limit:)``; copy mode only (the numbering is ``CopyLayout/version2Statements(tables:)``).
    public func changes(since position: CutoffFeedPosition, limit: Int) async throws -> CutoffChanges? {
        let statements = try await self.ready()
        guard let sql = statements.changes else {
            return nil
        }
        let description = self.storeDescription
        let limit = max(1, limit)
        return try await self.withConnection { session in
            let rows = try session.query(sql, [.int8(position.sequence), .int8(Int64(limit) + 1)])
            var accumulator = PostgresLoadAccumulator(base: nil, hasFeed: true, collectingChanges: true)
            try accumulator.add(rows)
            guard accumulator.sawGlobalRow, let now = accumulator.table.position else {
                throw CutoffStoreError(code: .invalidStoreFile, message: "\(description): the global row is missing")
            }
            // After the global row was read: a device revoked meanwhile comes now and again next time (harmless),
            // never not at all.
            var devices: [(device: DeviceID, revoked: RevokedDevice, sequence: Int64)] = []
            if let layout = statements.devices {
                devices = try Self.revokedDevices(
                    session.query(
                        Self.revokedDevicesChangesQuery(layout), [.int8(position.sequence), .int8(Int64(limit) + 1)]))
            }
            var users = accumulator.changes
            var hasMore = false
            var sequence = now.sequence
            // Users and devices take their numbers from one counter: with more waiting in either, the next read
            // starts after the lower of the two last numbers returned, and only rows up to it are taken now.
            if users.count > limit || devices.count > limit {
                hasMore = true
                sequence = min(
                    users.count > limit ? users[limit - 1].sequence : Int64.max,
                    devices.count > limit ? devices[limit - 1].sequence : Int64.max)
                users = users.filter { $0.sequence <= sequence }
                devices = devices.filter { $0.sequence <= sequence }
            }
            return CutoffChanges(
                globalRevokedBefore: accumulator.table.globalRevokedBefore,
                forceEpoch: accumulator.table.forceEpoch,
                users: users.map { CutoffChanges.ChangedUser(user: $0.user, cutoffs: $0.cutoffs) },
                position: CutoffFeedPosition(feed: now.feed, sequence: sequence),
                hasMore: hasMore,
                revokedDevices: devices.map { ($0.device, $0.revoked) }
            )
        }
    }

    public func changeMarker() async throws -> String? {
        let statements = try await self.ready()
        return try await self.withConnection { session in
            let rows = try session.query(statements.marker)
            try rows.expectColumns(1)
            return rows.count > 0 ? rows.text(rows.count - 1, 0) : nil
        }
    }

    public func lookup(user: String) async throws -> CutoffLookup {
        let statements = try await self.ready()
        let sql: String
        let parameters: [PostgresValue]
        switch statements.lookupUserID {
        case .text:
            (sql, parameters) = (statements.lookup, [.text(user)])
        case .integer:
            if let id = Int64(user) {
                (sql, parameters) = (statements.lookup, [.int8(id)])
            } else {
                // The RP's ids are integers; this id cannot be one of them, but the global cutoff still applies.
                (sql, parameters) = (statements.lookupGlobalOnly, [])
            }
        }
        let description = self.storeDescription
        return try await self.withConnection { session in
            let rows = try session.query(sql, parameters)
            try rows.expectColumns(3)
            guard rows.count > 0 else {
                throw CutoffStoreError(code: .invalidStoreFile, message: "\(description): the global row is missing")
            }
            let last = rows.count - 1
            return CutoffLookup(
                user: UserCutoffs(revokedBefore: try rows.int64(last, 1), apiRevokedBefore: try rows.int64(last, 2)),
                globalRevokedBefore: try rows.int64(last, 0)
            )
        }
    }

    public func apply(_ write: CutoffWrite) async throws -> CutoffWriteResult {
        try write.validate()
        let layout: CopyLayout
        switch self.source {
        case .rpTable(let rp):
            guard case .revokeAll = write else {
                throw CutoffStoreError(code: .readOnlyStore, message: rp.readOnlyMessage)
            }
            // The users' cutoffs are the RP's; the global cutoff is tokengate's own, written as in copy mode.
            layout = rp.own
        case .copy(let copy):
            layout = copy
        }
        _ = try await self.ready()
        let channel = self.configuration.notifyChannel
        let statementTimeout = self.configuration.operationTimeout.millisecondsClamped
        let now = CutoffSyncService.systemNow()
        let description = self.storeDescription
        return try await self.withConnection { session in
            try Self.refusedWriteIsConfiguration(layout, description) {
                try session.transaction {
                    try session.execute("SET LOCAL synchronous_commit = on")
                    // An integer we computed, not input: safe in the SQL text (SET takes no parameters).
                    try session.execute("SET LOCAL statement_timeout = \(statementTimeout)")
                    let result = try Self.write(write, layout: layout, now: now, in: session)
                    if result.changed {
                        // Sent at COMMIT, and only if it commits: every instance reloads after the write is durable.
                        try session.execute(
                            "SELECT pg_notify($1, $2)", [.text(channel), .text(result.forced ? "*" : (write.user ?? "*"))])
                    }
                    return result
                }
            }
        }
    }

    /// A role that may read tokengate's tables but not write them (SQLSTATE 42501, ``PostgresPermissionDenied``) is a configuration to fix, not a
    /// database that is down: `revoke` exits 78 naming the `GRANT` instead of 75 ("try again later"), which
    /// matters most for `revoke-all`, the emergency switch. A deployment may give the gateways a read-only role
    /// on purpose, so this is not checked at start.
    private static func refusedWriteIsConfiguration<T>(
        _ layout: CopyLayout,
        _ description: String,
        _ body: () throws -> T
    ) throws -> T {
        try PostgresPermissionDenied.mapping(body) {
            PostgresPermissionDenied.error(
                description,
                refused: "the configured role may not write tokengate's cutoff tables",
                remedy: "GRANT SELECT, INSERT, UPDATE ON \(layout.users), \(layout.global) to it (in rp_table mode "
                    + "UPDATE ON \(layout.global) is enough)"
            )
        }
    }

    /// Stops ``run()`` (and with it the threads, the pool and the LISTEN connection) and ends ``changeSignals``.
    /// Later calls fail with ``CutoffStoreError/Code/storeUnavailable``.
    public func close() async throws {
        self.isClosed = true
        self.signalSink.finish()
        self.closedSink.finish()
    }
}

// MARK: The SQL of the configured mode.

extension PostgresCutoffStore {
    /// The validated names of the configured mode.
    enum Source: Sendable {
        case copy(CopyLayout)
        case rpTable(RPLayout)

        init(_ configuration: Configuration) throws {
            if let rp = configuration.rpTable {
                self = .rpTable(try RPLayout(rp, ownTable: configuration.table))
            } else {
                self = .copy(try CopyLayout(table: configuration.table))
            }
        }
    }

    /// How ``lookup(user:)`` binds the user id.
    enum UserIDBinding: Sendable {
        /// As text, compared with a text column (or the column cast to text).
        case text
        /// As a bigint, for an RP table whose user id is an integer column (so its index is used).
        case integer
    }

    /// The statements of one mode, built from validated and quoted names only.
    struct Statements: Sendable {
        /// Rows of `(kind bigint, text, first bigint, second bigint, sequence bigint)`: kind 0 is the global row
        /// (store_id, global cutoff, force epoch, change_seq), kind 1 a user (user_id, revoked_before,
        /// api_revoked_before, change_seq or NULL).
        var load: String
        /// `$1` = the position's sequence, `$2` = the most rows: the global row and the users numbered after `$1`,
        /// as ``load``'s rows; `nil` without a change feed.
        var changes: String?
        /// One text column that changes whenever the content may have.
        var marker: String
        /// `$1` = user id; one row of `(global, revoked_before, api_revoked_before)`, none without the global row.
        var lookup: String
        var lookupUserID: UserIDBinding
        /// No parameter; the row of ``lookup`` for a user id that cannot be in the table (not an integer, where the
        /// RP's ids are): the global cutoff only.
        var lookupGlobalOnly: String
        /// Whether the global row's counter and store id name a change feed of the users' rows (copy mode).
        var hasFeed: Bool
        /// The users' table, quoted: its row estimate (``sizeEstimate``) sizes the map a first load builds.
        var usersTable: String
        /// The layout whose `<table>_devices` exists, read with every load and feed read; nil without it.
        var devices: CopyLayout? = nil
        /// Whether the role may also record and revoke devices there (``keepsDevices``).
        var devicesWritable = false
    }

    /// Creates or checks tokengate's own tables (both in copy mode, the global one in RP-table mode) and resolves
    /// the RP table's columns, once; retried by the next call after a failure.
    private func ready() async throws -> Statements {
        if self.isClosed {
            throw CutoffStoreError(code: .storeUnavailable, message: "\(self.storeDescription): the store is closed")
        }
        if let statements = self.statements {
            return statements
        }
        let source = self.source
        let description = self.storeDescription
        let logger = self.logger
        let (statements, upgrade): (Statements, (CopyLayout, OwnTables)?) = try await self.withConnection { session in
            var needsUpgrade = false
            var result: (Statements, (CopyLayout, OwnTables)?)
            switch source {
            case .copy(let layout):
                try Self.createOrCheckSchema(
                    layout, tables: .globalAndUsers, in: session, logger: logger, description: description,
                    needsUpgrade: &needsUpgrade)
                result = (layout.statements, needsUpgrade ? (layout, .globalAndUsers) : nil)
            case .rpTable(let layout):
                // The RP's table first: a wrong name there is the likelier mistake, and nothing is created then.
                let statements = try layout.resolve(in: session, description: description)
                try Self.createOrCheckSchema(
                    layout.own, tables: .globalOnly, in: session, logger: logger, description: description,
                    needsUpgrade: &needsUpgrade)
                result = (statements, needsUpgrade ? (layout.own, .globalOnly) : nil)
            }
            let own: CopyLayout
            switch source {
            case .copy(let layout): own = layout
            case .rpTable(let layout): own = layout.own
            }
            let access = try Self.ensureDevicesTable(own, in: session, logger: logger, description: description)
            if access.readable {
                result.0.devices = own
            }
            result.0.devicesWritable = access.writable
            return result
        }
        if let (layout, tables) = upgrade {
            // An index to build over every row: the load timeout, not one operation's.
            try await self.withConnection(timeout: self.configuration.loadTimeout) { session in
                try Self.upgradeSchema(layout, tables: tables, in: session, logger: logger, description: description)
            }
        }
        self.statements = statements
        self.devicesReady.withLockedValue { $0 = statements.devicesWritable }
        return statements
    }
}

extension Duration {
    /// Whole milliseconds, at least 1, for `statement_timeout`.
    var millisecondsClamped: Int64 {
        let (seconds, attoseconds) = self.components
        return max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}

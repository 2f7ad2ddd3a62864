//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import Logging
import NIOConcurrencyHelpers
internal import PostgresNIO
import TokengateTokens

/// The cutoff store for several gateway instances: one PostgreSQL database that every instance reads, with
/// changes pushed to all of them by `LISTEN`/`NOTIFY`.
///
/// ### Two modes
/// - **Copy mode** (default): tokengate's own tables, created on first start (see the schema below). Writes come
///   from the admin API and `tokengate revoke` of any instance.
/// - **RP-table mode** (``Configuration/rpTable``): the RP's own users table is read directly, the seed's
///   "timestamp in its database for every user account". Read-only: writes are refused with
///   ``CutoffStoreError/Code/readOnlyStore`` naming the table and column to update instead. See
///   ``RPTable`` for the columns and `PostgresCutoffStore+RPTable.swift` for the optional notify trigger.
///
/// ### Lifecycle
/// ```swift
/// let store = try PostgresCutoffStore(configuration: configuration, logger: logger)
/// let service = CutoffSyncService(store: store, publish: holder.store)
/// try await withThrowingDiscardingTaskGroup { group in
///     group.addTask { await store.run() }      // the connection pool and the LISTEN connection
///     try await service.start()                // first load; throws → refuse to start
///     group.addTask { await service.run() }    // polls, and resyncs on every notification
///     ...                                      // the gateway
/// }
/// ```
/// ``run()`` must be running for any call to reach the database (postgres-nio's pool does its work in it); it
/// returns when its task is cancelled or after ``close()``. Every call is bounded by
/// ``Configuration/operationTimeout`` and then fails with ``CutoffStoreError/Code/storeUnavailable``, so a lost
/// database turns into a stale snapshot rather than a hung sync service. The schema is created (or checked) by
/// the first call that reaches the database, not by `init`, so a store can be made while the database is down.
///
/// ### Writes (copy mode)
/// One transaction: `SET LOCAL synchronous_commit = on` (so a role or database default of `off` cannot make an
/// acknowledged write vanish in a crash), the forward-only upsert decided inside one statement as in the SQLite
/// store, then `SELECT pg_notify(channel, user-id or '*')`, then `COMMIT`. PostgreSQL delivers the notification
/// only when the commit is durable, so no instance can reload before the write is there, and ``apply(_:)`` returns
/// after the commit. `'*'` (the global cutoff or a forced write) tells instances to take the whole table.
///
/// ### Schema (copy mode, version 1)
/// - `<table>(user_id text PRIMARY KEY, revoked_before bigint, api_revoked_before bigint, updated_at bigint)`.
/// - `<table>_global(id = 1, schema_version, revoked_before, force_epoch, change_seq, updated_at)`: the global
///   cutoff, the schema version row, the force epoch (see ``CutoffTable/forceEpoch``), and a counter that every
///   change bumps, read by ``changeMarker()``.
/// - Statement-level triggers keep the two counters right whoever writes (the store, the CLI, an operator's own
///   SQL): any change bumps `change_seq`; a cutoff that moves back, a deleted row or a `TRUNCATE` also bumps
///   `force_epoch`. An operator's SQL does not send a notification; instances notice it at their next poll, or
///   at once if the operator runs `NOTIFY <channel>, '*'`.
///
/// ### Scale
/// Every change makes every instance reload the whole table (one streamed `SELECT`); fine for the admin-rate
/// writes of up to some hundred thousand users, and the place to add delta reloads when tables grow larger.
public actor PostgresCutoffStore: CutoffStore {
    /// The schema version this code writes and understands (copy mode).
    public static let schemaVersion: Int64 = 1

    private nonisolated let configuration: Configuration
    nonisolated let source: Source
    private nonisolated let client: PostgresClient
    private nonisolated let listenConfiguration: PostgresConnection.Configuration
    private nonisolated let logger: Logger
    private nonisolated let signalSink: AsyncStream<CutoffChangeSignal>.Continuation
    private nonisolated let closedSignal: AsyncStream<Void>
    private nonisolated let closedSink: AsyncStream<Void>.Continuation
    private nonisolated let runState = NIOLockedValueBox(RunState())

    /// The SQL for the configured mode, once the schema exists (copy mode) or the RP table's columns were
    /// checked (RP-table mode).
    private var statements: Statements?
    private var isClosed = false

    public nonisolated let storeDescription: String
    public nonisolated let changeSignals: AsyncStream<CutoffChangeSignal>?

    private struct RunState {
        var started = false
        var listening = false
    }

    /// Checks the configuration (identifiers, TLS files) without touching the network.
    ///
    /// - Throws: ``CutoffStoreError/Code/invalidStoreConfiguration`` for a table, column or channel name that is
    ///   not a plain SQL identifier, or a TLS setting that cannot be used.
    public init(configuration: Configuration, logger: Logger = Logger(label: "tokengate.cutoffs.postgres")) throws {
        self.configuration = configuration
        self.logger = logger
        self.source = try Source(configuration)
        _ = try PostgresIdentifier(configuration.notifyChannel, what: "the notify channel", allowSchema: false)
        self.storeDescription = configuration.description

        let (clientTLS, connectionTLS) = try Self.tls(configuration)
        var clientConfiguration = PostgresClient.Configuration(
            host: configuration.host,
            port: configuration.port,
            username: configuration.user,
            password: configuration.password,
            database: configuration.database,
            tls: clientTLS
        )
        clientConfiguration.options.connectTimeout = configuration.connectTimeout
        clientConfiguration.options.maximumConnections = max(1, configuration.maxConnections)
        clientConfiguration.options.minimumConnections = 0
        self.client = PostgresClient(configuration: clientConfiguration, backgroundLogger: logger)

        var listenConfiguration = PostgresConnection.Configuration(
            host: configuration.host,
            port: configuration.port,
            username: configuration.user,
            password: configuration.password,
            database: configuration.database,
            tls: connectionTLS
        )
        listenConfiguration.options.connectTimeout = .nanoseconds(configuration.connectTimeout.nanosecondsClamped)
        self.listenConfiguration = listenConfiguration

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

    /// Runs the connection pool and the LISTEN connection until the calling task is cancelled or ``close()`` is
    /// called. Call it once, in a task that lives as long as the store; a second call returns at once.
    public nonisolated func run() async {
        let first = self.runState.withLockedValue { state in
            defer { state.started = true }
            return !state.started
        }
        guard first else {
            self.logger.error("PostgresCutoffStore.run() called twice; the second call does nothing")
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.client.run() }
            group.addTask { await self.listenLoop() }
            group.addTask {
                for await _ in self.closedSignal {}
            }
            // Whichever ends first (close() finished the closed signal, or we were cancelled) ends them all.
            await group.next()
            group.cancelAll()
        }
    }

    // MARK: CutoffStore

    public func load() async throws -> CutoffTable {
        let statements = try await self.ready()
        let sql = statements.load
        let description = self.storeDescription
        return try await self.withConnection { connection, logger in
            var table = CutoffTable()
            var sawGlobalRow = false
            let rows = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
            for try await (kind, user, first, second) in rows.decode((Int64, String?, Int64?, Int64?).self) {
                if kind == 0 {
                    sawGlobalRow = true
                    table.globalRevokedBefore = first
                    table.forceEpoch = second ?? 0
                } else if let user, !user.isEmpty {
                    // An RP table without a unique user id may hold a user twice; the later cutoffs win.
                    let loaded = UserCutoffs(revokedBefore: first, apiRevokedBefore: second)
                    if let existing = table.users[user] {
                        table.users[user] = UserCutoffs(
                            revokedBefore: CutoffTable.later(existing.revokedBefore, loaded.revokedBefore),
                            apiRevokedBefore: CutoffTable.later(existing.apiRevokedBefore, loaded.apiRevokedBefore)
                        )
                    } else {
                        table.users[user] = loaded
                    }
                }
            }
            if statements.hasGlobalRow, !sawGlobalRow {
                throw CutoffStoreError(code: .invalidStoreFile, message: "\(description): the global row is missing")
            }
            return table
        }
    }

    public func changeMarker() async throws -> String? {
        let statements = try await self.ready()
        let sql = statements.marker
        return try await self.withConnection { connection, logger in
            let rows = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
            var marker: String?
            for try await (value) in rows.decode(String?.self) {
                marker = value
            }
            return marker
        }
    }

    public func lookup(user: String) async throws -> CutoffLookup {
        let statements = try await self.ready()
        var binds = PostgresBindings()
        switch statements.lookupUserID {
        case .text:
            binds.append(user)
        case .integer:
            guard let id = Int64(user) else {
                // The RP's ids are integers; this id cannot be one of them.
                return CutoffLookup(user: UserCutoffs(), globalRevokedBefore: nil)
            }
            binds.append(id)
        }
        let query = PostgresQuery(unsafeSQL: statements.lookup, binds: binds)
        let description = self.storeDescription
        let hasGlobalRow = statements.hasGlobalRow
        return try await self.withConnection { connection, logger in
            let rows = try await connection.query(query, logger: logger)
            var result: CutoffLookup?
            for try await (global, revoked, api) in rows.decode((Int64?, Int64?, Int64?).self) {
                result = CutoffLookup(
                    user: UserCutoffs(revokedBefore: revoked, apiRevokedBefore: api),
                    globalRevokedBefore: global
                )
            }
            guard let result else {
                if hasGlobalRow {
                    throw CutoffStoreError(
                        code: .invalidStoreFile, message: "\(description): the global row is missing")
                }
                return CutoffLookup(user: UserCutoffs(), globalRevokedBefore: nil)
            }
            return result
        }
    }

    public func apply(_ write: CutoffWrite) async throws -> CutoffWriteResult {
        try write.validate()
        let layout: CopyLayout
        switch self.source {
        case .rpTable(let rp):
            throw CutoffStoreError(code: .readOnlyStore, message: rp.readOnlyMessage)
        case .copy(let copy):
            layout = copy
        }
        _ = try await self.ready()
        let channel = self.configuration.notifyChannel
        let statementTimeout = self.configuration.operationTimeout.millisecondsClamped
        let now = CutoffSyncService.systemNow()
        return try await self.withConnection { connection, logger in
            try await Self.transaction(connection, logger: logger) {
                try await Self.execute(connection, logger, "SET LOCAL synchronous_commit = on")
                try await Self.execute(connection, logger, "SET LOCAL statement_timeout = \(statementTimeout)")
                let result = try await Self.write(write, layout: layout, now: now, on: connection, logger: logger)
                if result.changed {
                    // Sent at COMMIT, and only if it commits: every instance reloads after the write is durable.
                    var binds = PostgresBindings()
                    binds.append(channel)
                    binds.append(result.forced ? "*" : (write.user ?? "*"))
                    try await Self.execute(connection, logger, "SELECT pg_notify($1, $2)", binds)
                }
                return result
            }
        }
    }

    /// Stops ``run()`` (and with it the pool and the LISTEN connection) and ends ``changeSignals``. Later calls
    /// fail with ``CutoffStoreError/Code/storeUnavailable``.
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
                self = .rpTable(try RPLayout(rp))
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
        /// Rows of `(kind bigint, user_id text, first bigint, second bigint)`: kind 0 is the global row
        /// (global cutoff, force epoch), kind 1 a user (revoked_before, api_revoked_before).
        var load: String
        /// One text column that changes whenever the content may have.
        var marker: String
        /// `$1` = user id; one row of `(global, revoked_before, api_revoked_before)`.
        var lookup: String
        var lookupUserID: UserIDBinding
        /// Whether a missing global row means a broken store (copy mode).
        var hasGlobalRow: Bool
    }

    /// Creates the schema or resolves the RP table's columns, once; retried by the next call after a failure.
    private func ready() async throws -> Statements {
        if self.isClosed {
            throw CutoffStoreError(code: .storeUnavailable, message: "\(self.storeDescription): the store is closed")
        }
        if let statements = self.statements {
            return statements
        }
        let source = self.source
        let description = self.storeDescription
        let statements: Statements = try await self.withConnection { connection, logger in
            switch source {
            case .copy(let layout):
                try await Self.createOrCheckSchema(layout, on: connection, logger: logger, description: description)
                return layout.statements
            case .rpTable(let layout):
                return try await layout.resolve(on: connection, logger: logger, description: description)
            }
        }
        self.statements = statements
        return statements
    }
}

// MARK: Connections, transactions, errors.

extension PostgresCutoffStore {
    /// Runs `body` on a pooled connection within ``Configuration/operationTimeout``; maps every failure to a
    /// ``CutoffStoreError``.
    func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T
    ) async throws -> T {
        if self.isClosed {
            throw CutoffStoreError(code: .storeUnavailable, message: "\(self.storeDescription): the store is closed")
        }
        let client = self.client
        let logger = self.logger
        let description = self.storeDescription
        let timeout = self.configuration.operationTimeout
        do {
            return try await withDeadline(
                timeout,
                timeoutError: {
                    CutoffStoreError(
                        code: .storeUnavailable,
                        message:
                            "\(description): no answer within \(timeout) (is the server up, and store.run() running?)"
                    )
                }
            ) {
                try await client.withConnection { connection in
                    try await body(connection, logger)
                }
            }
        } catch {
            throw Self.storeError(error, description: description)
        }
    }

    /// `BEGIN`, `body`, `COMMIT`; `ROLLBACK` when `body` throws. An error at `COMMIT` leaves the outcome unknown
    /// and is reported as unavailable: the caller may retry, and a retried forward-only write is harmless.
    static func transaction<T: Sendable>(
        _ connection: PostgresConnection,
        logger: Logger,
        _ body: () async throws -> T
    ) async throws -> T {
        try await Self.execute(connection, logger, "BEGIN")
        let value: T
        do {
            value = try await body()
        } catch {
            try? await Self.execute(connection, logger, "ROLLBACK")
            throw error
        }
        try await Self.execute(connection, logger, "COMMIT")
        return value
    }

    /// Runs a statement and drains its rows.
    static func execute(
        _ connection: PostgresConnection,
        _ logger: Logger,
        _ sql: String,
        _ binds: PostgresBindings = PostgresBindings()
    ) async throws {
        let rows = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        for try await _ in rows {}
    }

    /// A ``CutoffStoreError`` for any failure. The message has postgres-nio's error code, the server's SQLSTATE
    /// and message, or the connection error; never the password (PostgreSQL's own messages never contain it, and
    /// postgres-nio's `description` is deliberately generic, so the fields are picked one by one).
    static func storeError(_ error: any Error, description: String) -> CutoffStoreError {
        if let error = error as? CutoffStoreError {
            return error
        }
        if let error = error as? PSQLError {
            var parts = ["\(error.code)"]
            if let state = error.serverInfo?[.sqlState] {
                parts.append("SQLSTATE \(state)")
            }
            if let message = error.serverInfo?[.message] {
                parts.append(message)
            }
            if let underlying = error.underlying {
                parts.append("\(underlying)")
            }
            return CutoffStoreError(
                code: .storeUnavailable, message: "\(description): \(parts.joined(separator: ": "))")
        }
        if error is PostgresDecodingError {
            return CutoffStoreError(
                code: .invalidStoreFile,
                message: "\(description): a column holds a value of an unexpected type"
            )
        }
        if error is CancellationError {
            return CutoffStoreError(code: .storeUnavailable, message: "\(description): cancelled")
        }
        return CutoffStoreError(code: .storeUnavailable, message: "\(description): \(error)")
    }

    private static func tls(
        _ configuration: Configuration
    ) throws -> (PostgresClient.Configuration.TLS, PostgresConnection.Configuration.TLS) {
        if configuration.tls.isDisabled {
            return (.disable, .disable)
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        if configuration.tls.isRequired {
            tls.certificateVerification = .fullVerification
            if let caFile = configuration.tlsCAFile {
                tls.trustRoots = .file(caFile)
            }
        } else {
            // libpq's `prefer`: encryption if offered, no certificate check (documented on TLSMode.prefer).
            tls.certificateVerification = .none
        }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: tls)
        } catch {
            throw CutoffStoreError(
                code: .invalidStoreConfiguration,
                message:
                    "postgres: the TLS settings cannot be used (CA file \(configuration.tlsCAFile ?? "none")): \(error)"
            )
        }
        if configuration.tls.isRequired {
            return (.require(tls), .require(context))
        }
        return (.prefer(tls), .prefer(context))
    }
}

// MARK: The LISTEN connection.

extension PostgresCutoffStore {
    /// Keeps one connection listening on the notify channel and turns notifications into ``changeSignals``.
    ///
    /// Every (re)established LISTEN also yields a signal: notifications sent while the connection was down are
    /// lost, so the sync service must reload to catch up. Reconnects back off from 100 ms to 2 s.
    private nonisolated func listenLoop() async {
        let channel = self.configuration.notifyChannel
        var delay = Duration.milliseconds(100)
        var connectionID = 0
        var failing = false
        while !Task.isCancelled {
            connectionID += 1
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: self.listenConfiguration,
                    id: connectionID,
                    logger: self.logger
                )
                do {
                    try await connection.listen(on: channel) { notifications in
                        self.runState.withLockedValue { $0.listening = true }
                        if failing {
                            self.logger.info(
                                "cutoff store LISTEN connection is back",
                                metadata: ["store": "\(self.storeDescription)"])
                        }
                        failing = false
                        delay = .milliseconds(100)
                        self.signalSink.yield(CutoffChangeSignal(user: nil))
                        for try await notification in notifications {
                            let payload = notification.payload
                            self.signalSink.yield(
                                CutoffChangeSignal(user: payload == "*" || payload.isEmpty ? nil : payload))
                        }
                    }
                } catch {
                    self.listenFailed(error, alreadyFailing: &failing)
                }
                self.runState.withLockedValue { $0.listening = false }
                try? await connection.close()
            } catch {
                self.listenFailed(error, alreadyFailing: &failing)
            }
            self.runState.withLockedValue { $0.listening = false }
            if Task.isCancelled {
                break
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(2))
        }
    }

    private nonisolated func listenFailed(_ error: any Error, alreadyFailing: inout Bool) {
        if Task.isCancelled {
            return
        }
        // Logged once per outage; polling keeps the snapshot current meanwhile (and the sync service reports stale).
        if !alreadyFailing {
            self.logger.warning(
                "cutoff store LISTEN connection lost; retrying, changes arrive by polling meanwhile",
                metadata: ["error": "\(Self.storeError(error, description: self.storeDescription))"]
            )
        }
        alreadyFailing = true
    }
}

extension Duration {
    /// Whole milliseconds, at least 1, for `statement_timeout`.
    var millisecondsClamped: Int64 {
        let (seconds, attoseconds) = self.components
        return max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    /// Nanoseconds for NIO's `TimeAmount`.
    var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = self.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

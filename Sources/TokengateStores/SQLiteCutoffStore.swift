//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
public import Logging
import NIOConcurrencyHelpers
internal import SQLiteNIO
import TokengateTokens

/// The embedded default cutoff store: one SQLite file, so one command runs the gateway on a fresh machine.
///
/// ### Why vapor/sqlite-nio and not the system libsqlite3
/// sqlite-nio is well kept, bundles a current SQLite amalgamation (3.54 with 1.13.2; `RETURNING` and
/// upserts need 3.35, Debian 12's libsqlite3 is 3.40), so the product's behaviour does not depend on the
/// distribution's SQLite build, and it already runs every libsqlite3 call on a `NIOThreadPool` thread, so an
/// `fsync` never blocks a Swift-concurrency or event-loop thread. The costs: it compiles SQLite from source
/// (about 35 s once on 2 cores) and it allocates a row object per result row, which only the full reload
/// pays. A hand-written `CTokengateSQLite` wrapper would add C interop code that is not the product.
///
/// ### Schema (version 1)
/// - `schema_version(version)`: one row; a newer version than ``schemaVersion`` refuses to open.
/// - `user_cutoffs(user_id TEXT PRIMARY KEY, revoked_before INTEGER, api_revoked_before INTEGER,
///   updated_at INTEGER)`: UNIX seconds, `NULL` for "no cutoff".
/// - `global_cutoff(id = 1, revoked_before, force_epoch, updated_at)`: the emergency cutoff and the force
///   epoch (see ``CutoffTable/forceEpoch``).
/// - Triggers bump `force_epoch` whenever any cutoff moves backward or a user row is deleted, whoever does it
///   (a forced write here, the CLI, or an operator's own SQL), so every reader knows to take the earlier value.
///
/// ### Durability
/// `journal_mode=WAL` with `synchronous=FULL`: every commit `fsync`s the WAL before `sqlite3_step` returns, and
/// every write is one autocommit statement that has finished (and so committed) before ``apply(_:)`` returns.
/// `busy_timeout` replaces sqlite-nio's spin-forever busy handler so a long lock held by another process turns
/// into an error after 5 s instead of a busy thread.
///
/// ### A file that changes under us
/// A long-lived connection keeps reading and writing the inode it opened even after the path is deleted or
/// replaced, which would make writes vanish at the next restart. So every call first checks that the path
/// still names the inode the connection has open; if not, it drops the connection and reopens the path
/// (without creating it), and fails with ``CutoffStoreError/Code/storeUnavailable`` if that is not a valid
/// database.
///
/// Bytes written over the same file (no new inode) are caught too, by the file's ``FileChangeStamp``: in WAL mode
/// the connection would otherwise keep answering from its page cache, so a file overwritten with garbage or
/// damaged by a copy would go unnoticed until the next restart. A changed stamp drops the connection the same way;
/// the fresh one reads the file itself, and a damaged file then fails (`file is not a database`, `database disk
/// image is malformed`), which the sync service reports. The file is created only by ``open(path:createIfMissing:logger:)`` when asked to (by `serve`, not by
/// `tokengate revoke`), and only inside an existing directory, so an unmounted volume is an error rather than a
/// fresh empty store.
public actor SQLiteCutoffStore: CutoffStore {
    /// The schema version this code writes and understands.
    public static let schemaVersion: Int64 = 1

    /// How long a statement waits for another process's lock before failing.
    static let busyTimeoutMilliseconds = 5000

    /// The database file's path.
    public nonisolated let path: String
    private let logger: Logger
    private var state: State
    /// Every connection this store opened whose close has not completed yet, the current one included.
    ///
    /// sqlite-nio asserts (debug builds) and leaks the handle (release builds) when a `SQLiteConnection` is
    /// released open, so no connection may leave this table before its close finished. See ``retire(_:)``.
    private var connections: [ObjectIdentifier: TrackedConnection]
    /// ``close()`` callers waiting for ``connections`` to become empty.
    private var drainWaiters: [CheckedContinuation<Void, Never>]
    /// Tells the opening task that finishes apart from one that was superseded by ``close()``.
    private var openingGeneration: UInt64
    /// Counts (re)opened connections, so a reopen changes ``changeMarker()`` and forces a full reload.
    private var openCount: UInt64

    private struct OpenConnection: Sendable {
        let sqlite: SQLiteConnection
        let identity: FileIdentity
        /// The database file's stamp once the connection was ready: a different one means the file was written
        /// by something that bypassed this connection's page cache (see ``FileChangeStamp``).
        let stamp: FileChangeStamp?

        var id: ObjectIdentifier { ObjectIdentifier(self.sqlite) }
    }

    /// One entry of ``connections``.
    private struct TrackedConnection {
        let sqlite: SQLiteConnection
        /// Statements running on it right now (see ``lease()``): it is closed only once this is back to 0, since
        /// `sqlite3_close` with a statement still running fails with `SQLITE_BUSY`, and sqlite-nio then forgets
        /// the handle anyway, leaving it open for good.
        var leases: Int
        /// No longer handed out: replaced, failed, or the store is closing. Closed when ``leases`` reaches 0.
        var retired: Bool
        /// The one close of this connection, shared by everyone who wants it closed: two `sqlite3_close` calls on
        /// the same handle from two thread-pool threads would race on sqlite-nio's handle and could free it twice.
        var closing: Task<Void, Never>?
    }

    private enum State {
        case idle
        /// The task opens the file and then installs the result itself (``finishOpening(_:generation:)``), so
        /// whoever awaits it only has to look at the state again.
        case opening(Task<Void, any Error>, generation: UInt64)
        case open(OpenConnection)
        case closed
    }

    private init(path: String, logger: Logger, connection: OpenConnection) {
        self.path = path
        self.logger = logger
        self.state = .open(connection)
        self.connections = [connection.id: TrackedConnection(sqlite: connection.sqlite, leases: 0, retired: false)]
        self.drainWaiters = []
        self.openingGeneration = 0
        self.openCount = 1
    }

    /// A store released without ``close()`` (a test that failed half-way, a start-up error path) closes what it
    /// still holds on an unstructured task.
    ///
    /// Nothing here can be awaited, and a connection released open trips sqlite-nio's debug assertion and leaks
    /// the file handle (and leaves the WAL un-checkpointed). Whatever is still tracked here is idle: a running
    /// statement (``lease()``), an opening task and a pending close are all awaited by a method of this actor,
    /// which keeps the actor alive until they are done. The task owns the connection from now on.
    deinit {
        let logger = self.logger
        for tracked in self.connections.values where tracked.closing == nil {
            logger.debug("cutoff store released without close(); closing its connection")
            let sqlite = tracked.sqlite
            Task {
                await Self.closeCompletely(sqlite, logger: logger)
            }
        }
    }

    /// Opens the database at `path`, creating the file and its schema if the file does not exist yet and
    /// `createIfMissing` allows it.
    ///
    /// The directory must exist: creating it here would turn a missing volume into an empty store that accepts
    /// every token. For the same reason a one-shot writer (`tokengate revoke`) passes `createIfMissing: false`:
    /// its write to a new, empty file would be lost to the gateway reading the real one, or, worse, make a
    /// gateway whose file was moved away "recover" on an empty store.
    public static func open(
        path: String,
        createIfMissing: Bool = true,
        logger: Logger = Logger(label: "tokengate.cutoffs.sqlite")
    ) async throws -> SQLiteCutoffStore {
        let connection = try await Self.openConnection(path: path, create: createIfMissing, logger: logger)
        return SQLiteCutoffStore(path: path, logger: logger, connection: connection)
    }

    public nonisolated var storeDescription: String {
        "sqlite \(self.path)"
    }

    // MARK: Reads

    public func load() async throws -> CutoffTable {
        // One statement, so the global row and the user rows come from one read transaction.
        let sql = """
            SELECT 0, NULL, revoked_before, force_epoch FROM global_cutoff WHERE id = 1
            UNION ALL
            SELECT 1, user_id, revoked_before, api_revoked_before FROM user_cutoffs
            """
        let accumulator = NIOLockedValueBox(LoadAccumulator())
        try await self.run(sql, []) { row in
            accumulator.withLockedValue { $0.add(row) }
        }
        let result = accumulator.withLockedValue { $0 }
        if let problem = result.problem {
            throw CutoffStoreError(code: .invalidStoreFile, message: "\(self.storeDescription): \(problem)")
        }
        guard result.sawGlobalRow else {
            throw CutoffStoreError(
                code: .invalidStoreFile,
                message: "\(self.storeDescription): the global_cutoff row is missing"
            )
        }
        return result.table
    }

    public func changeMarker() async throws -> String? {
        let rows = try await self.rows("PRAGMA data_version", [])
        guard let version = rows.first?.columns.first?.data.integer else {
            return nil
        }
        // data_version only changes for commits by *other* connections; the sync service applies this
        // connection's own writes itself. A new connection restarts the count, hence the open counter.
        return "\(self.openCount):\(version)"
    }

    public func lookup(user: String) async throws -> CutoffLookup {
        let sql = """
            SELECT g.revoked_before, u.revoked_before, u.api_revoked_before
            FROM global_cutoff AS g LEFT JOIN user_cutoffs AS u ON u.user_id = ?1
            WHERE g.id = 1
            """
        let rows = try await self.rows(sql, [.text(user)])
        guard let row = rows.first, row.columns.count == 3 else {
            throw CutoffStoreError(
                code: .invalidStoreFile,
                message: "\(self.storeDescription): the global_cutoff row is missing"
            )
        }
        return CutoffLookup(
            user: UserCutoffs(
                revokedBefore: try self.time(row.columns[1].data),
                apiRevokedBefore: try self.time(row.columns[2].data)
            ),
            globalRevokedBefore: try self.time(row.columns[0].data)
        )
    }

    // MARK: Writes

    public func apply(_ write: CutoffWrite) async throws -> CutoffWriteResult {
        try write.validate()
        let now = Self.unixNow()
        switch write {
        case .passwordChanged(let user, let at, let force):
            return try await self.writeUser(user, column: .revokedBefore, at: at, force: force, now: now)
        case .disableMobileApps(let user, let at, let force):
            return try await self.writeUser(user, column: .apiRevokedBefore, at: at, force: force, now: now)
        case .revokeAll(let at, let force):
            return try await self.writeGlobal(at: at, force: force, now: now)
        }
    }

    /// The two per-user columns. The SQL names come only from here, never from input.
    private enum UserColumn: String {
        case revokedBefore = "revoked_before"
        case apiRevokedBefore = "api_revoked_before"
    }

    private func writeUser(
        _ user: String,
        column: UserColumn,
        at: Int64,
        force: Bool,
        now: Int64
    ) async throws -> CutoffWriteResult {
        let c = column.rawValue
        // Forward-only is decided inside the one statement (the DO UPDATE ... WHERE), so two writers can never
        // both read an old value and the later time always wins. RETURNING yields a row only if a row changed.
        // A forced write still changes only a different value, so that writing the value already stored says
        // `changed: false` (and bumps nothing).
        let guardClause = force
            ? " WHERE user_cutoffs.\(c) IS NOT excluded.\(c)"
            : " WHERE user_cutoffs.\(c) IS NULL OR user_cutoffs.\(c) < excluded.\(c)"
        let sql = """
            INSERT INTO user_cutoffs (user_id, \(c), updated_at) VALUES (?1, ?2, ?3)
            ON CONFLICT (user_id) DO UPDATE SET \(c) = excluded.\(c), updated_at = excluded.updated_at\(guardClause)
            RETURNING \(c)
            """
        let changed = try await self.rows(sql, [.text(user), .integer(.init(at)), .integer(.init(now))])
        if !changed.isEmpty {
            return CutoffWriteResult(cutoff: at, changed: true, forced: force)
        }
        let current = try await self.rows("SELECT \(c) FROM user_cutoffs WHERE user_id = ?1", [.text(user)])
        let kept = try current.first.flatMap { try self.time($0.columns[0].data) }
        return try CutoffWriteResult.unchanged(kept: kept, requested: at, what: "the user's \(c)")
    }

    private func writeGlobal(at: Int64, force: Bool, now: Int64) async throws -> CutoffWriteResult {
        let guardClause = force ? " AND revoked_before IS NOT ?1" : " AND (revoked_before IS NULL OR revoked_before < ?1)"
        let sql = """
            UPDATE global_cutoff SET revoked_before = ?1, updated_at = ?2 WHERE id = 1\(guardClause)
            RETURNING revoked_before
            """
        let changed = try await self.rows(sql, [.integer(.init(at)), .integer(.init(now))])
        if !changed.isEmpty {
            return CutoffWriteResult(cutoff: at, changed: true, forced: force)
        }
        let current = try await self.rows("SELECT revoked_before FROM global_cutoff WHERE id = 1", [])
        guard let row = current.first else {
            throw CutoffStoreError(
                code: .invalidStoreFile,
                message: "\(self.storeDescription): the global_cutoff row is missing"
            )
        }
        return try CutoffWriteResult.unchanged(
            kept: try self.time(row.columns[0].data),
            requested: at,
            what: "the global cutoff"
        )
    }

    /// Closes every connection this store opened, and returns only once all of them are closed.
    ///
    /// Idempotent and safe to call concurrently: every call waits for the same end. A statement that is running
    /// finishes first (its connection is closed as soon as it is returned), and an open in progress is closed as
    /// soon as it completes.
    public func close() async throws {
        let previous = self.state
        // Before any suspension, so no new connection can be opened or handed out from here on.
        self.state = .closed
        switch previous {
        case .open(let connection):
            await self.retire(connection.id)
        case .opening(let task, _):
            // The task sees `.closed` when it finishes and retires what it opened.
            _ = try? await task.value
        case .idle, .closed:
            break
        }
        await self.waitUntilAllClosed()
    }
}

// MARK: Running statements on a checked connection.

extension SQLiteCutoffStore {
    private func rows(_ sql: String, _ binds: [SQLiteData]) async throws -> [SQLiteRow] {
        let collected = NIOLockedValueBox<[SQLiteRow]>([])
        try await self.run(sql, binds) { row in
            collected.withLockedValue { $0.append(row) }
        }
        return collected.withLockedValue { $0 }
    }

    /// Runs one statement on a connection whose file is still the one at ``path``.
    ///
    /// Any SQLite failure drops the connection, so the next call reopens the file: after "disk I/O error" or
    /// "file is not a database", a fresh connection is the only way to find out whether the file is back. A
    /// cancelled caller keeps it: sqlite-nio either never started the statement or let it finish.
    private func run(
        _ sql: String,
        _ binds: [SQLiteData],
        onRow: @escaping @Sendable (SQLiteRow) -> Void
    ) async throws {
        let connection = try await self.lease()
        do {
            try await connection.sqlite.query(sql, binds, onRow)
        } catch let error as CancellationError {
            await self.giveBack(connection.id, retiring: false)
            throw self.unavailable(error)
        } catch {
            await self.giveBack(connection.id, retiring: true)
            throw self.unavailable(error)
        }
        await self.giveBack(connection.id, retiring: false)
    }

    /// How many times one call reopens a file that keeps being replaced before it gives up.
    private static let maximumReopens = 3

    /// A connection whose file is still the one at ``path``, counted as in use until ``giveBack(_:retiring:)``.
    ///
    /// Every step re-reads ``state`` after a suspension, because other calls on this actor run in between: one
    /// may have reopened the file, another may have closed the store.
    private func lease() async throws -> OpenConnection {
        var reopens = 0
        while true {
            switch self.state {
            case .closed:
                throw CutoffStoreError(
                    code: .storeUnavailable,
                    message: "\(self.storeDescription): the store is closed"
                )
            case .opening(let task, _):
                // Installs its result (or `.idle` on failure) before it completes.
                try await task.value
            case .open(let connection):
                let sameFile = FileIdentity(path: self.path) == connection.identity
                if sameFile, FileChangeStamp(path: self.path) == connection.stamp {
                    self.connections[connection.id]?.leases += 1
                    return connection
                }
                guard reopens < Self.maximumReopens else {
                    throw CutoffStoreError(
                        code: .storeUnavailable,
                        message: "\(self.storeDescription): the database file keeps being replaced or written"
                    )
                }
                reopens += 1
                if sameFile {
                    // A checkpoint (ours or another process's) or bytes written over the file: only a new
                    // connection reads what is there now rather than its cached pages. Usually a checkpoint, so
                    // not worth a warning; a damaged file fails the reopen, and that is reported.
                    self.logger.debug(
                        "cutoff database file was written outside this connection; reopening",
                        metadata: ["path": "\(self.path)"]
                    )
                } else {
                    self.logger.warning(
                        "cutoff database file was replaced or removed; reopening",
                        metadata: ["path": "\(self.path)"]
                    )
                }
                await self.retire(connection.id)
            case .idle:
                self.startOpening()
            }
        }
    }

    private func startOpening() {
        self.openingGeneration &+= 1
        let generation = self.openingGeneration
        let path = self.path
        let logger = self.logger
        // Unstructured, so a cancelled caller cannot abandon a half-opened connection; the task keeps the actor
        // alive until it has handed the connection over.
        let task = Task {
            let connection: OpenConnection
            do {
                connection = try await Self.openConnection(path: path, create: false, logger: logger)
            } catch {
                self.openingFailed(generation: generation)
                throw error
            }
            await self.finishOpening(connection, generation: generation)
        }
        self.state = .opening(task, generation: generation)
    }

    private func openingFailed(generation: UInt64) {
        if case .opening(_, let current) = self.state, current == generation {
            self.state = .idle
        }
    }

    /// Tracks `connection` and makes it the current one, or closes it if the store was closed meanwhile.
    private func finishOpening(_ connection: OpenConnection, generation: UInt64) async {
        self.connections[connection.id] = TrackedConnection(sqlite: connection.sqlite, leases: 0, retired: false)
        if case .opening(_, let current) = self.state, current == generation {
            self.state = .open(connection)
            self.openCount &+= 1
        } else {
            await self.retire(connection.id)
        }
    }

    /// Ends a ``lease()``; `retiring` after a failure, so the next call reopens the file.
    private func giveBack(_ id: ObjectIdentifier, retiring: Bool) async {
        self.connections[id]?.leases -= 1
        if retiring {
            await self.retire(id)
        } else if let tracked = self.connections[id], tracked.retired, tracked.leases == 0 {
            // Retired by another call while this statement ran; the last user closes it.
            await self.closeTracked(id)
        }
    }

    /// Stops handing out the connection and closes it once no statement runs on it.
    ///
    /// Safe to call any number of times and from concurrent calls: only the first one changes the state, and
    /// they all share the one close (see ``TrackedConnection/closing``).
    private func retire(_ id: ObjectIdentifier) async {
        guard var tracked = self.connections[id] else {
            return  // Closed already.
        }
        if case .open(let current) = self.state, current.id == id {
            self.state = .idle
        }
        tracked.retired = true
        self.connections[id] = tracked
        if tracked.leases == 0 {
            await self.closeTracked(id)
        }
    }

    /// Starts the close of an idle retired connection, or joins the one already running, and forgets the
    /// connection only once that close has completed.
    private func closeTracked(_ id: ObjectIdentifier) async {
        guard let tracked = self.connections[id] else {
            return
        }
        // Held until the end: once the connection is freed, a new one may be allocated at the same address and
        // so get the same `ObjectIdentifier`; the removal below must not forget that one.
        let sqlite = tracked.sqlite
        let closing: Task<Void, Never>
        if let running = tracked.closing {
            closing = running
        } else {
            let logger = self.logger
            closing = Task {
                await Self.closeCompletely(sqlite, logger: logger)
            }
            self.connections[id]?.closing = closing
        }
        await closing.value
        if self.connections[id]?.sqlite === sqlite {
            self.connections[id] = nil
        }
        if self.connections.isEmpty {
            let waiters = self.drainWaiters
            self.drainWaiters = []
            for waiter in waiters {
                waiter.resume()
            }
        }
    }

    /// Returns once ``connections`` is empty; only after ``close()`` retired them all will it get there.
    private func waitUntilAllClosed() async {
        if self.connections.isEmpty {
            return
        }
        await withCheckedContinuation { continuation in
            self.drainWaiters.append(continuation)
        }
    }

    /// Closes `sqlite`, whatever the calling task's state, and never releases it open.
    ///
    /// sqlite-nio's `close()` throws only when its `NIOThreadPool` refuses the work: at once in a cancelled task
    /// (the sync service's run loop stopping mid-poll) without closing, or when the pool is shut down. The first
    /// is avoided by closing on an unstructured task, which does not inherit the cancellation; the second is
    /// retried a few times. A connection that still cannot be closed is kept referenced for the life of the
    /// process (``UnclosableSQLiteConnections``): deinitializing it open would trip sqlite-nio's assertion in
    /// debug builds and leak the handle anyway in release builds. Once the close ran, the handle is gone even if
    /// `sqlite3_close` reported `SQLITE_BUSY` (sqlite-nio does not look at the result), which is why nothing may
    /// be running on the connection when it is closed (``TrackedConnection/leases``).
    static func closeCompletely(_ sqlite: SQLiteConnection, logger: Logger) async {
        await Task {
            var delay = Duration.milliseconds(10)
            for attempt in 1...5 {
                do {
                    try await sqlite.close()
                    return
                } catch {
                    logger.warning(
                        "closing a cutoff database connection failed; retrying",
                        metadata: ["attempt": "\(attempt)", "error": "\(String(reflecting: type(of: error)))"]
                    )
                }
                try? await Task.sleep(for: delay)
                delay *= 4
            }
            logger.error("a cutoff database connection cannot be closed; keeping it open until the process exits")
            UnclosableSQLiteConnections.keep(sqlite)
        }.value
    }

    private nonisolated func unavailable(_ error: any Error) -> CutoffStoreError {
        if let error = error as? CutoffStoreError {
            return error
        }
        if let error = error as? SQLiteError {
            return Self.storeError(error, description: self.storeDescription)
        }
        return CutoffStoreError(code: .storeUnavailable, message: "\(self.storeDescription): \(error)")
    }

    private nonisolated func time(_ data: SQLiteData) throws -> Int64? {
        switch data {
        case .null:
            return nil
        case .integer(let value):
            return Int64(value)
        case .float, .text, .blob:
            throw CutoffStoreError(
                code: .invalidStoreFile,
                message: "\(self.storeDescription): a cutoff column holds a value that is not an integer"
            )
        }
    }

    static func unixNow() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec)
    }
}

extension SQLiteCutoffStore {
    /// A damaged file does not mend by waiting: `serve` and `revoke` exit 69 on it, not 75 ("retry"), and /readyz
    /// names it apart from a lock or an outage. Anything else SQLite says (busy, locked, I/O) may pass.
    static func storeError(_ error: SQLiteError, description: String) -> CutoffStoreError {
        switch error.reason {
        case .corrupt, .notADatabase, .corruptIndex, .corruptSequenceSchema, .corruptVirtualTable:
            return CutoffStoreError(code: .invalidStoreFile, message: "\(description): the database file is damaged: \(error.message)")
        default:
            return CutoffStoreError(code: .storeUnavailable, message: "\(description): \(error.message)")
        }
    }
}

// MARK: Opening a connection and creating the schema.

extension SQLiteCutoffStore {
    /// Opens `path`, sets the durability pragmas, and creates or checks the schema, all before the connection
    /// is shared, so the multi-statement schema transaction cannot interleave with other statements.
    private static func openConnection(path: String, create: Bool, logger: Logger) async throws -> OpenConnection {
        let description = "sqlite \(path)"
        func unavailable(_ message: String) -> CutoffStoreError {
            CutoffStoreError(code: .storeUnavailable, message: "\(description): \(message)")
        }

        // A directory or a file that is not a database is named as such (SQLite itself calls a directory
        // "Failed to open"), the same way `check-config` names it.
        do {
            _ = try SQLiteDatabaseFile.check(path: path)
        } catch {
            throw CutoffStoreError(code: .invalidStoreFile, message: "\(description): \(error.reason)")
        }
        let before = FileIdentity(path: path)
        if before == nil {
            guard create else {
                throw unavailable("the database file is missing")
            }
            guard Self.directoryExists(of: path) else {
                throw unavailable("the directory for the database file does not exist")
            }
        }

        let sqlite: SQLiteConnection
        do {
            sqlite = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
        } catch let error as SQLiteError {
            throw Self.storeError(error, description: description)
        }
        do {
            try await Self.configure(sqlite, description: description)
        } catch {
            await Self.closeCompletely(sqlite, logger: logger)
            if let error = error as? CutoffStoreError {
                throw error
            }
            if let error = error as? SQLiteError {
                throw Self.storeError(error, description: description)
            }
            throw unavailable("\(error)")
        }

        guard let after = FileIdentity(path: path), before == nil || before == after else {
            await Self.closeCompletely(sqlite, logger: logger)
            throw unavailable("the database file was replaced while it was being opened")
        }
        return OpenConnection(sqlite: sqlite, identity: after, stamp: FileChangeStamp(path: path))
    }

    private static func configure(_ sqlite: SQLiteConnection, description: String) async throws {
        // busy_timeout first: it replaces sqlite-nio's busy handler, which retries forever without sleeping.
        _ = try await sqlite.query("PRAGMA busy_timeout = \(Self.busyTimeoutMilliseconds)")
        let mode = try await sqlite.query("PRAGMA journal_mode = WAL")
        guard mode.first?.columns.first?.data.string?.lowercased() == "wal" else {
            throw CutoffStoreError(
                code: .storeUnavailable,
                message: "\(description): the database cannot use write-ahead logging"
            )
        }
        // Per connection, not stored in the file: must be set on every open.
        _ = try await sqlite.query("PRAGMA synchronous = FULL")
        let synchronous = try await sqlite.query("PRAGMA synchronous")
        guard synchronous.first?.columns.first?.data.integer == 2 else {
            throw CutoffStoreError(code: .storeUnavailable, message: "\(description): synchronous=FULL did not take")
        }

        _ = try await sqlite.query("BEGIN IMMEDIATE")
        do {
            try await Self.createOrCheckSchema(sqlite, description: description)
            _ = try await sqlite.query("COMMIT")
        } catch {
            _ = try? await sqlite.query("ROLLBACK")
            throw error
        }
    }

    private static func createOrCheckSchema(_ sqlite: SQLiteConnection, description: String) async throws {
        let existing = try await sqlite.query(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        )
        if !existing.isEmpty {
            let versions = try await sqlite.query("SELECT max(version) FROM schema_version")
            if let version = versions.first?.columns.first?.data.integer, Int64(version) > Self.schemaVersion {
                throw CutoffStoreError(
                    code: .unsupportedSchema,
                    message: "\(description): schema version \(version) is newer than this tokengate's "
                        + "\(Self.schemaVersion); upgrade tokengate"
                )
            }
        }
        let statements = [
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
            """
            CREATE TABLE IF NOT EXISTS user_cutoffs (
                user_id TEXT PRIMARY KEY NOT NULL,
                revoked_before INTEGER,
                api_revoked_before INTEGER,
                updated_at INTEGER NOT NULL
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS global_cutoff (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                revoked_before INTEGER,
                force_epoch INTEGER NOT NULL DEFAULT 0,
                updated_at INTEGER NOT NULL
            )
            """,
            """
            CREATE TRIGGER IF NOT EXISTS user_cutoffs_moved_backward
            AFTER UPDATE OF user_id, revoked_before, api_revoked_before ON user_cutoffs
            WHEN NEW.user_id IS NOT OLD.user_id
              OR (OLD.revoked_before IS NOT NULL
                  AND (NEW.revoked_before IS NULL OR NEW.revoked_before < OLD.revoked_before))
              OR (OLD.api_revoked_before IS NOT NULL
                  AND (NEW.api_revoked_before IS NULL OR NEW.api_revoked_before < OLD.api_revoked_before))
            BEGIN
                UPDATE global_cutoff SET force_epoch = force_epoch + 1 WHERE id = 1;
            END
            """,
            """
            CREATE TRIGGER IF NOT EXISTS user_cutoffs_deleted AFTER DELETE ON user_cutoffs
            BEGIN
                UPDATE global_cutoff SET force_epoch = force_epoch + 1 WHERE id = 1;
            END
            """,
            """
            CREATE TRIGGER IF NOT EXISTS global_cutoff_moved_backward
            AFTER UPDATE OF revoked_before ON global_cutoff
            WHEN OLD.revoked_before IS NOT NULL
              AND (NEW.revoked_before IS NULL OR NEW.revoked_before < OLD.revoked_before)
            BEGIN
                UPDATE global_cutoff SET force_epoch = force_epoch + 1 WHERE id = 1;
            END
            """,
            "INSERT OR IGNORE INTO global_cutoff (id, revoked_before, force_epoch, updated_at) VALUES (1, NULL, 0, ?1)",
            "INSERT INTO schema_version (version) SELECT ?1 WHERE NOT EXISTS (SELECT 1 FROM schema_version)",
        ]
        for (index, statement) in statements.enumerated() {
            let binds: [SQLiteData]
            switch index {
            case statements.count - 2: binds = [.integer(.init(Self.unixNow()))]
            case statements.count - 1: binds = [.integer(.init(Self.schemaVersion))]
            default: binds = []
            }
            _ = try await sqlite.query(statement, binds)
        }
    }

    private static func directoryExists(of path: String) -> Bool {
        let directory: String
        if let slash = path.lastIndex(of: "/") {
            directory = slash == path.startIndex ? "/" : String(path[..<slash])
        } else {
            directory = "."
        }
        var info = stat()
        return stat(directory, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}

/// Collects the rows of the full load; fed on the thread-pool thread, read after the query finished.
private struct LoadAccumulator {
    var table = CutoffTable()
    var sawGlobalRow = false
    var problem: String?

    mutating func add(_ row: SQLiteRow) {
        let columns = row.columns
        guard self.problem == nil, columns.count == 4, let kind = columns[0].data.integer else {
            self.problem = self.problem ?? "a row has an unexpected shape"
            return
        }
        guard let first = Self.time(columns[2].data), let second = Self.time(columns[3].data) else {
            self.problem = "a cutoff column holds a value that is not an integer"
            return
        }
        if kind == 0 {
            self.sawGlobalRow = true
            self.table.globalRevokedBefore = first
            self.table.forceEpoch = second ?? 0
        } else if let user = columns[1].data.string {
            // The table keys users by bytes (``CutoffUserKey``), like the store's primary key, so ids that differ
            // only in Unicode normalization stay two users. A repeated id cannot come from the table; if one
            // did, the later of each cutoff is kept (fail closed).
            let previous = self.table.users[CutoffUserKey(user)] ?? UserCutoffs()
            self.table.users[CutoffUserKey(user)] = UserCutoffs(
                revokedBefore: CutoffTable.later(previous.revokedBefore, first),
                apiRevokedBefore: CutoffTable.later(previous.apiRevokedBefore, second)
            )
        } else {
            self.problem = "a user row has no user id"
        }
    }

    /// `.some(nil)` for SQL NULL, `.some(value)` for an integer, `nil` for anything else.
    private static func time(_ data: SQLiteData) -> Int64?? {
        switch data {
        case .null: return .some(nil)
        case .integer(let value): return .some(Int64(value))
        case .float, .text, .blob: return nil
        }
    }
}

/// Connections whose close failed even after retries (see ``SQLiteCutoffStore/closeCompletely(_:logger:)``).
///
/// Holding them for the life of the process is deliberate: releasing an open `SQLiteConnection` asserts in debug
/// builds and leaks its handle in release builds, so the only choice left is to leak it visibly and on purpose.
enum UnclosableSQLiteConnections {
    private static let kept = NIOLockedValueBox<[SQLiteConnection]>([])

    static func keep(_ sqlite: SQLiteConnection) {
        self.kept.withLockedValue { $0.append(sqlite) }
    }
}

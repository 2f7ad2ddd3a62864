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
/// ### Schema (version 2)
/// - `schema_version(version)`: one row; a newer version than ``schemaVersion`` refuses to open.
/// - `user_cutoffs(user_id TEXT PRIMARY KEY, revoked_before INTEGER, api_revoked_before INTEGER,
///   updated_at INTEGER, change_seq INTEGER)`: UNIX seconds, `NULL` for "no cutoff"; `change_seq` (indexed) is
///   the change feed's number of the row's last change.
/// - `global_cutoff(id = 1, revoked_before, force_epoch, updated_at, change_seq, store_id)`: the emergency cutoff,
///   the force epoch (see ``CutoffTable/forceEpoch``), the feed's counter and the store's random id (the feed's
///   name, ``CutoffFeedPosition``).
/// - Triggers bump `force_epoch` whenever any cutoff moves backward or a user row is deleted, whoever does it
///   (a forced write here, the CLI, or an operator's own SQL), so every reader knows to take the earlier value;
///   and number every inserted or changed user row from the counter (``changes(since:limit:)``).
/// - A version 1 store (before the change feed) is brought to version 2 when it is opened, in one transaction
///   that only adds (``migrateToVersion2(_:description:logger:)``): columns, an index, triggers. A tokengate of
///   version 1 then refuses to open it ("upgrade tokengate") rather than run without knowing of the feed.
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
/// image is malformed`, or no tokengate schema), which the sync service reports. A change that SQLite's own
/// checkpoints cannot make (the file shrank, or is no longer whole pages) is logged as a warning; one that looks like a
/// checkpoint only at debug level (``SQLiteFileChange``).
///
/// The `-wal` and `-shm` files are watched the same way (``SQLiteWALFiles``): removed or replaced under the
/// connection, they would cut it off from every other process's commits and hide its own. A write is
/// acknowledged only if its database file and both of them were still the ones at their paths after it committed.
///
/// ### Creating the file
/// The file is created only by ``open(path:createIfMissing:logger:)`` when asked to (by `serve`, not by
/// `tokengate revoke`), only where nothing is, and only inside an existing directory, so an unmounted volume is an
/// error rather than a fresh empty store. It is built whole under another name and linked into place. An existing
/// file is never given a schema: an empty file, or a database without tokengate's tables, is refused as
/// ``CutoffStoreError/Code/invalidStoreFile`` (it is a store that lost its content, or another application's
/// file), at start and at every reopen.
public actor SQLiteCutoffStore: CutoffStore {
    /// The schema version this code writes and understands.
    public static let schemaVersion: Int64 = 3

    /// How long a statement waits for another process's lock before failing.
    static let busyTimeoutMilliseconds = 5000

    /// The database file's path.
    public nonisolated let path: String
    let logger: Logger
    var state: State
    /// Every connection this store opened whose close has not completed yet, the current one included.
    ///
    /// sqlite-nio asserts (debug builds) and leaks the handle (release builds) when a `SQLiteConnection` is
    /// released open, so no connection may leave this table before its close finished. See ``retire(_:)``.
    var connections: [ObjectIdentifier: TrackedConnection]
    /// ``close()`` callers waiting for ``connections`` to become empty.
    var drainWaiters: [CheckedContinuation<Void, Never>]
    /// Tells the opening task that finishes apart from one that was superseded by ``close()``.
    var openingGeneration: UInt64
    /// Counts (re)opened connections, so a reopen changes ``changeMarker()`` and forces a full reload.
    var openCount: UInt64
    /// A connection that must be closed before the next one opens (its `-wal` or `-shm` was removed or
    /// replaced), with the guard that keeps its close from deleting new ones (``drop(_:because:)``).
    var closeBeforeReopening: (id: ObjectIdentifier, lastCloseGuard: SQLiteLastCloseGuard?)?
    /// Callers of ``waitUntilClosed(_:)``, by connection.
    var closeWaiters: [ObjectIdentifier: [CheckedContinuation<Void, Never>]]

    struct OpenConnection: Sendable {
        let sqlite: SQLiteConnection
        /// The database file's stamp once the connection was ready: another file (``identity``) means it was
        /// replaced; a different stamp of the same file, that it was written by something that bypassed this
        /// connection's page cache (see ``FileChangeStamp``).
        let stamp: FileChangeStamp
        /// The `-wal` and `-shm` files the connection has open.
        let walFiles: SQLiteWALFiles
        /// The database's page size, for ``SQLiteFileChange``.
        let pageSize: Int64

        var identity: FileIdentity { self.stamp.file }

        /// What changed at the paths since the connection opened them: three `stat`s.
        func change(path: String) -> SQLiteFileChange {
            SQLiteFileChange.between(
                recorded: self.stamp,
                recordedWAL: self.walFiles,
                pageSize: self.pageSize,
                current: FileChangeStamp(path: path),
                currentWAL: self.walFiles.now()
            )
        }

        var id: ObjectIdentifier { ObjectIdentifier(self.sqlite) }
    }

    /// One entry of ``connections``.
    struct TrackedConnection {
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

    enum State {
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
        self.closeBeforeReopening = nil
        self.closeWaiters = [:]
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
        try await self.load(onto: nil)
    }

    public func load(onto base: CutoffTable?) async throws -> CutoffTable {
        // One statement, so the global row and the user rows come from one read transaction. A first load (no base)
        // begins with the number of users, so the map is built at its size instead of growing (rehashing) to it.
        let count = base == nil ? "SELECT 3, NULL, count(*), NULL, NULL, NULL FROM user_cutoffs UNION ALL\n" : ""
        let sql = count + """
            SELECT 0, store_id, revoked_before, force_epoch, change_seq, NULL FROM global_cutoff WHERE id = 1
            UNION ALL
            SELECT 1, user_id, revoked_before, api_revoked_before, NULL, NULL FROM user_cutoffs
            UNION ALL
            SELECT 2, device_id, revoked_at, tokens_expire_by, NULL, user_id FROM devices WHERE revoked_at IS NOT NULL
            """
        let accumulator = SQLiteRowSink(LoadAccumulator(base: base))
        let opened = try await self.run(sql, []) { row in
            accumulator.value.add(row)
        }
        accumulator.value.finishBuilding()
        var table = try self.finished(accumulator.value)
        table.position = table.position.map { Self.position($0, connection: opened) }
        return table
    }

    /// The feed's name gets the connection's ``openCount``: a reopened file (replaced, its `-wal` removed, written
    /// over) may number its changes again from a lower counter, as a `-wal` removed with commits in it takes their
    /// numbers away and the next write takes one of them again; the sync service then reloads everything rather
    /// than skip the rows whose numbers it believes it has seen.
    private static func position(_ position: CutoffFeedPosition, connection opened: UInt64) -> CutoffFeedPosition {
        CutoffFeedPosition(feed: "\(position.feed):\(opened)", sequence: position.sequence)
    }

    /// See ``CutoffStore/changes(since:limit:)``. The feed is the `change_seq` column that the schema's triggers
    /// set on every row written (by anyone: this store, `tokengate revoke`, an operator's SQL), from the global
    /// row's counter, inside the writing transaction; SQLite runs one write transaction at a time, so the numbers
    /// are handed out in commit order and a read sees every change up to the counter it reads.
    public func changes(since position: CutoffFeedPosition, limit: Int) async throws -> CutoffChanges? {
        let sql = """
            SELECT 0, store_id, revoked_before, force_epoch, change_seq, NULL FROM global_cutoff WHERE id = 1
            UNION ALL
            SELECT * FROM (
                SELECT 1, user_id, revoked_before, api_revoked_before, change_seq, NULL FROM user_cutoffs
                WHERE change_seq > ?1 ORDER BY change_seq LIMIT ?2
            )
            UNION ALL
            SELECT * FROM (
                SELECT 2, device_id, revoked_at, tokens_expire_by, change_seq, user_id FROM devices
                WHERE change_seq > ?1 AND revoked_at IS NOT NULL ORDER BY change_seq LIMIT ?2
            )
            """
        let accumulator = NIOLockedValueBox(LoadAccumulator(base: nil, collectingChanges: true))
        let opened = try await self.run(sql, [.integer(.init(position.sequence)), .integer(max(1, limit) + 1)]) {
            row in accumulator.withLockedValue { $0.add(row) }
        }
        let result = accumulator.withLockedValue { $0 }
        let table = try self.finished(result)
        guard let now = table.position.map({ Self.position($0, connection: opened) }) else {
            return nil
        }
        let limit = max(1, limit)
        var users = result.changes
        var devices = result.deviceChanges
        var hasMore = false
        var sequence = now.sequence
        // Users and devices are numbered from one counter: with more waiting in either, the next read starts
        // after the lower of the two last numbers returned, and only rows up to it are taken (the rest come again).
        if users.count > limit || devices.count > limit {
            hasMore = true
            let lastUser = users.count > limit ? users[limit - 1].sequence : Int64.max
            let lastDevice = devices.count > limit ? devices[limit - 1].sequence : Int64.max
            sequence = min(lastUser, lastDevice)
            users = users.filter { $0.sequence <= sequence }
            devices = devices.filter { $0.sequence <= sequence }
        }
        return CutoffChanges(
            globalRevokedBefore: table.globalRevokedBefore,
            forceEpoch: table.forceEpoch,
            users: users.map { CutoffChanges.ChangedUser(user: $0.user, cutoffs: $0.cutoffs) },
            position: CutoffFeedPosition(feed: now.feed, sequence: sequence),
            hasMore: hasMore,
            revokedDevices: devices.map { ($0.device, $0.revoked) }
        )
    }

    /// The table an accumulator built, or the problem it found.
    private func finished(_ result: LoadAccumulator) throws -> CutoffTable {
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
        let changed = try await self.rows(sql, [.text(user), .integer(.init(at)), .integer(.init(now))], writing: true)
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
        let changed = try await self.rows(sql, [.integer(.init(at)), .integer(.init(now))], writing: true)
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
        // Every connection is closed: the guard may go (no open connection's locks go with its descriptor).
        self.closeBeforeReopening?.lastCloseGuard?.release()
        self.closeBeforeReopening = nil
    }
}

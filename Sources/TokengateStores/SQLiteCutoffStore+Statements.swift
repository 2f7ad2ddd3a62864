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
import Logging
import NIOConcurrencyHelpers
internal import SQLiteNIO
import TokengateTokens

// MARK: Running statements on a checked connection.

extension SQLiteCutoffStore {
    /// The rows of one statement. `writing`: see ``run(_:_:writing:onRow:)``.
    func rows(_ sql: String, _ binds: [SQLiteData], writing: Bool = false) async throws -> [SQLiteRow] {
        let collected = NIOLockedValueBox<[SQLiteRow]>([])
        try await self.run(sql, binds, writing: writing) { row in
            collected.withLockedValue { $0.append(row) }
        }
        return collected.withLockedValue { $0 }
    }

    /// Runs one statement on a connection whose files are still the ones at ``path``.
    ///
    /// Any SQLite failure drops the connection, so the next call reopens the file: after "disk I/O error" or
    /// "file is not a database", a fresh connection is the only way to find out whether the file is back. A
    /// cancelled caller keeps it: sqlite-nio either never started the statement or let it finish.
    ///
    /// A statement that is `writing` is checked once more after it committed: the lease's check came before it,
    /// and a `-wal` removed or a file replaced in between would have taken the commit with it, out of every other
    /// reader's sight (and out of the file at the next crash). Such a write fails
    /// (``CutoffStoreError/Code/storeUnavailable``) rather than be acknowledged; writes move cutoffs forward only,
    /// so the caller's retry is safe.
    ///
    /// - Returns: the ``openCount`` of the connection the statement ran on, which the change feed's name carries
    ///   (``changes(since:limit:)``).
    @discardableResult
    func run(
        _ sql: String,
        _ binds: [SQLiteData],
        writing: Bool = false,
        onRow: @escaping @Sendable (SQLiteRow) -> Void
    ) async throws -> UInt64 {
        let connection = try await self.lease()
        // No suspension since the lease: the current connection is the leased one, and this is its count.
        let opened = self.openCount
        do {
            try await connection.sqlite.query(sql, binds, onRow)
        } catch let error as CancellationError {
            await self.giveBack(connection.id, retiring: false)
            throw self.unavailable(error)
        } catch {
            await self.giveBack(connection.id, retiring: true)
            throw self.unavailable(error)
        }
        if writing {
            let change = connection.change(path: self.path)
            switch change {
            case .none, .written:
                break  // A checkpoint at this commit moves the file's stamp: the next lease reopens, as always.
            case .replaced, .walFilesChanged, .rewritten:
                await self.giveBack(connection.id, retiring: false)
                if case .open(let current) = self.state, current.id == connection.id {
                    await self.drop(connection, because: change)
                }
                throw CutoffStoreError(
                    code: .storeUnavailable,
                    message: "\(self.storeDescription): the database's files changed while a write ran "
                        + "(\(Self.describe(change))), so the write may be in a file no reader opens and is not "
                        + "acknowledged; retry it"
                )
            }
        }
        await self.giveBack(connection.id, retiring: false)
        return opened
    }

    /// How many times one call reopens a file that keeps being replaced before it gives up.
    private static let maximumReopens = 3

    /// A connection whose files are still the ones at ``path``, counted as in use until
    /// ``giveBack(_:retiring:)``.
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
                // One `stat` of each file per lease: the database, its -wal and its -shm.
                let change = connection.change(path: self.path)
                if change == .none {
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
                await self.drop(connection, because: change)
            case .idle:
                self.startOpening()
            }
        }
    }

    /// Stops handing out `connection` after `change`, says so, and closes it (once nothing runs on it).
    ///
    /// The close of a database's last connection checkpoints its WAL into the database file and deletes the
    /// `-wal` and `-shm` files found at their paths. For a connection whose `-wal` or `-shm` was removed or
    /// replaced, that is right only while nobody else has opened the database since: its WAL then goes into the
    /// file, and nothing is lost. Once new files are at the paths, another process has opened the database and may
    /// have committed into them (a `tokengate revoke`): the close is then guarded (``SQLiteLastCloseGuard``) so it
    /// neither copies its stale WAL over the file nor deletes the new one. Either way the next connection opens
    /// only after this one is closed (``startOpening()``), not while a statement still runs on it: as long as any
    /// connection of this process has the database open, SQLite hands a new one the same WAL index (the old
    /// `-shm`), not the one at the path.
    private func drop(_ connection: OpenConnection, because change: SQLiteFileChange) async {
        let metadata: Logger.Metadata = ["path": "\(self.path)", "change": "\(Self.describe(change))"]
        switch change {
        case .none:
            return
        case .replaced:
            self.logger.warning("cutoff database file was replaced or removed; reopening", metadata: metadata)
        case .walFilesChanged(_, let newFiles):
            let lastCloseGuard = newFiles ? SQLiteLastCloseGuard(path: self.path, identity: connection.identity) : nil
            self.logger.warning(
                "cutoff database's -wal or -shm file was removed or replaced under its connection; reopening",
                metadata: metadata.merging(
                    [
                        // Commits that no checkpoint had copied into the file yet were in the old -wal. While nobody
                        // made new files, the last connection to close the old ones (this one, or another process's
                        // that opened them before they were removed) checkpoints them into the file; once another
                        // process made new files, they cannot be merged into those and are dropped.
                        "old_wal_commits": newFiles ? "dropped" : "checkpointed"
                    ],
                    uniquingKeysWith: { $1 }
                )
            )
            self.closeBeforeReopening = (connection.id, lastCloseGuard)
        case .rewritten:
            self.logger.warning(
                "cutoff database file was written over in place by something other than SQLite; reopening",
                metadata: metadata
            )
        case .written:
            // A checkpoint (ours or another process's), or bytes written over the file that keep its shape: only a
            // new connection reads what is there now rather than its cached pages. Usually a checkpoint, so not
            // worth a warning; a damaged file fails the reopen, and that is reported.
            self.logger.debug("cutoff database file was written outside this connection; reopening", metadata: metadata)
        }
        await self.retire(connection.id)
    }

    /// How `change` reads in a log line or an error.
    static func describe(_ change: SQLiteFileChange) -> String {
        switch change {
        case .none: return "nothing changed"
        case .replaced: return "the database file was replaced or removed"
        case .walFilesChanged(let what, _): return what
        case .rewritten(let how): return "the database file was written over in place: \(how)"
        case .written: return "the database file was written in place"
        }
    }

    private func startOpening() {
        self.openingGeneration &+= 1
        let generation = self.openingGeneration
        let path = self.path
        let logger = self.logger
        let previous = self.closeBeforeReopening
        self.closeBeforeReopening = nil
        // Unstructured, so a cancelled caller cannot abandon a half-opened connection; the task keeps the actor
        // alive until it has handed the connection over.
        let task = Task {
            if let previous {
                // See ``drop(_:because:)``: not before the previous connection is closed (a statement may still run
                // on it). Then no connection of this process has the file open, and the guard's descriptor may go.
                await self.waitUntilClosed(previous.id)
                previous.lastCloseGuard?.release()
            }
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
    func retire(_ id: ObjectIdentifier) async {
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
            for waiter in self.closeWaiters.removeValue(forKey: id) ?? [] {
                waiter.resume()
            }
        }
        if self.connections.isEmpty {
            let waiters = self.drainWaiters
            self.drainWaiters = []
            for waiter in waiters {
                waiter.resume()
            }
        }
    }

    /// Returns once the connection `id` is closed (at once if it is not tracked any more).
    func waitUntilClosed(_ id: ObjectIdentifier) async {
        guard self.connections[id] != nil else {
            return
        }
        await withCheckedContinuation { continuation in
            self.closeWaiters[id, default: []].append(continuation)
        }
    }

    /// Returns once ``connections`` is empty; only after ``close()`` retired them all will it get there.
    func waitUntilAllClosed() async {
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

    nonisolated func time(_ data: SQLiteData) throws -> Int64? {
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
    /// names it apart from a lock or an outage. Neither does a file this process may not write: that is the
    /// deployment's configuration (78, and the admin API's `store_write_refused`), as a PostgreSQL role without the
    /// privilege is. Anything else SQLite says (busy, locked, I/O, a file moved while open) may pass.
    static func storeError(_ error: SQLiteError, description: String) -> CutoffStoreError {
        self.storeError(reason: error.reason, message: error.message, description: description)
    }

    static func storeError(reason: SQLiteError.Reason, message: String, description: String) -> CutoffStoreError {
        switch reason {
        case .corrupt, .notADatabase, .corruptIndex, .corruptSequenceSchema, .corruptVirtualTable:
            return CutoffStoreError(code: .invalidStoreFile, message: "\(description): the database file is damaged: \(message)")
        case .readOnly, .readonlyDirectory, .permission:
            return CutoffStoreError(
                code: .invalidStoreConfiguration,
                message: "\(description): this process may not write the database (\(message)); give the user "
                    + "tokengate runs as write access to the file, its -wal and -shm files and their directory"
            )
        default:
            return CutoffStoreError(code: .storeUnavailable, message: "\(description): \(message)")
        }
    }
}

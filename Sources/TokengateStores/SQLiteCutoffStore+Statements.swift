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

// MARK: Running statements on a checked connection.

extension SQLiteCutoffStore {
    func rows(_ sql: String, _ binds: [SQLiteData]) async throws -> [SQLiteRow] {
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
    func run(
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
                // One `stat` per lease: which file the path names now, and when it last changed.
                let stamp = FileChangeStamp(path: self.path)
                let sameFile = stamp?.file == connection.identity
                if sameFile, stamp == connection.stamp {
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

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

// MARK: Opening a connection and creating the schema.

extension SQLiteCutoffStore {
    /// Opens `path`, sets the durability pragmas, and creates or checks the schema, all before the connection
    /// is shared, so the multi-statement schema transaction cannot interleave with other statements.
    static func openConnection(path: String, create: Bool, logger: Logger) async throws -> OpenConnection {
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

        guard let stamp = FileChangeStamp(path: path), before == nil || before == stamp.file else {
            await Self.closeCompletely(sqlite, logger: logger)
            throw unavailable("the database file was replaced while it was being opened")
        }
        return OpenConnection(sqlite: sqlite, stamp: stamp)
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
struct LoadAccumulator {
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
    static func time(_ data: SQLiteData) -> Int64?? {
        switch data {
        case .null: return .some(nil)
        case .integer(let value): return .some(Int64(value))
        case .float, .text, .blob: return nil
        }
    }
}

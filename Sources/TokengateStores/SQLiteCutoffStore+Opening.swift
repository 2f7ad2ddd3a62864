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

// MARK: Opening a connection, creating the store, and checking its schema.

extension SQLiteCutoffStore {
    /// Opens `path`, checks that it is a tokengate store, and sets the durability pragmas, all before the
    /// connection is shared. A file that does not exist yet is created first when `create` allows it
    /// (``createDatabase(at:description:logger:)``); an existing file is never given a schema.
    static func openConnection(path: String, create: Bool, logger: Logger) async throws -> OpenConnection {
        let description = "sqlite \(path)"
        func unavailable(_ message: String) -> CutoffStoreError {
            CutoffStoreError(code: .storeUnavailable, message: "\(description): \(message)")
        }

        // A directory, an empty file or a file that is not a database is named as such (SQLite itself calls a
        // directory "Failed to open"), the same way `check-config` names it.
        let exists: Bool
        do {
            exists = try SQLiteDatabaseFile.check(path: path, readingHeader: false)
        } catch {
            throw CutoffStoreError(code: .invalidStoreFile, message: "\(description): \(error.reason)")
        }
        if !exists {
            guard create else {
                throw unavailable("the database file is missing")
            }
            guard Self.directoryExists(of: path) else {
                throw unavailable("the directory for the database file does not exist")
            }
            try await Self.createDatabase(at: path, description: description, logger: logger)
        }
        guard let before = FileIdentity(path: path) else {
            throw unavailable("the database file is missing")
        }

        let sqlite: SQLiteConnection
        do {
            // `mode=rw`: a file removed since the check is an error, not a new empty file SQLite creates.
            sqlite = try await SQLiteConnection.open(storage: .file(path: Self.uri(path, mode: "rw")), logger: logger)
        } catch let error as SQLiteError {
            throw Self.storeError(error, description: description)
        }
        let configured: (walFiles: SQLiteWALFiles, pageSize: Int64)
        do {
            configured = try await Self.configure(sqlite, description: description, logger: logger)
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

        guard let stamp = FileChangeStamp(path: path), before == stamp.file else {
            await Self.closeCompletely(sqlite, logger: logger)
            throw unavailable("the database file was replaced while it was being opened")
        }
        return OpenConnection(sqlite: sqlite, stamp: stamp, walFiles: configured.walFiles, pageSize: configured.pageSize)
    }

    /// Checks the schema, then sets WAL mode and `synchronous=FULL`, and records the `-wal` and `-shm` files the
    /// connection opened.
    private static func configure(
        _ sqlite: SQLiteConnection,
        description: String,
        logger: Logger
    ) async throws -> (walFiles: SQLiteWALFiles, pageSize: Int64) {
        // busy_timeout first: it replaces sqlite-nio's busy handler, which retries forever without sleeping.
        _ = try await sqlite.query("PRAGMA busy_timeout = \(Self.busyTimeoutMilliseconds)")
        // Before anything that writes: a database that is not tokengate's is refused as it is, not turned to WAL.
        let version = try await Self.checkSchema(sqlite, description: description)
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
        if version < 2 {
            try await Self.migrateToVersion2(sqlite, description: description, logger: logger)
        }
        if version < 3 {
            try await Self.migrateToVersion3(sqlite, description: description, logger: logger)
        }
        // A read in WAL mode: the connection opens (creating them if need be) the -wal and -shm files it keeps.
        let pageSize = try await sqlite.query("PRAGMA page_size").first?.columns.first?.data.integer ?? 0
        _ = try await sqlite.query("SELECT count(*) FROM global_cutoff")
        // The path SQLite resolved (symbolic links followed): its -wal and -shm files sit next to that one.
        let databases = try await sqlite.query("PRAGMA database_list")
        guard let file = databases.first(where: { $0.column("name")?.string == "main" })?.column("file")?.string,
            !file.isEmpty
        else {
            throw CutoffStoreError(code: .storeUnavailable, message: "\(description): SQLite did not name the database file")
        }
        return (SQLiteWALFiles(databasePath: file), Int64(pageSize))
    }

    /// `check-config`'s look inside an existing database file: refuses what ``open(path:createIfMissing:logger:)``
    /// would refuse (not a tokengate store, a newer schema, damage SQLite finds in the schema), changing nothing.
    ///
    /// The file is opened read-only. Without a `-wal` file next to it (no gateway has it open, and the last one
    /// that had closed cleanly), everything is in the file itself, and it is opened `immutable`, which creates no
    /// `-wal` or `-shm` either. With one, a gateway may be running: the WAL is read too, through the files it uses.
    ///
    /// - Throws: ``CutoffStoreError`` as ``open(path:createIfMissing:logger:)`` would.
    public static func checkExistingFile(path: String, logger: Logger) async throws {
        let description = "sqlite \(path)"
        let immutable = FileIdentity(path: path + "-wal") == nil
        let sqlite: SQLiteConnection
        do {
            sqlite = try await SQLiteConnection.open(
                storage: .file(path: Self.uri(path, mode: "ro", immutable: immutable)),
                logger: logger
            )
        } catch let error as SQLiteError {
            throw Self.storeError(error, description: description)
        }
        try await Self.using(sqlite, description: description, logger: logger) {
            _ = try await sqlite.query("PRAGMA busy_timeout = \(Self.busyTimeoutMilliseconds)")
            _ = try await Self.checkSchema(sqlite, description: description)
        }
    }

    /// Runs `body` on a connection opened for one job, then closes it completely, whether `body` succeeded or not;
    /// an SQLite error from `body` becomes the store's error for `description`.
    private static func using(
        _ sqlite: SQLiteConnection,
        description: String,
        logger: Logger,
        _ body: () async throws -> Void
    ) async throws {
        do {
            try await body()
        } catch {
            await Self.closeCompletely(sqlite, logger: logger)
            if let error = error as? SQLiteError {
                throw Self.storeError(error, description: description)
            }
            throw error
        }
        await Self.closeCompletely(sqlite, logger: logger)
    }

    /// Refuses a database that is not a whole tokengate store, saying what it is instead; creates nothing.
    ///
    /// Before, every open ran `CREATE TABLE IF NOT EXISTS`: a store truncated to nothing (or replaced by an empty
    /// database, or pointed at another application's file) was quietly given an empty schema, reported as
    /// recovered, and after a restart accepted every revoked token. Only a file that did not exist gets a schema
    /// (``createDatabase(at:description:logger:)``).
    /// - Returns: the schema version.
    @discardableResult
    static func checkSchema(_ sqlite: SQLiteConnection, description: String) async throws -> Int64 {
        func invalid(_ message: String) -> CutoffStoreError {
            CutoffStoreError(code: .invalidStoreFile, message: "\(description): \(message)")
        }
        let rows = try await sqlite.query("SELECT name FROM sqlite_master WHERE type = 'table'")
        let tables = Set(rows.compactMap { $0.columns.first?.data.string })
        let required = ["schema_version", "user_cutoffs", "global_cutoff"]
        let missing = required.filter { !tables.contains($0) }
        if missing.count == required.count {
            // The other tables' names are not repeated: they are another application's, and may hold anything.
            let what =
                tables.isEmpty
                ? "a SQLite database without tables"
                : "a SQLite database with \(tables.count) table\(tables.count == 1 ? "" : "s"), none of them tokengate's"
            throw invalid(
                "the file is \(what), not a tokengate cutoff store (tokengate creates its store only where no file "
                    + "is, and never adds its tables to an existing file): if it was the store, it lost its content "
                    + "(restore it from a backup); if it belongs to something else, point cutoffs.sqlite at another path"
            )
        }
        var version: Int64 = 0
        if tables.contains("schema_version") {
            let versions = try await sqlite.query("SELECT max(version) FROM schema_version")
            guard let found = versions.first?.columns.first?.data.integer else {
                throw invalid("the schema_version table holds no version: the store is damaged; restore it from a backup")
            }
            version = Int64(found)
            if version > Self.schemaVersion {
                throw CutoffStoreError(
                    code: .unsupportedSchema,
                    message: "\(description): schema version \(version) is newer than this tokengate's "
                        + "\(Self.schemaVersion); upgrade tokengate"
                )
            }
        }
        if !missing.isEmpty {
            throw invalid(
                "tokengate's table\(missing.count == 1 ? "" : "s") \(missing.joined(separator: ", ")) "
                    + "\(missing.count == 1 ? "is" : "are") missing: the store is damaged; restore it from a backup"
            )
        }
        return version
    }

    /// Brings a version 1 store to version 2 (the change feed, ``changes(since:limit:)``), in one `BEGIN IMMEDIATE`
    /// transaction that only adds: if anything fails, nothing changed, and the open fails with the error.
    ///
    /// The version is read again inside the transaction: two processes opening an old store at once both see
    /// version 1, and the second then finds the work done. Existing rows get sequence 0, which every reader has
    /// already seen whole (a feed starts with a full load), and the store gets its random id. A tokengate of
    /// version 1 writing to the store afterwards (one not yet upgraded) still numbers its rows: the triggers do it.
    static func migrateToVersion2(_ sqlite: SQLiteConnection, description: String, logger: Logger) async throws {
        _ = try await sqlite.query("BEGIN IMMEDIATE")
        do {
            let versions = try await sqlite.query("SELECT max(version) FROM schema_version")
            if let version = versions.first?.columns.first?.data.integer, Int64(version) < 2 {
                for statement in Self.version2Statements {
                    _ = try await sqlite.query(statement)
                }
                _ = try await sqlite.query("UPDATE schema_version SET version = 2")
            }
            _ = try await sqlite.query("COMMIT")
        } catch {
            _ = try? await sqlite.query("ROLLBACK")
            throw error
        }
        logger.notice("cutoff store upgraded to schema version 2 (change feed)", metadata: ["store": "\(description)"])
    }

    /// Version 2's additions to version 1: the change feed's counter and the store's id in the global row, the
    /// sequence column and its index, and the triggers that number every inserted or changed user row.
    ///
    /// The triggers run after the row's own write, inside the same transaction; their `UPDATE` of `change_seq` alone
    /// fires no trigger (the others watch the cutoff columns only).
    static let version2Statements = [
        "ALTER TABLE global_cutoff ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE global_cutoff ADD COLUMN store_id TEXT NOT NULL DEFAULT ''",
        "UPDATE global_cutoff SET store_id = lower(hex(randomblob(16))) WHERE id = 1",
        "ALTER TABLE user_cutoffs ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX user_cutoffs_by_change ON user_cutoffs (change_seq)",
        """
        CREATE TRIGGER user_cutoffs_inserted_numbered AFTER INSERT ON user_cutoffs
        BEGIN
            UPDATE global_cutoff SET change_seq = change_seq + 1 WHERE id = 1;
            UPDATE user_cutoffs SET change_seq = (SELECT change_seq FROM global_cutoff WHERE id = 1)
            WHERE user_id = NEW.user_id;
        END
        """,
        """
        CREATE TRIGGER user_cutoffs_updated_numbered
        AFTER UPDATE OF user_id, revoked_before, api_revoked_before ON user_cutoffs
        BEGIN
            UPDATE global_cutoff SET change_seq = change_seq + 1 WHERE id = 1;
            UPDATE user_cutoffs SET change_seq = (SELECT change_seq FROM global_cutoff WHERE id = 1)
            WHERE user_id = NEW.user_id;
        END
        """,
    ]

    /// Brings a version 2 store to version 3 (devices, ``recordDevice(_:)``), the way
    /// ``migrateToVersion2(_:description:logger:)`` does: one `BEGIN IMMEDIATE` transaction that only adds a table,
    /// its indexes and a trigger, after reading the version again. A tokengate of version 2 then refuses the store
    /// ("upgrade tokengate") rather than accept the tokens of devices revoked in it.
    static func migrateToVersion3(_ sqlite: SQLiteConnection, description: String, logger: Logger) async throws {
        _ = try await sqlite.query("BEGIN IMMEDIATE")
        do {
            let versions = try await sqlite.query("SELECT max(version) FROM schema_version")
            if let version = versions.first?.columns.first?.data.integer, Int64(version) < 3 {
                for statement in Self.version3Statements {
                    _ = try await sqlite.query(statement)
                }
                _ = try await sqlite.query("UPDATE schema_version SET version = 3")
            }
            _ = try await sqlite.query("COMMIT")
        } catch {
            _ = try? await sqlite.query("ROLLBACK")
            throw error
        }
        logger.notice("cutoff store upgraded to schema version 3 (devices)", metadata: ["store": "\(description)"])
    }

    /// Version 3's additions to version 2: the `devices` table (one row per installation the token page minted
    /// for), indexed by user for the listing and by `change_seq` for the feed, and the trigger that numbers a
    /// device's revocation from the global row's counter, so the change feed carries it like a user's cutoff.
    static let version3Statements = [
        """
        CREATE TABLE devices (
            device_id TEXT PRIMARY KEY NOT NULL,
            user_id TEXT NOT NULL,
            app TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            last_used_at INTEGER,
            tokens_expire_by INTEGER,
            revoked_at INTEGER,
            change_seq INTEGER NOT NULL DEFAULT 0,
            refresh_generation INTEGER,
            refresh_expires_at INTEGER
        )
        """,
        "CREATE INDEX devices_by_user ON devices (user_id)",
        "CREATE INDEX devices_by_change ON devices (change_seq)",
        """
        CREATE TRIGGER devices_revoked_numbered AFTER UPDATE OF revoked_at ON devices
        WHEN NEW.revoked_at IS NOT NULL
        BEGIN
            UPDATE global_cutoff SET change_seq = change_seq + 1 WHERE id = 1;
            UPDATE devices SET change_seq = (SELECT change_seq FROM global_cutoff WHERE id = 1)
            WHERE device_id = NEW.device_id;
        END
        """,
        """
        CREATE TRIGGER devices_deleted AFTER DELETE ON devices WHEN OLD.revoked_at IS NOT NULL
        BEGIN
            UPDATE global_cutoff SET force_epoch = force_epoch + 1 WHERE id = 1;
        END
        """,
    ]

    /// Creates a new store at `path`, where nothing is: builds it whole under a temporary name in the same
    /// directory and links it into place, so the path never names a file without the schema.
    ///
    /// Built in place, a crash between SQLite creating the file and the schema's commit would leave an empty file
    /// or a database without tables, which the next start could not tell from a store that lost its content (and
    /// refuses, ``checkSchema(_:description:)``). `link` fails if a file appeared at the path meanwhile (another
    /// gateway's first start won): that one is used. A file system without hard links gets a `rename`, which
    /// would replace such a file, so only while nothing is there. The directory is synced, so the new name
    /// survives a crash as the writes into the file do.
    private static func createDatabase(at path: String, description: String, logger: Logger) async throws {
        func unavailable(_ message: String) -> CutoffStoreError {
            CutoffStoreError(code: .storeUnavailable, message: "\(description): \(message)")
        }
        let directory = Self.directory(of: path)
        let name = path.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? path
        let temporary = "\(directory)/.\(name).new-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        defer {
            unlink(temporary)
            unlink(temporary + "-journal")
        }
        let sqlite: SQLiteConnection
        do {
            sqlite = try await SQLiteConnection.open(storage: .file(path: temporary), logger: logger)
        } catch let error as SQLiteError {
            throw Self.storeError(error, description: description)
        }
        try await Self.using(sqlite, description: description, logger: logger) {
            // A rollback journal while it is built: the commit writes and syncs the file itself, so the file
            // linked into place is the whole store without a -wal beside it. The first open turns on WAL mode.
            _ = try await sqlite.query("PRAGMA journal_mode = DELETE")
            _ = try await sqlite.query("PRAGMA synchronous = FULL")
            _ = try await sqlite.query("BEGIN IMMEDIATE")
            do {
                try await Self.createSchema(sqlite)
                _ = try await sqlite.query("COMMIT")
            } catch {
                _ = try? await sqlite.query("ROLLBACK")
                throw error
            }
        }

        if link(temporary, path) != 0 {
            let error = errno
            if error == EEXIST {
                return  // Another process created the store first; the caller opens that one.
            }
            guard error == EPERM || error == ENOTSUP || error == EOPNOTSUPP || error == ENOSYS,
                FileIdentity(path: path) == nil, rename(temporary, path) == 0
            else {
                throw unavailable("cannot put the new database file in place: \(String(cString: strerror(error)))")
            }
        }
        syncDirectory(directory)
        logger.notice("created a new, empty cutoff store", metadata: ["path": "\(path)"])
    }

    /// The tables, triggers and rows of a new store (schema version 3); run in one transaction.
    private static func createSchema(_ sqlite: SQLiteConnection) async throws {
        let statements = [
            "CREATE TABLE schema_version (version INTEGER NOT NULL)",
            """
            CREATE TABLE user_cutoffs (
                user_id TEXT PRIMARY KEY NOT NULL,
                revoked_before INTEGER,
                api_revoked_before INTEGER,
                updated_at INTEGER NOT NULL
            )
            """,
            """
            CREATE TABLE global_cutoff (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                revoked_before INTEGER,
                force_epoch INTEGER NOT NULL DEFAULT 0,
                updated_at INTEGER NOT NULL
            )
            """,
            """
            CREATE TRIGGER user_cutoffs_moved_backward
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
            CREATE TRIGGER user_cutoffs_deleted AFTER DELETE ON user_cutoffs
            BEGIN
                UPDATE global_cutoff SET force_epoch = force_epoch + 1 WHERE id = 1;
            END
            """,
            """
            CREATE TRIGGER global_cutoff_moved_backward
            AFTER UPDATE OF revoked_before ON global_cutoff
            WHEN OLD.revoked_before IS NOT NULL
              AND (NEW.revoked_before IS NULL OR NEW.revoked_before < OLD.revoked_before)
            BEGIN
                UPDATE global_cutoff SET force_epoch = force_epoch + 1 WHERE id = 1;
            END
            """,
            "INSERT INTO global_cutoff (id, revoked_before, force_epoch, updated_at) VALUES (1, NULL, 0, ?1)",
            "INSERT INTO schema_version (version) VALUES (?1)",
        ]
        // Version 1's tables, then version 2's additions: the one path every store takes, old or new.
        for (index, statement) in statements.enumerated() {
            let binds: [SQLiteData]
            switch index {
            case statements.count - 2: binds = [.integer(.init(Self.unixNow()))]
            case statements.count - 1: binds = [.integer(1)]
            default: binds = []
            }
            _ = try await sqlite.query(statement, binds)
        }
        for statement in Self.version2Statements + Self.version3Statements {
            _ = try await sqlite.query(statement)
        }
        _ = try await sqlite.query("UPDATE schema_version SET version = 3")
    }

    /// `path` as an SQLite URI filename with the given `mode` (`rw`: open an existing file, never create one;
    /// `ro`: read only), every byte but unreserved ones and `/` percent-encoded, so that `?`, `#` and `%` in a
    /// path stay part of it.
    static func uri(_ path: String, mode: String, immutable: Bool = false) -> String {
        var encoded = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "/"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "_"), UInt8(ascii: "~"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                encoded.unicodeScalars.append("%")
                encoded.unicodeScalars.append(hex[Int(byte >> 4)])
                encoded.unicodeScalars.append(hex[Int(byte & 0x0F)])
            }
        }
        // An absolute path after an empty authority (`file:///…`), so one starting with `//` is not read as a host.
        let prefix = path.hasPrefix("/") ? "file://" : "file:"
        return prefix + encoded + "?mode=" + mode + (immutable ? "&immutable=1" : "")
    }

    /// The directory `path` is in: what comes before its last `/`, `/` itself, or `.` for a bare name.
    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else {
            return "."
        }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func directoryExists(of path: String) -> Bool {
        var info = stat()
        return stat(Self.directory(of: path), &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}

/// Makes a new name in `directory` durable; a failure is not fatal (the name is there, only maybe not yet on disk),
/// so it is not reported. A free function: inside the store's extension, `open` and `close` name its own methods.
private func syncDirectory(_ directory: String) {
    let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { return }
    _ = fsync(fd)
    close(fd)
}

/// Collects the rows of a full load (merged forward onto a base table as they arrive, ``CutoffTable/mergeForward(_:_:)``)
/// or of a read of the change feed; fed on the thread-pool thread, read after the query finished.
///
/// Rows are `(kind, text, first, second, sequence, owner)`: kind 0 is the global row `(0, store_id, revoked_before,
/// force_epoch, change_seq, NULL)`, kind 1 a user `(1, user_id, revoked_before, api_revoked_before, change_seq or
/// NULL, NULL)`, kind 2 a revoked device `(2, device_id, revoked_at, tokens_expire_by, change_seq, user_id)`, kind 3 the number of
/// users `(3, NULL, count, NULL, NULL, NULL)` (first loads only, a size hint).
struct LoadAccumulator {
    var table: CutoffTable
    var sawGlobalRow = false
    var problem: String?
    /// With `collectingChanges`, the user rows in the order read, instead of merged into ``table``.
    var changes: [(user: CutoffUserKey, cutoffs: UserCutoffs, sequence: Int64)] = []
    /// With `collectingChanges`, the revoked devices in the order read.
    var deviceChanges: [(device: DeviceID, revoked: RevokedDevice, sequence: Int64)] = []
    let collectingChanges: Bool
    /// A first load's users (no base to merge onto), placed in batches (``CutoffUserMapBuilder``); moved into
    /// ``table`` by ``finishBuilding()``.
    var builder: CutoffUserMapBuilder?

    init(base: CutoffTable?, collectingChanges: Bool = false) {
        self.table = base ?? CutoffTable()
        self.collectingChanges = collectingChanges
        self.builder = base == nil && !collectingChanges ? CutoffUserMapBuilder() : nil
    }

    /// Moves the users built so far into ``table``.
    mutating func finishBuilding() {
        if var builder = self.builder.take() {
            self.table.users = builder.finish()
        }
    }

    mutating func add(_ row: SQLiteRow) {
        let columns = row.columns
        guard self.problem == nil, columns.count == 6, let kind = columns[0].data.integer else {
            self.problem = self.problem ?? "a row has an unexpected shape"
            return
        }
        guard let first = Self.time(columns[2].data), let second = Self.time(columns[3].data),
            let sequence = Self.time(columns[4].data)
        else {
            self.problem = "a cutoff column holds a value that is not an integer"
            return
        }
        if kind == 3 {
            // The number of users, ahead of them in a first load: a size hint only (the rows decide).
            if let users = first, self.builder != nil {
                self.builder = CutoffUserMapBuilder(expectedCount: Int(clamping: users))
            }
        } else if kind == 0 {
            self.sawGlobalRow = true
            self.table.globalRevokedBefore = CutoffTable.later(self.table.globalRevokedBefore, first)
            self.table.forceEpoch = second ?? 0
            if let id = columns[1].data.string, !id.isEmpty, let sequence {
                self.table.position = CutoffFeedPosition(feed: "sqlite:\(id)", sequence: sequence)
            } else {
                self.problem = "the global_cutoff row has no store_id or change_seq"
            }
        } else if kind == 2 {
            guard let text = columns[1].data.string, let device = DeviceID(text), let user = columns[5].data.string,
                let revokedAt = first
            else {
                self.problem = "a devices row has a malformed device_id, user_id or revoked_at"
                return
            }
            let revoked = RevokedDevice(user: CutoffUserKey(user), revokedAt: revokedAt, tokensExpireBy: second)
            if self.collectingChanges {
                self.deviceChanges.append((device, revoked, sequence ?? 0))
            } else {
                self.table.revokedDevices[device] = revoked
            }
        } else if let user = columns[1].data.string {
            // The table keys users by bytes (``CutoffUserKey``), like the store's primary key, so ids that differ
            // only in Unicode normalization stay two users. A repeated id cannot come from the table; if one
            // did, the later of each cutoff is kept (fail closed), the rule that merges onto the base table too.
            let cutoffs = UserCutoffs(revokedBefore: first, apiRevokedBefore: second)
            if self.collectingChanges {
                self.changes.append((CutoffUserKey(user), cutoffs, sequence ?? 0))
            } else if self.builder != nil {
                self.builder?.add(CutoffUserKey(user), cutoffs)
            } else {
                self.table.mergeForward(CutoffUserKey(user), cutoffs)
            }
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

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Which files a database's `-wal` and `-shm` paths name (``FileIdentity``), as one connection opened them.
///
/// A connection keeps both open for as long as it lives: it writes its commits into that `-wal` and finds other
/// connections' commits through that `-shm` (the WAL index). If either is removed or replaced under it (a cleanup
/// job, a restore that copies only the database file), the connection goes on with the unlinked files: its
/// commits land in a `-wal` no other reader opens (and vanish at a crash), and commits others make in the new
/// `-wal` never reach it (a `tokengate revoke` that exits 0 is not enforced). SQLite does not notice.
///
/// In normal use neither identity changes while a connection is open: SQLite creates the two files when the first
/// connection opens the database and deletes them only when the last one closes (that close takes an exclusive
/// lock first, which an open connection's shared lock prevents). Checkpoints, `wal_checkpoint(TRUNCATE)` and WAL
/// restarts rewrite or truncate the same files. So another process opening, writing and closing the database (the
/// CLI, an operator's `sqlite3`) changes nothing here, and a change is always something done to the files.
struct SQLiteWALFiles: Hashable, Sendable {
    let walPath: String
    let shmPath: String
    let wal: FileIdentity?
    let shm: FileIdentity?

    /// The files next to `databasePath` (the database's path as SQLite resolved it), one `stat` each.
    init(databasePath: String) {
        self.walPath = databasePath + "-wal"
        self.shmPath = databasePath + "-shm"
        self.wal = FileIdentity(path: self.walPath)
        self.shm = FileIdentity(path: self.shmPath)
    }

    /// What the same paths name now.
    func now() -> SQLiteWALFiles {
        SQLiteWALFiles(walPath: self.walPath, shmPath: self.shmPath)
    }

    private init(walPath: String, shmPath: String) {
        self.walPath = walPath
        self.shmPath = shmPath
        self.wal = FileIdentity(path: walPath)
        self.shm = FileIdentity(path: shmPath)
    }

    /// How `current` differs from these files ("the -wal file was removed"), or `nil` when both are the same.
    func change(to current: SQLiteWALFiles) -> String? {
        let changes = [("-wal", self.wal, current.wal), ("-shm", self.shm, current.shm)].compactMap {
            (suffix, recorded, now) -> String? in
            switch (recorded, now) {
            case (let recorded, let now) where recorded == now: return nil
            case (.some, .none): return "the \(suffix) file was removed"
            case (.none, .some): return "a \(suffix) file appeared"
            default: return "the \(suffix) file was replaced"
            }
        }
        return changes.isEmpty ? nil : changes.joined(separator: " and ")
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// What happened to a SQLite store's files since its connection opened them, as one lease of the connection sees
/// it (``SQLiteCutoffStore``): decides whether the connection may still be used, how it is dropped, and how loudly.
enum SQLiteFileChange: Equatable, Sendable {
    /// Nothing: the connection is still the one to use.
    case none
    /// The path names another file, or none (moved, removed, replaced by a rename).
    case replaced
    /// The `-wal` or `-shm` file is not the one the connection has open (``SQLiteWALFiles``); says which, and
    /// whether a new file is at either path (another connection opened the database since, and may have
    /// committed into it).
    case walFilesChanged(String, newFiles: Bool)
    /// The database file was written in place by something that is not SQLite (a truncation, a tool writing
    /// over it); says how it shows.
    case rewritten(String)
    /// The database file was written in place the way SQLite itself writes it: most likely a checkpoint (this
    /// connection's, at a commit that filled the WAL, or another process's), else bytes written over it that
    /// keep its shape, which only reading it again can judge.
    case written

    /// Compares what the connection recorded with what the paths name now.
    ///
    /// A checkpoint copies whole pages from the WAL into the database file and never shrinks it (only a `VACUUM`
    /// does, which tokengate never runs). So a file that shrank, or whose size is no longer a whole number of
    /// pages, was written by something else: that is worth a warning. Anything else is reported as ``written``: a
    /// warning there would fire at every checkpoint. Only `stat` is used: opening and closing the database file in
    /// this process would drop the POSIX locks its SQLite connection holds on it (see ``SQLiteLastCloseGuard``).
    ///
    /// - Parameters:
    ///   - recorded: the database file's stamp when the connection was opened.
    ///   - recordedWAL: its `-wal` and `-shm` files then.
    ///   - pageSize: the database's page size, in bytes.
    ///   - current: the stamp of what the path names now (`nil`: nothing).
    ///   - currentWAL: what the `-wal` and `-shm` paths name now.
    static func between(
        recorded: FileChangeStamp,
        recordedWAL: SQLiteWALFiles,
        pageSize: Int64,
        current: FileChangeStamp?,
        currentWAL: SQLiteWALFiles
    ) -> SQLiteFileChange {
        guard let current, current.file == recorded.file else {
            return .replaced
        }
        if let change = recordedWAL.change(to: currentWAL) {
            let newFiles = (currentWAL.wal != nil && currentWAL.wal != recordedWAL.wal)
                || (currentWAL.shm != nil && currentWAL.shm != recordedWAL.shm)
            return .walFilesChanged(change, newFiles: newFiles)
        }
        if current == recorded {
            return .none
        }
        if current.size < recorded.size {
            return .rewritten("it shrank from \(recorded.size) to \(current.size) bytes")
        }
        if pageSize > 0, current.size % pageSize != 0 {
            return .rewritten("its size, \(current.size) bytes, is not a whole number of \(pageSize)-byte pages")
        }
        return .written
    }
}

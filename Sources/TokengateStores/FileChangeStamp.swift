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

/// Which file a path names (``FileIdentity``) and when and how its content last changed, as the file system tells
/// it (size, modification and change times to the nanosecond), from one `stat`: a different stamp on the same file
/// means someone wrote to it.
///
/// The SQLite store needs it because of WAL mode: a connection keeps the database pages it has read and trusts
/// them for as long as the WAL index says no commit happened, so bytes written over the database file by anything
/// but SQLite (a `cp` or `dd` onto it, a restore, a failing disk's repair tool) stay invisible to it: reads go on
/// answering from the cache, and the damage shows only at the next restart. A stamp that moved is the hint to
/// read the file afresh. The database file itself changes only at checkpoints otherwise (commits go to the WAL),
/// so the extra reopen is rare.
struct FileChangeStamp: Hashable, Sendable {
    /// The file the stamp is of: the SQLite store checks it before the times, to tell a replaced file (a warning)
    /// from one written over (a checkpoint, usually).
    let file: FileIdentity
    let size: Int64
    let modifiedSeconds: Int64
    let modifiedNanoseconds: Int64
    let changedSeconds: Int64
    let changedNanoseconds: Int64

    /// The stamp of the file `path` leads to (symbolic links followed, as ``FileIdentity/init(path:)``); `nil` when
    /// nothing is there.
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return nil
        }
        self.file = FileIdentity(info)
        self.size = Int64(info.st_size)
        #if canImport(Darwin)
        self.modifiedSeconds = Int64(info.st_mtimespec.tv_sec)
        self.modifiedNanoseconds = Int64(info.st_mtimespec.tv_nsec)
        self.changedSeconds = Int64(info.st_ctimespec.tv_sec)
        self.changedNanoseconds = Int64(info.st_ctimespec.tv_nsec)
        #else
        self.modifiedSeconds = Int64(info.st_mtim.tv_sec)
        self.modifiedNanoseconds = Int64(info.st_mtim.tv_nsec)
        self.changedSeconds = Int64(info.st_ctim.tv_sec)
        self.changedNanoseconds = Int64(info.st_ctim.tv_nsec)
        #endif
    }
}

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
import NIOConcurrencyHelpers

/// Keeps SQLite from taking the close of one connection for the database's last one, while the guard is held.
///
/// The close of a database's last connection checkpoints that connection's WAL into the database file and then
/// deletes whatever `-wal` and `-shm` files are at their paths. SQLite tells "last" by whether the close can take
/// an exclusive lock on the database file. When the `-wal` and `-shm` files were removed under a connection and
/// another process has since opened the database, created new ones and committed into them (a `tokengate revoke`
/// after a cleanup job), that close would copy the connection's stale pages over the file and delete the new `-wal`
/// with the revocation in it. With the guard held, the close cannot take the lock, so it does neither: the new files
/// stay, and the next connection reads them.
///
/// The guard is a read lock on the byte range SQLite's exclusive lock takes (`SHARED_FIRST`, 510 bytes from
/// `PENDING_BYTE` + 2), taken as an open file description lock (Linux `F_OFD_SETLK`): unlike a POSIX record lock,
/// which this process's own SQLite connections would not conflict with, it conflicts with every other lock on the
/// file, this process's included. Released with ``release()``, which closes its descriptor, so it must be released
/// only once no connection of this process has the file open (closing any descriptor of a file drops all of the
/// process's POSIX locks on it, SQLite's included). Elsewhere than Linux there is no such lock and no guard.
final class SQLiteLastCloseGuard: Sendable {
    /// The descriptor holding the lock; `nil` once released.
    private let descriptor: NIOLockedValueBox<Int32?>

    /// `fcntl.h`'s `F_OFD_SETLK` on Linux (not exported by the C module without `_GNU_SOURCE`).
    private static let openFileDescriptionSetLock: Int32 = 37
    /// SQLite's `PENDING_BYTE` (0x40000000) + 2 and `SHARED_SIZE`: where its shared and exclusive locks lie.
    private static let sharedFirst: Int64 = 0x4000_0002
    private static let sharedSize: Int64 = 510

    /// Takes the guard on the database file at `path`, if that is still the file `identity` names; `nil` where
    /// there is no such lock (or the file cannot be opened).
    ///
    /// The descriptor is kept until ``release()`` even when no lock was taken (another file at the path): closing
    /// it now could drop the POSIX locks this process's connection still holds on the file.
    init?(path: String, identity: FileIdentity) {
        #if os(Linux)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            return nil
        }
        self.descriptor = NIOLockedValueBox(fd)
        var info = stat()
        var lock = flock()
        lock.l_type = Int16(F_RDLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(Self.sharedFirst)
        lock.l_len = off_t(Self.sharedSize)
        lock.l_pid = 0
        if fstat(fd, &info) == 0, FileIdentity(info) == identity {
            // Granted at once: the connection being closed holds a shared lock there, which a read lock shares, and
            // which keeps every other process from the exclusive lock that alone could refuse it.
            _ = fcntl(fd, Self.openFileDescriptionSetLock, &lock)
        }
        #else
        return nil
        #endif
    }

    /// Drops the lock and closes the descriptor. Call only once no connection of this process has the file open.
    func release() {
        guard let fd = self.descriptor.withLockedValue({ value -> Int32? in
            defer { value = nil }
            return value
        }) else {
            return
        }
        close(fd)  // Drops the lock with the open file description.
    }

    deinit {
        self.release()
    }
}

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

/// Which file a path names (device and inode), to notice a file that was replaced or removed under a holder
/// that keeps using it: the SQLite store's open connections, the snapshot cache's writer.
public struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    /// The file `path` leads to, symbolic links followed (a database reached through a link is that
    /// database); `nil` when nothing is there.
    public init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return nil
        }
        self.init(info)
    }

    /// The regular file at `path` itself, a symbolic link not followed; `nil` for anything else (nothing there,
    /// a directory, a link): for a file this process writes and expects to find as it left it.
    public init?(regularFileAt path: String) {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            return nil
        }
        self.init(info)
    }

    /// From a `stat` already made (``FileChangeStamp`` makes one for both).
    init(_ info: stat) {
        self.device = UInt64(info.st_dev)
        self.inode = UInt64(info.st_ino)
    }
}

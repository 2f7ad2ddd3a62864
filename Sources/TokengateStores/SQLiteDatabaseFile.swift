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

/// What is at a SQLite store's path before anything opens it: nothing yet (the store may create it), or a file
/// SQLite can open as a database, or something it cannot.
///
/// One check, so `serve`, `tokengate revoke` and `check-config` say the same thing about the same path: before,
/// `check-config` passed a directory or a text file that `serve` then refused, and `serve` named a directory
/// only as "Failed to open to SQLite database". Read-only: nothing is created or changed.
public enum SQLiteDatabaseFile {
    /// The first 16 bytes of every SQLite 3 database file.
    static let header: [UInt8] = Array("SQLite format 3".utf8) + [0]

    /// Whether a file is at `path`: `true` when a SQLite database file is there, `false` when nothing is.
    ///
    /// An empty file is refused, although SQLite would open it as a new database: the store creates its file
    /// whole (``SQLiteCutoffStore/open(path:createIfMissing:logger:)`` builds it under another name and links
    /// it into place), so an empty file at the path was never a tokengate store that works, and most often is
    /// one that lost its content (truncated by a restore, a full disk, a tool writing it in place). Taking it
    /// for a new store would create an empty schema there and accept every token revoked before.
    ///
    /// - Throws: ``SQLiteDatabaseFileError`` when something is there that SQLite cannot open as a database (a
    ///   directory, a device, a file that does not start with the SQLite header), is empty, or cannot be read.
    /// - Parameter readingHeader: whether to read the file's first bytes too. The store itself passes `false`
    ///   (`stat` only) and lets SQLite say `file is not a database`: opening and closing the file would drop the
    ///   POSIX locks its connections in this process hold on it (see ``SQLiteLastCloseGuard``).
    public static func check(path: String, readingHeader: Bool = true) throws(SQLiteDatabaseFileError) -> Bool {
        func problem(_ reason: String) -> SQLiteDatabaseFileError {
            SQLiteDatabaseFileError(path: path, reason: reason)
        }
        var info = stat()
        guard stat(path, &info) == 0 else {
            let error = errno
            if error == ENOENT {
                return false
            }
            throw problem("cannot be examined: \(String(cString: strerror(error)))")
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            break
        case S_IFDIR:
            throw problem("is a directory, not a SQLite database file")
        default:
            throw problem("is not a regular file, so not a SQLite database file")
        }
        guard info.st_size > 0 else {
            throw problem(Self.emptyFileReason)
        }
        guard readingHeader else {
            return true
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw problem("cannot be read: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: Self.header.count)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count >= 0 else {
            throw problem("cannot be read: \(String(cString: strerror(errno)))")
        }
        guard count > 0 else {
            throw problem(Self.emptyFileReason)
        }
        guard count == Self.header.count && bytes == Self.header else {
            throw problem("is not a SQLite database (it does not start with the SQLite file header)")
        }
        return true
    }

    /// Why an empty file is refused, and what to do about it: the sentence completes "PATH ".
    static let emptyFileReason =
        "is empty (0 bytes), so it is not a tokengate cutoff store: if it was the store, it lost its content "
        + "(restore it from a backup); if it is new, remove it and `tokengate serve` creates the store there at "
        + "its first start"
}

/// Why ``SQLiteDatabaseFile/check(path:)`` refused a path. ``reason`` completes a sentence about the path
/// ("is a directory, not a SQLite database file").
public struct SQLiteDatabaseFileError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let reason: String

    public var description: String {
        "\(self.path) \(self.reason)"
    }
}

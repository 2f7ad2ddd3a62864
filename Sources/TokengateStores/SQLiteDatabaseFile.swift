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

    /// Whether a file is at `path`: `true` when a database file (or an empty file, which SQLite makes one) is
    /// there, `false` when nothing is.
    ///
    /// - Throws: ``SQLiteDatabaseFileError`` when something is there that SQLite cannot open as a database (a
    ///   directory, a device, a file that does not start with the SQLite header), or when it cannot be read.
    public static func check(path: String) throws(SQLiteDatabaseFileError) -> Bool {
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
        // An empty file is what SQLite itself leaves after a create that wrote nothing yet; it opens as a database.
        guard count == 0 || (count == Self.header.count && bytes == Self.header) else {
            throw problem("is not a SQLite database (it does not start with the SQLite file header)")
        }
        return true
    }
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

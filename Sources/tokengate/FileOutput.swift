//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Small file helpers for the CLI: reading inputs with clear errors, writing key files with a mode.
enum FileOutput {
    /// Writes straight to standard output (no buffer), so a line shows up even when output is a pipe.
    static func standardOutput(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    static func standardError(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// The bytes of `path`, or a failure (exit 66, `EX_NOINPUT`) that names the file and the reason.
    static func read(_ path: String, what: String) -> [UInt8] {
        guard FileManager.default.fileExists(atPath: path) else {
            fail("cannot read \(what) '\(path)': no such file", status: .noInput)
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            fail("cannot read \(what) '\(path)': permission denied or not a regular file", status: .noInput)
        }
        return Array(data)
    }

    /// Writes `contents` to `path` with `mode`, creating it (or replacing it) atomically enough for key
    /// files: the file is created with the mode already set, so a private key is never world-readable,
    /// not even for a moment.
    static func write(_ contents: String, to path: String, mode: mode_t) throws {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_EXCL, mode)
        guard fd >= 0 else { throw FileOutputError(path: path, reason: String(cString: strerror(errno))) }
        let bytes = Array(contents.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        guard written == bytes.count, synced == 0 else {
            unlink(temporary)
            throw FileOutputError(path: path, reason: "short write")
        }
        fchmodat(AT_FDCWD, temporary, mode, 0)
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw FileOutputError(path: path, reason: String(cString: strerror(errno)))
        }
    }
}

struct FileOutputError: Error, CustomStringConvertible {
    var path: String
    var reason: String
    var description: String { "cannot write '\(self.path)': \(self.reason)" }
}

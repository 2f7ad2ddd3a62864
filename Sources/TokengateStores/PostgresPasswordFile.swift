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

/// The file that holds the PostgreSQL password (`cutoffs.password_file`), read again at every connection attempt.
///
/// Why not once at start: passwords are rotated by replacing the file (a Kubernetes secret is swapped by the
/// kubelet, a vault agent rewrites it). A password read once keeps failing every reconnect after the rotation, and
/// a store that cannot reconnect stops taking new revocations until the gateway restarts. Reading the file when a
/// connection is made costs one small read per new connection; established connections keep their session (the
/// server does not end them when a password changes).
///
/// A file that cannot be read makes that connection attempt fail (the store stays unavailable and the last
/// snapshot stays enforced, as in any outage); the reason is logged at error level once per distinct reason, naming
/// the file, never the content.
struct PostgresPasswordFile: Sendable {
    /// A password file larger than this is not a password file (a mounted directory's neighbour, a key bundle).
    static let maxBytes = 64 * 1024

    let path: String
    private let logger: Logger
    /// The reason last logged, so a file that stays unreadable does not log at every reconnect (every second).
    private let reported = NIOLockedValueBox<String?>(nil)

    init(path: String, logger: Logger) {
        self.path = path
        self.logger = logger
    }

    /// Why the file could not be used; names the file, never its content.
    struct Failure: Error, CustomStringConvertible {
        var path: String
        var reason: String

        var description: String {
            "cannot read the password file \(self.path) (\(self.reason))"
        }
    }

    /// The password now in the file, without its trailing line breaks (`echo secret > file` adds one).
    ///
    /// - Throws: ``Failure`` when the file cannot be opened or read, is larger than ``maxBytes``, is not UTF-8,
    ///   or holds a NUL byte (libpq takes C strings, which would end there).
    func password() throws(Failure) -> String {
        func failure(_ reason: String) -> Failure {
            Failure(path: self.path, reason: reason)
        }
        let descriptor = open(self.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw failure(String(cString: strerror(errno)))
        }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure(String(cString: strerror(errno)))
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            guard bytes.count <= Self.maxBytes else {
                throw failure("larger than \(Self.maxBytes / 1024) KiB, not a password")
            }
        }
        guard var text = String(validating: bytes, as: UTF8.self) else {
            throw failure("not UTF-8 text")
        }
        // "\r\n" is one Character in Swift, so it is named too (a file written on Windows).
        while let last = text.last, last == "\n" || last == "\r" || last == "\r\n" { text.removeLast() }
        guard !text.utf8.contains(0) else {
            throw failure("contains a NUL byte")
        }
        return text
    }

    /// ``password()`` for a connection attempt: a failure is logged (once per distinct reason) and becomes the
    /// ``CutoffStoreError/Code/storeUnavailable`` that fails the attempt.
    func passwordForConnection(store description: String) throws(CutoffStoreError) -> String {
        do {
            let password = try self.password()
            self.reported.withLockedValue { $0 = nil }
            return password
        } catch {
            let isNew = self.reported.withLockedValue { last in
                defer { last = error.reason }
                return last != error.reason
            }
            if isNew {
                self.logger.error(
                    "cutoff store: cannot read the PostgreSQL password file; connections fail until it can be read",
                    metadata: ["store": "\(description)", "password_file": "\(self.path)", "reason": "\(error.reason)"]
                )
            }
            throw CutoffStoreError(code: .storeUnavailable, message: "\(description): \(error)")
        }
    }
}

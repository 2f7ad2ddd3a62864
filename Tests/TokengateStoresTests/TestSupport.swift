//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOConcurrencyHelpers
import Testing
import TokengateTokens

@testable import TokengateStores

/// A fresh directory under the system temp dir, removed when the test is done.
struct TemporaryDirectory: ~Copyable {
    let path: String

    init() throws {
        let path = NSTemporaryDirectory() + "tokengate-stores-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        self.path = path
    }

    func file(_ name: String) -> String {
        self.path + "/" + name
    }

    deinit {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}

/// Stands in for the gateway's lock-free `CutoffSnapshotHolder` (being written in TokengateTokens): records
/// every published snapshot in order.
final class PublishedSnapshots: Sendable {
    private let box = NIOLockedValueBox<[CutoffSnapshot]>([])

    var publish: @Sendable (CutoffSnapshot) -> Void {
        { snapshot in self.box.withLockedValue { $0.append(snapshot) } }
    }

    var all: [CutoffSnapshot] {
        self.box.withLockedValue { $0 }
    }

    var latest: CutoffSnapshot? {
        self.box.withLockedValue { $0.last }
    }
}

/// A settable clock in UNIX seconds.
final class ManualClock: Sendable {
    private let box: NIOLockedValueBox<Int64>

    init(_ now: Int64) {
        self.box = NIOLockedValueBox(now)
    }

    var now: Int64 {
        get { self.box.withLockedValue { $0 } }
        set { self.box.withLockedValue { $0 = newValue } }
    }

    func advance(by seconds: Int64) {
        self.box.withLockedValue { $0 += seconds }
    }

    var function: @Sendable () -> Int64 {
        { self.now }
    }
}

/// Runs SQL against a database file with Python's own sqlite3 module: an independent reader and writer (a
/// second process, a different SQLite build), as an operator's tooling or the CLI would be.
@discardableResult
func pythonSQLite(_ database: String, _ sql: String) throws -> String {
    let script = """
        import sqlite3, sys
        c = sqlite3.connect(sys.argv[1], isolation_level=None)
        c.execute("PRAGMA busy_timeout = 5000")
        for row in c.execute(sys.argv[2]):
            print("|".join("NULL" if v is None else str(v) for v in row))
        c.close()
        """
    return try runProcess("/usr/bin/env", ["python3", "-c", script, database, sql])
}

@discardableResult
func runProcess(_ executable: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    let errorData = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw ProcessFailure(status: process.terminationStatus, stderr: String(decoding: errorData, as: UTF8.self))
    }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

struct ProcessFailure: Error, CustomStringConvertible {
    let status: Int32
    let stderr: String

    var description: String {
        "exit status \(self.status): \(self.stderr)"
    }
}

func writeFile(_ path: String, _ text: String) throws {
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

/// Expects `body` to throw a ``CutoffStoreError`` with `code`; returns it for further checks.
@discardableResult
func expectStoreError<T>(
    _ code: CutoffStoreError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> T
) async -> CutoffStoreError? {
    do {
        _ = try await body()
        Issue.record("expected \(code), but nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as CutoffStoreError {
        #expect(error.code == code, "got \(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Moves an SQLite database with its `-wal` and `-shm` files (which hold committed data until a checkpoint).
func moveDatabase(from source: String, to destination: String) throws {
    for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: source + suffix) {
        try FileManager.default.moveItem(atPath: source + suffix, toPath: destination + suffix)
    }
}


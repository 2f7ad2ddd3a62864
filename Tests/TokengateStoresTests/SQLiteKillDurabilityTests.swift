//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateStores

/// `kill -9` durability: a child process writes through ``SQLiteCutoffStore`` and prints an acknowledgement
/// after each write returns; the parent kills it with SIGKILL mid-stream and checks that every acknowledged
/// write is in the file, read both by a reopened store and by Python's independent sqlite3.
///
/// The child is this same test binary, re-run with `--filter` on ``childWriter()`` and the database path in
/// the environment; without that variable the child test is disabled, so a normal run skips it.
@Suite("SQLite kill -9 durability", .serialized)
struct SQLiteKillDurabilityTests {
    static let childEnvironmentKey = "TOKENGATE_KILL9_CHILD_DB"

    @Test(
        "child: write and acknowledge until killed",
        .enabled(if: ProcessInfo.processInfo.environment[Self.childEnvironmentKey] != nil)
    )
    func childWriter() async throws {
        let path = try #require(ProcessInfo.processInfo.environment[Self.childEnvironmentKey])
        let store = try await SQLiteCutoffStore.open(path: path)
        for index in 1...100_000 {
            try await store.passwordChanged(user: "user-\(index)", at: Int64(index))
            // Only after apply() returned: this line is the acknowledgement the parent trusts.
            FileHandle.standardOutput.write(Data("ACK \(index)\n".utf8))
        }
        try await store.close()
    }

    @Test("every write acknowledged before SIGKILL is in the file afterwards")
    func killedWriterLosesNothingAcknowledged() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")

        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.testBinaryPath())
        process.arguments = ["--testing-library", "swift-testing", "--filter", "childWriter"]
        var environment = ProcessInfo.processInfo.environment
        environment[Self.childEnvironmentKey] = path
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()

        // Read acknowledgements until enough writes went through, then kill without warning.
        let reader = output.fileHandleForReading
        var buffered = ""
        var lastAck = 0
        let deadline = ContinuousClock.now + .seconds(60)
        while lastAck < 200, ContinuousClock.now < deadline, process.isRunning {
            let chunk = reader.availableData
            if chunk.isEmpty {
                break
            }
            buffered += String(decoding: chunk, as: UTF8.self)
            for line in buffered.split(separator: "\n", omittingEmptySubsequences: true) where line.hasPrefix("ACK ") {
                lastAck = max(lastAck, Int(line.dropFirst(4)) ?? 0)
            }
            if let lastNewline = buffered.lastIndex(of: "\n") {
                buffered = String(buffered[buffered.index(after: lastNewline)...])
            }
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        // Acknowledgements written after our last read, before the kill, count too.
        buffered += String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
        for line in buffered.split(separator: "\n") where line.hasPrefix("ACK ") {
            lastAck = max(lastAck, Int(line.dropFirst(4)) ?? 0)
        }
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(process.terminationStatus == SIGKILL)
        try #require(lastAck >= 200, "the child acknowledged only \(lastAck) writes")

        // An independent reader first (it also recovers the WAL), then our own store.
        let pythonCount = try pythonSQLite(path, "SELECT count(*) FROM user_cutoffs WHERE revoked_before = CAST(substr(user_id, 6) AS INTEGER)")
        #expect(Int(pythonCount)! >= lastAck)
        let store = try await SQLiteCutoffStore.open(path: path)
        let table = try await store.load()
        try await store.close()
        var missing: [Int] = []
        for index in 1...lastAck where table.users[CutoffUserKey("user-\(index)")]?.revokedBefore != Int64(index) {
            missing.append(index)
        }
        #expect(missing.isEmpty, "acknowledged writes lost after kill -9: \(missing.prefix(10))")
    }

    /// The running test executable (the `.xctest` binary on Linux).
    static func testBinaryPath() throws -> String {
        try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    }
}

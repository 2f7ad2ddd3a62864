//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// Runs a real program (curl, openssl, python3) from a test and collects what it printed.
///
/// Output goes to temporary files rather than pipes: Foundation's `FileHandle.readDataToEndOfFile()`
/// traps on `EINTR`, which other tests running in the same process (signals to child processes) make
/// happen, and a pipe that fills up would also block a child that prints a lot.
public enum ChildProcess {
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    public static func run(_ executable: String, _ arguments: [String], input: Data? = nil) throws -> Result {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("tokengate-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let inputURL = directory.appendingPathComponent("stdin")
        let outputURL = directory.appendingPathComponent("stdout")
        let errorURL = directory.appendingPathComponent("stderr")
        try (input ?? Data()).write(to: inputURL)
        try Data().write(to: outputURL)
        try Data().write(to: errorURL)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = try FileHandle(forReadingFrom: inputURL)
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        try process.run()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            stdout: (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOf: errorURL, encoding: .utf8)) ?? ""
        )
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengateTestSupport

/// Runs the real `curl` and returns what it got.
struct Curl {
    struct Result {
        var status: Int
        var headers: [(String, String)]
        var body: String
        var exitCode: Int32
        var stderr: String

        func header(_ name: String) -> String? {
            self.headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    /// `curl -sS` with `arguments`, trusting `caFile`; the response head and body are captured separately.
    static func run(_ arguments: [String], caFile: String?, timeout: Int = 10) throws -> Result {
        let directory = NSTemporaryDirectory() + "curl-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var all = ["-sS", "--max-time", String(timeout), "-D", directory + "/headers", "-o", directory + "/body", "-w", "%{http_code}"]
        if let caFile { all += ["--cacert", caFile] }
        all += arguments
        let (exitCode, stdout, stderr) = try Self.process("/usr/bin/curl", all)
        let headerText = (try? String(contentsOfFile: directory + "/headers", encoding: .utf8)) ?? ""
        var headers: [(String, String)] = []
        for line in headerText.split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let body = (try? String(contentsOfFile: directory + "/body", encoding: .utf8)) ?? ""
        return Result(status: Int(stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0, headers: headers, body: body, exitCode: exitCode, stderr: stderr)
    }

    /// Runs `path` with `arguments`, optionally feeding `input`; returns exit code, stdout, stderr.
    static func process(_ path: String, _ arguments: [String], input: Data? = nil) throws -> (Int32, String, String) {
        let result = try ChildProcess.run(path, arguments, input: input)
        return (result.status, result.stdout, result.stderr)
    }
}

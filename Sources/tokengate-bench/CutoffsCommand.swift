//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Foundation

/// `tokengate-bench cutoffs`: the cutoffs that make the bench's revoked tokens revoked, as tokengate's JSON
/// cutoff file and, for the HAProxy comparison, as a map file (`USER CUTOFF` per line).
///
/// Every bench user gets an entry, not only the revoked ones: valid users get a cutoff older than their
/// tokens, so each request's cutoff lookup finds an entry and compares, as it would on a real site.
struct CutoffsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cutoffs",
        abstract: "Write the cutoffs for the bench users (tokengate JSON and optionally an HAProxy map)."
    )

    @Option(help: "Users per kind (as given to run/mint).")
    var users = 5_000

    @Option(help: "The tokengate cutoffs JSON file to write.")
    var out: String

    @Option(name: .customLong("haproxy-map"), help: "Also write an HAProxy map: user id, space, cutoff.")
    var haproxyMap: String?

    func run() throws {
        guard (1...TokenPool.maxUsers).contains(self.users) else {
            throw ValidationError("--users must be 1 through \(TokenPool.maxUsers)")
        }
        let now = Int64(Date().timeIntervalSince1970)
        var entries: [(String, Int64)] = []
        for kind in BenchTokenKind.allCases {
            let cutoff =
                kind == .revoked ? BenchTimeline.revokedCutoff(now: now) : BenchTimeline.validUserCutoff(now: now)
            for number in 0..<self.users {
                entries.append((kind.subject(number), cutoff))
            }
        }
        // Subjects are ASCII letters, digits, '-' and '_': no JSON escaping needed.
        let json = "{\"users\": {\n" + entries.map { "  \"\($0.0)\": {\"revoked_before\": \($0.1)}" }
            .joined(separator: ",\n") + "\n}}\n"
        do {
            try BenchFiles.writePrivate(json, to: self.out)
            if let map = self.haproxyMap {
                try BenchFiles.writePrivate(entries.map { "\($0.0) \($0.1)" }.joined(separator: "\n") + "\n", to: map)
            }
        } catch let error as BenchError {
            FileHandle.standardError.write(Data("tokengate-bench: \(error.message)\n".utf8))
            throw ExitCode(2)
        }
    }
}

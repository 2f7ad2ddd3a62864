//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Foundation

/// `tokengate-bench mint`: distinct tokens, one per line, for other load tools (bench-compare.sh feeds them to
/// wrk's Lua script). Same subjects and times as `run`.
struct MintCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mint",
        abstract: "Write one token per user and line (for wrk and h2load)."
    )

    @Option(name: .customLong("key"), help: "A private JWK Set (repeatable; keys used in turn).")
    var keys: [String] = []

    @Option(help: "How many distinct users.")
    var users = 5_000

    @Option(help: "Which kind: api, session, revoked, bad_signature or form (form tokens are plain api tokens).")
    var kind = "api"

    @Option(help: "Output file (written with mode 0600).")
    var out: String

    func run() throws {
        do {
            guard let kind = BenchTokenKind(rawValue: self.kind) else {
                throw BenchError("invalid_kind", "--kind: unknown kind '\(self.kind)'")
            }
            guard (1...TokenPool.maxUsers).contains(self.users) else {
                throw BenchError("invalid_users", "--users must be 1 through \(TokenPool.maxUsers)")
            }
            let signers = try BenchSigners(paths: self.keys)
            let now = Int64(Date().timeIntervalSince1970)
            var text = ""
            for number in 0..<self.users {
                text += try TokenPool.token(kind: kind, number: number, signers: signers, now: now) + "\n"
            }
            try BenchFiles.writePrivate(text, to: self.out)
        } catch let error as BenchError {
            FileHandle.standardError.write(Data("tokengate-bench: \(error.message)\n".utf8))
            throw ExitCode(2)
        }
    }
}

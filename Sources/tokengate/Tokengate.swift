//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Foundation
import TokengateGateway
import TokengateVersion

/// The `tokengate` command: the gateway and the tools around it.
@main
struct Tokengate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokengate",
        abstract: "An edge reverse proxy that lets a website's mobile apps in with tokens, and nobody else.",
        version: TokengateVersion.string,
        subcommands: [
            Serve.self, Dev.self, CheckConfig.self, Keygen.self, TokenCommand.self, Revoke.self, VersionCommand.self,
        ]
    )

    /// Runs the command with the exit statuses of ``ExitStatus``: a usage error is 64 (ArgumentParser's own
    /// `EX_USAGE`), an invalid token 1, and what a command reports through ``fail(_:status:)`` its own status.
    static func main() async {
        // Log lines are written by a thread of their own (``LogLineWriter``): what is queued goes out before
        // the process ends, on every way out (`fail` flushes too).
        defer { LogLineWriter.standardOutput.flush() }
        do {
            var command = try Self.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            LogLineWriter.standardOutput.flush()
            let code = Self.exitCode(for: error)
            // Help, a version request, an `ExitCode` a command threw (`token verify`'s 1), and every usage error
            // ArgumentParser found (64): printed and ended as ArgumentParser does.
            if code == .success || code == .validationFailure || error is ExitCode {
                Self.exit(withError: error)
            }
            // Anything else that escaped a command is a failure no command anticipated, never "invalid token" (1)
            // nor one a script would take for a configuration to fix.
            FileOutput.standardError("tokengate: \(error)\n")
            Foundation.exit(ExitStatus.software.rawValue)
        }
    }
}

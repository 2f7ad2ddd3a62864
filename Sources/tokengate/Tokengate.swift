//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import TokengateGateway
import Foundation

/// The `tokengate` command: the gateway and the tools around it.
@main
struct Tokengate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokengate",
        abstract: "An edge reverse proxy that lets a website's mobile apps in with tokens, and nobody else.",
        subcommands: [
            Serve.self, Dev.self, CheckConfig.self, Keygen.self, TokenCommand.self, Revoke.self,
        ]
    )

    /// Runs the command, mapping argument errors to exit status 2 (ArgumentParser's default is 64) so
    /// every usage error and bad input file exits the same way; `revoke`'s exit 64 (see ``Revoke/Status``).
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
            if code == .success {
                Self.exit(withError: error)
            }
            if code == .validationFailure {
                FileOutput.standardError(Self.fullMessage(for: error) + "\n")
                // `revoke` is run by scripts that must tell a usage error from a store to retry: its statuses are
                // sysexits-style (``Revoke/Status``). The subcommand is known only by name when parsing failed.
                let revoke = CommandLine.arguments.dropFirst().first == Revoke.name
                Foundation.exit(revoke ? Revoke.Status.usage.rawValue : ExitStatus.usage)
            }
            if error is ExitCode {
                Self.exit(withError: error)
            }
            // Anything else that escaped a command is an operational failure, never "invalid token" (1).
            FileOutput.standardError("tokengate: \(error)\n")
            Foundation.exit(ExitStatus.usage)
        }
    }
}

/// Exit codes shared by the subcommands: 0 success, 1 an invalid token (for `token verify`), 2 a usage
/// error or an unreadable/invalid input file.
enum ExitStatus {
    static let invalidToken: Int32 = 1
    static let usage: Int32 = 2
}

/// Prints `message` to standard error and exits with `status`, 2 unless given: the way every subcommand reports a
/// bad input file or argument, so scripts can tell it from an invalid token (status 1). `revoke` gives its own
/// statuses (``Revoke/Status``).
func fail(_ message: String, status: Int32 = ExitStatus.usage) -> Never {
    LogLineWriter.standardOutput.flush()
    FileOutput.standardError("tokengate: \(message)\n")
    exit(status)
}

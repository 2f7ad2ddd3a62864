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
        discussion: """
            Environment: TOKENGATE_LISTEN, TOKENGATE_ADMIN_ADDRESS, TOKENGATE_ADMIN_SECRET_FILE, \
            TOKENGATE_LOG_LEVEL, TOKENGATE_CUTOFFS_SQLITE, TOKENGATE_CUTOFFS_FILE, TOKENGATE_CUTOFFS_POSTGRES, \
            TOKENGATE_CUTOFFS_PASSWORD_FILE and TOKENGATE_SIGNING_KEY_FILE replace the values of the configuration \
            file they name (docs/configuration.md, "Environment variables").

            Exit status: 0 success; 1 an invalid token (token verify); 64 usage; 65 bad data; 66 an input file \
            missing; 69 unavailable (a store that cannot be used as it is, libraries too old); 70 internal error; \
            71 a listener address in use; 73 an output file; 75 a store that did not answer; 78 a configuration \
            to fix.

            Files: /etc/tokengate/tokengate.yaml, the configuration the systemd unit serves; /var/lib/tokengate, \
            the state directory (the SQLite cutoff store).
            """,
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

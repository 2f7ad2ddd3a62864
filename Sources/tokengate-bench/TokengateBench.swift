//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser

/// `tokengate-bench`: the gateway's load generator, and the tools bench-compare.sh uses.
@main
struct TokengateBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokengate-bench",
        abstract: "Load-test a tokengate gateway over TLS on loopback with many distinct tokens.",
        subcommands: [RunCommand.self, IdleCommand.self, MintCommand.self, CutoffsCommand.self],
        defaultSubcommand: RunCommand.self
    )
}

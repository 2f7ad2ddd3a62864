//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import TokengateConfig

/// `tokengate serve --config FILE`: the gateway.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the gateway with a configuration file.")

    @Option(help: "The configuration file (YAML).")
    var config: String

    @Option(name: .customLong("log-format"), help: "json, console, or auto (console on a terminal); over log.format.")
    var logFormat: LogFormat?

    func run() async throws {
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(path: self.config)
        } catch {
            fail("\(error)", status: .configuration)
        }
        try await GatewayLauncher(configuration: configuration, logFormat: self.logFormat).run { _, _ in }
    }
}

extension LogFormat: ExpressibleByArgument {}

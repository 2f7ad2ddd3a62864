//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import TokengateConfig
import TokengateGateway

/// `tokengate check-config FILE`: everything `serve` checks before it binds a port.
struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration file, its keys and certificates, without starting anything."
    )

    @Argument(help: "The configuration file (YAML).")
    var file: String

    func run() throws {
        // Run where the gateway will: a host whose libraries are too old would refuse to serve.
        do {
            try LibraryVersionCheck.verify()
        } catch {
            fail("\(error)", status: .unavailable)
        }
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(path: self.file)
        } catch {
            fail("\(error)", status: .configuration)
        }
        do {
            try GatewayServer.check(configuration)
        } catch {
            fail("\(self.file): \(error)", status: .configuration)
        }
        // A SQLite file that does not exist yet passes: `serve` creates it at its first start. One that is not a
        // database is the data's fault, not the configuration's: 69, as `serve` and `revoke` say of it.
        do {
            try CutoffStoreFactory.check(configuration.cutoffs)
        } catch {
            fail("\(self.file): cutoff store: \(error)", status: ExitStatus(forStoreError: error))
        }
        for warning in GatewayServer.warnings(for: configuration) {
            FileOutput.standardError("tokengate: \(self.file): warning: \(warning)\n")
        }
        print(
            "\(self.file): ok (\(configuration.listeners.count) listeners, \(configuration.routes.count) routes, "
                + "\(configuration.upstreams.count) upstreams)"
        )
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Logging
import TokengateConfig
import TokengateAdmin
import TokengateGateway
import TokengateStores

/// `tokengate check-config FILE`: everything `serve` checks before it binds a port; with `--connect`, also what
/// only a PostgreSQL cutoff store's server can say.
struct CheckConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration file, its keys and certificates, without starting anything."
    )

    @Argument(help: "The configuration file (YAML).")
    var file: String

    @Flag(
        help: """
            Also connect to a PostgreSQL cutoff store: the login, TLS, the tables and the role's privileges, as \
            `serve` needs them; and fetch every jwks_url and discovery key set once. Nothing is created or written.
            """
    )
    var connect = false

    @Flag(
        help: """
            Also print the configuration as the gateway will run it (defaults filled in, TOKENGATE_… environment \
            variables applied, paths resolved), secrets elided.
            """
    )
    var print = false

    func run() async throws {
        // Run where the gateway will: a host whose libraries are too old would refuse to serve.
        do {
            try LibraryVersionCheck.verify()
        } catch {
            fail("\(error)", status: .unavailable)
        }
        let configuration: GatewayConfiguration
        do {
            // Every problem the file has, one line each: a file with three mistakes takes one run, not three.
            configuration = try GatewayConfiguration.loadReportingEveryProblem(path: self.file)
        } catch {
            fail("\(error.errors.map(\.description).joined(separator: "\ntokengate: "))", status: .configuration)
        }
        do {
            try GatewayServer.check(configuration)
            try AdminServer.check(configuration)
        } catch {
            fail("\(self.file): \(error)", status: .configuration)
        }
        // A SQLite file that does not exist yet passes: `serve` creates it at its first start. One that is not a
        // tokengate store is the data's fault, not the configuration's: 69, as `serve` and `revoke` say of it.
        do {
            try await CutoffStoreFactory.check(configuration.cutoffs, logger: Logger(label: "tokengate.check-config"))
        } catch {
            fail("\(self.file): cutoff store: \(error)", status: ExitStatus(forStoreError: error))
        }
        var warnings = GatewayServer.warnings(for: configuration)
        if self.connect {
            let keySets = await GatewayServer.probeKeySets(configuration)
            for line in keySets.lines {
                Swift.print("\(self.file): key set \(line)")
            }
            if !keySets.ok {
                fail("\(self.file): a fetched key set has no usable key", status: .unavailable)
            }
            do {
                let logger = Logger(label: "tokengate.check-config")
                if let report = try await CutoffStoreFactory.probe(configuration.cutoffs, logger: logger) {
                    Swift.print(
                        "\(self.file): cutoff store: connected; "
                            + (report.createsTables
                                ? "tokengate's tables do not exist yet, and the role may create them at the first start"
                                : "its tables are there and readable")
                    )
                    warnings += report.missingWritePrivileges.map {
                        "cutoff store: the role may not write everything `revoke` and the admin API write (the "
                            + "gateway serves without it): \($0)"
                    }
                }
            } catch {
                fail("\(self.file): cutoff store: \(error)", status: ExitStatus(forStoreError: error))
            }
        }
        for warning in warnings {
            FileOutput.standardError("tokengate: \(self.file): warning: \(warning)\n")
        }
        if self.print {
            Swift.print(EffectiveConfigurationText.render(configuration), terminator: "")
        }
        Swift.print(
            "\(self.file): ok (\(configuration.listeners.count) listeners, \(configuration.routes.count) routes, "
                + "\(configuration.upstreams.count) upstreams)"
        )
    }
}

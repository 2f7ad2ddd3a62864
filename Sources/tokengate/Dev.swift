//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import TokengateConfig
import TokengateDemo
import TokengateGateway
import TokengateStores
import TokengateTLS
import TokengateTokens

/// `tokengate dev`: the embedded default for a first run. Generates what a first run needs where the
/// configuration reads it (a self-signed certificate and a signing key, in `.dev/` for the shipped
/// `Config/dev.yaml`; never committed: ``DevFiles``), starts a demo backend, runs the gateway, and prints a
/// working `curl` line with a freshly minted token.
struct Dev: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the gateway on its embedded default: dev certificate and keys, SQLite cutoffs, a demo backend."
    )

    @Option(help: "The configuration file.")
    var config = "Config/dev.yaml"

    @Option(name: .customLong("backend-port"), help: "The demo site's port (the configuration's upstream).")
    var backendPort = 9000

    @Option(name: .customLong("log-format"), help: "json, console, or auto (console on a terminal); over log.format.")
    var logFormat: LogFormat?

    func run() async throws {
        // The files a first run lacks are generated where the configuration will read them, so the
        // configuration is read twice: once for their paths (without file checks), once to run.
        let files: DevFiles
        do {
            files = try DevFiles(configuration: try GatewayConfiguration.load(path: self.config, checkFiles: false))
        } catch {
            fail("\(error)", status: .configuration)
        }
        do {
            try files.prepare()
        } catch {
            fail("cannot generate the dev files: \(error)", status: .cannotCreate)
        }
        let configuration: GatewayConfiguration
        let signer: TokenSigner
        do {
            configuration = try GatewayConfiguration.load(path: self.config)
            signer = try TokenSigner(privateJWKS: Array(try Data(contentsOf: URL(fileURLWithPath: files.privateJWKS.path))))
        } catch {
            fail("\(error)", status: .configuration)
        }
        let backendGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let backendPort = self.backendPort
        let site = NIOLockedValueBox<DemoRP?>(nil)
        try await GatewayLauncher(configuration: configuration, logFormat: self.logFormat).run { addresses, sync in
            // The demo site: a login form, the site's session cookie, "who am I", and the password change and
            // "disable mobile apps" buttons, which write their cutoffs through the gateway's own store.
            let rp: DemoRP
            do {
                rp = try await DemoRP.start(port: backendPort, group: backendGroup, signer: signer) { change in
                    switch change.kind {
                    case .passwordChanged: _ = try? await sync.passwordChanged(user: change.user, at: change.at)
                    case .mobileAppsDisabled: _ = try? await sync.disableMobileApps(user: change.user, at: change.at)
                    }
                }
            } catch {
                fail("cannot start the demo site on 127.0.0.1:\(backendPort): \(error)", status: .osError)
            }
            site.withLockedValue { $0 = rp }
            let token = try signer.mint(
                TokenClaims(
                    subject: "demo-user",
                    issuedAt: Int64(Date().timeIntervalSince1970),
                    apiOnly: true,
                    expiresAt: nil,
                    notBefore: nil,
                    issuer: nil,
                    audience: nil
                )
            )
            FileOutput.standardOutput(
                Self.banner(configuration: configuration, addresses: addresses, files: files, sitePort: rp.port, token: token)
            )
        }
        try? await site.withLockedValue { $0 }?.stop()
        try? await backendGroup.shutdownGracefully()
    }

    /// What `dev` prints once it serves: `curl` lines for the listeners the configuration really has, with
    /// the ports they are bound to (`addresses` is in configuration order), so the lines work with any
    /// configuration passed by `--config`, not only the shipped one. The plain-HTTP line is left out when
    /// there is no plain listener.
    static func banner(
        configuration: GatewayConfiguration,
        addresses: [SocketAddress],
        files: DevFiles,
        sitePort: Int,
        token: String
    ) -> String {
        func boundPort(_ index: Int) -> Int {
            (index < addresses.count ? addresses[index].port : nil) ?? configuration.listeners[index].address.port
        }
        // The dev certificate names localhost, so the https lines use it whatever address the listener has.
        let tlsPort = configuration.listeners.indices.first { configuration.listeners[$0].tls != nil }.map(boundPort) ?? 8443
        var plainLine = ""
        var plainWhat = ""
        if let index = configuration.listeners.indices.first(where: { configuration.listeners[$0].tls == nil }),
            case .plain(let mode) = configuration.listeners[index].mode
        {
            let address = configuration.listeners[index].address
            // A wildcard address is reached through loopback.
            let host =
                address.isWildcard
                ? (address.isIPv6 ? "[::1]" : "127.0.0.1")
                : (address.isIPv6 ? "[\(address.host)]" : address.host)
            plainLine = "\n  curl http://\(host):\(boundPort(index))/api/hello"
            plainWhat = mode == .redirect ? ", or over plain HTTP (308 to https)" : ", or over plain HTTP (426)"
        }
        let certificate = DevFiles.display(files.certificate)
        return """

            tokengate is running (demo site on 127.0.0.1:\(sitePort)). Try an API call with a fresh api token:

              curl --cacert \(certificate) -H "Authorization: Bearer \(token)" https://localhost:\(tlsPort)/api/hello

            and without one (401)\(plainWhat):

              curl --cacert \(certificate) https://localhost:\(tlsPort)/api/hello\(plainLine)

            The token page, as a mobile app's web view would open it (log in as alice with any password):

              https://localhost:\(tlsPort)/token

            More tokens: .build/release/tokengate token mint --key \(DevFiles.display(files.privateJWKS)) --sub alice --api-only
            Ctrl-C stops the gateway.


            """
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig
import TokengateTokens

@Suite("Example configurations")
struct ExampleConfigTests {
    @Test("Config/dev.yaml parses into the embedded default")
    func devConfiguration() throws {
        let path = configDirectory + "/dev.yaml"
        let config = try GatewayConfiguration.load(path: path, checkFiles: false)
        #expect(config.sourcePath == path)
        #expect(config.listeners.count == 2)
        #expect(config.listeners[0].address == SocketAddressSpec(host: "127.0.0.1", port: 8443))
        let tls = try #require(config.listeners[0].tls)
        #expect(tls.certificates[0].cert.original == "../.dev/tls/cert.pem")
        #expect(tls.certificates[0].cert.path == configDirectory + "/../.dev/tls/cert.pem")
        #expect(tls.certificates[0].key.path == configDirectory + "/../.dev/tls/key.pem")
        #expect(tls.handshakeTimeout == .seconds(10))
        #expect(config.listeners[1].mode == .plain(.reject))
        #expect(config.listeners[1].redirectPort == nil)
        #expect(
            config.keys == [
                KeySourceConfiguration(
                    source: .jwks(
                        ConfigPath(
                            path: configDirectory + "/../.dev/keys/public.jwks",
                            original: "../.dev/keys/public.jwks"
                        )
                    )
                )
            ]
        )
        #expect(
            config.signingKey?.source
                == .jwks(
                    ConfigPath(
                        path: configDirectory + "/../.dev/keys/private.jwks",
                        original: "../.dev/keys/private.jwks"
                    )
                )
        )
        #expect(
            config.cutoffs
                == .sqlite(
                    ConfigPath(
                        path: configDirectory + "/../.dev/cutoffs.db",
                        original: "../.dev/cutoffs.db"
                    )
                )
        )
        #expect(config.upstreams["demo"]?.targets == [UpstreamTarget(scheme: .http, host: "127.0.0.1", port: 9000)])
        #expect(config.upstreams["demo"]?.tls == nil)
        #expect(config.admin?.address == SocketAddressSpec(host: "127.0.0.1", port: 9901))

        #expect(config.routes.count == 4)
        let api = config.routes[0]
        #expect(api.pathPrefix == "/api/")
        #expect(api.accept == .apiOnly)
        #expect(api.sources == [.authorization, .cookie("auth_token"), .form("access_token")])
        #expect(api.forwardToken == .strip)
        let account = config.routes[1]
        #expect(account.accept == .sessionOnly)
        #expect(account.sources == [.cookie("session")])
        guard case .tokenPage(let page) = config.routes[2].kind else {
            Issue.record("routes[2] should be a token page")
            return
        }
        #expect(page.login == .sessionCookie("session"))
        #expect(page.loginURL == "/login")
        #expect(page.cookieName == "auth_token")
        #expect(config.routes[2].upstream == nil)
        #expect(config.routes[2].tokenPage == page)
        #expect(config.routes[0].tokenPage == nil)
        #expect(config.routes[3].accept == .none)
        #expect(config.routes[3].sources.isEmpty)
        #expect(config.realm == "tokengate-dev")
        #expect(config.log.level == .info, "dev logs what a first run needs to see, not debug")
        #expect(config.log.format == .auto, "console lines on the terminal a first run is on")
        #expect(config.tokens == TokenSettings())
        #expect(config.limits == LimitsConfiguration())
    }

    @Test("Config/tokengate.yaml parses with every documented section")
    func productionConfiguration() throws {
        let config = try GatewayConfiguration.load(path: configDirectory + "/tokengate.yaml", checkFiles: false)
        #expect(config.listeners.count == 2)
        #expect(config.listeners[0].tls?.certificates.count == 2)
        #expect(config.listeners[0].tls?.certificates[1].serverNames == ["www.example.com", "example.com"])
        #expect(config.listeners[1].mode == .plain(.redirect))
        #expect(config.listeners[1].redirectPort == 443)
        #expect(config.admin?.secretFile?.path == "/etc/tokengate/admin.secret")
        #expect(config.log.format == .json)
        #expect(config.keys.count == 2)
        #expect(
            config.keys[1]
                == KeySourceConfiguration(
                    source: .pem(
                        ConfigPath(
                            path: "/etc/tokengate/keys/rsa-2024.pub.pem",
                            original: "/etc/tokengate/keys/rsa-2024.pub.pem"
                        )
                    ),
                    algorithm: .rs256,
                    keyID: "rsa-2024"
                )
        )
        #expect(config.signingKey?.keyID == "ed-2025")
        #expect(config.tokens.issuer == "https://www.example.com")
        #expect(config.tokens.algorithms == [.edDSA, .es256, .rs256])
        guard case .postgres(let postgres) = config.cutoffs else {
            Issue.record("expected a postgres store")
            return
        }
        #expect(postgres.host == "db.internal.example.com")
        #expect(postgres.port == 5432)
        #expect(postgres.user == "tokengate")
        #expect(postgres.database == "tokengate")
        #expect(postgres.tlsMode == .verifyFull)
        #expect(
            postgres.rpTable
                == RPTableConfiguration(
                    table: "public.users",
                    userColumn: "id",
                    passwordChangedColumn: "password_changed_at",
                    apiDisabledColumn: "mobile_apps_disabled_at"
                )
        )
        #expect(config.upstreams["api"]?.targets.count == 2)
        #expect(config.upstreams["api"]?.keepAlive == true)
        #expect(config.upstreams["web"]?.tls?.caFile?.path == "/etc/tokengate/tls/internal-ca.pem")
        #expect(config.routes[0].host == "api.example.com")
        #expect(config.routes[0].bodyLimit == 1024 * 1024)
        #expect(config.routes[1].accept == .apiAndSession)
        #expect(config.trustedProxies == [CIDR("10.0.0.0/24")!])
        #expect(config.hsts.headerValue == "max-age=31536000; includeSubDomains")
        #expect(config.realm == "example.com")
    }

    @Test("dev.yaml with file checks on names the first missing file precisely")
    func devConfigurationMissingFiles() throws {
        // A copy in a fresh directory, so a generated .dev/ in this checkout cannot hide the error.
        let directory = try TemporaryDirectory()
        try directory.write(
            "Config/dev.yaml",
            contents: try String(contentsOfFile: configDirectory + "/dev.yaml", encoding: .utf8)
        )
        let path = directory.path + "/Config/dev.yaml"
        let error = #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: path, checkFiles: true)
        }
        #expect(error?.code == .fileNotFound)
        #expect(
            error?.description
                == "\(path):11:19: listen[0].tls.certificates[0].cert: file ../.dev/tls/cert.pem "
                + "(\(directory.path)/Config/../.dev/tls/cert.pem) does not exist"
        )
    }
}

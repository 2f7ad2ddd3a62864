//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateConfig

/// `GatewayConfiguration.warnings`: valid configurations that leave a protected backend open.
@Suite struct ConfigurationWarningTests {
    private func configuration(routes: String) throws -> GatewayConfiguration {
        try parse(
            """
            listen:
              - address: 127.0.0.1:8443
                tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
            keys: [ { jwks: public.jwks } ]
            cutoffs: { file: cutoffs.json }
            upstreams:
              api: { targets: [ "http://127.0.0.1:9000" ] }
              site: { targets: [ "http://127.0.0.1:9001" ] }
            routes:
            \(routes)
            """
        )
    }

    @Test func aHostlessPublicCatchAllOnAProtectedUpstreamIsReported() throws {
        let config = try self.configuration(routes: """
              - { host: api.example.com, path_prefix: /v1/, upstream: api, accept: [api] }
              - { path_prefix: /, upstream: api, accept: none }
            """)
        #expect(config.warnings.count == 1)
        let warning = try #require(config.warnings.first)
        #expect(warning.contains("routes[1]") && warning.contains("routes[0]") && warning.contains("api.example.com"), "\(warning)")
        #expect(warning.contains("any other Host"))
    }

    @Test func safeShapesAreNotReported() throws {
        // The public route is bound to a host, or has its own upstream, or does not cover the protected path.
        for routes in [
            """
              - { host: api.example.com, path_prefix: /v1/, upstream: api, accept: [api] }
              - { host: api.example.com, path_prefix: /, upstream: api, accept: none }
            """,
            """
              - { host: api.example.com, path_prefix: /v1/, upstream: api, accept: [api] }
              - { path_prefix: /, upstream: site, accept: none }
            """,
            """
              - { host: api.example.com, path_prefix: /v1/, upstream: api, accept: [api] }
              - { path_prefix: /health, upstream: api, accept: none }
            """,
            """
              - { path_prefix: /v1/, upstream: api, accept: [api] }
              - { path_prefix: /, upstream: api, accept: none }
            """,
        ] {
            let config = try self.configuration(routes: routes)
            #expect(config.warnings.isEmpty, "\(routes): \(config.warnings)")
        }
    }

    @Test func theShippedConfigurationsHaveNoWarnings() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Config").path
        for name in ["dev.yaml", "tokengate.yaml"] {
            let config = try GatewayConfiguration.load(path: directory + "/" + name, checkFiles: false)
            #expect(config.warnings.isEmpty, "\(name): \(config.warnings)")
        }
    }
}

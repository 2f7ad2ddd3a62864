//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing

@testable import TokengateConfig

/// A route's `websocket`: `true`, `false`, or the block with its limits and the origins for cookie upgrades.
@Suite struct WebSocketConfigurationTests {
    private func yaml(_ websocket: String) -> String {
        """
        listen:
          - address: 127.0.0.1:8443
            tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
        keys: [ { jwks: keys.jwks } ]
        cutoffs: { sqlite: cutoffs.db }
        upstreams:
          api: { targets: [ "http://127.0.0.1:9000" ] }
        routes:
          - { path_prefix: /live/, upstream: api, accept: [api], websocket: \(websocket) }
        """
    }

    @Test func theSwitchAndTheBlockDecode() throws {
        #expect(try parse(self.yaml("true")).routes[0].webSocket == WebSocketRouteConfiguration())
        #expect(try parse(self.yaml("false")).routes[0].webSocket == nil)
        let block = try parse(
            self.yaml("{ allowed_origins: [ \"https://App.example\" ], idle_timeout: 30s, max_lifetime: 1h, max_tunnels: 50 }"))
        #expect(
            block.routes[0].webSocket
                == WebSocketRouteConfiguration(
                    allowedOrigins: ["https://app.example"], idleTimeout: .seconds(30), maxLifetime: .seconds(3600),
                    maxTunnels: 50))
    }

    @Test func badValuesAreRefused() throws {
        for bad in [
            "yes", "{ allowed_origins: [ \"https://app.example/path\" ] }", "{ allowed_origins: [ \"*\" ] }",
            "{ idle_timeout: 0s }", "{ max_tunnels: 0 }", "{ origins: [ \"https://app.example\" ] }",
            "{ allowed_origins: [ \"https://a.example\", \"https://A.example\" ] }",
        ] {
            #expect(parseError(self.yaml(bad)) != nil, "\(bad) was accepted")
        }
    }
}

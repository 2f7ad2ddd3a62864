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

    @Test func aBodyOnlyRouteBehindForwardAuthIsReported() throws {
        func warnings(_ route: String, forwardAuth: Bool = true) throws -> [String] {
            let listener = forwardAuth
                ? "  - { address: 127.0.0.1:9181, forward_auth: { headers: nginx, trusted_peers: [ 127.0.0.1/32 ] } }\n" : ""
            return try parse(
                "listen:\n  - address: 127.0.0.1:8443\n    tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }\n"
                    + listener + "keys: [ { jwks: public.jwks } ]\ncutoffs: { file: cutoffs.json }\n"
                    + "upstreams:\n  api: { targets: [ \"http://127.0.0.1:9000\" ] }\nroutes:\n  " + route + "\n"
            ).warnings
        }
        let bodyOnly = try warnings("- { path_prefix: /v1/, upstream: api, accept: [api], sources: [ \"form:access_token\", \"json:token\" ] }")
        #expect(bodyOnly.count == 1)
        let warning = try #require(bodyOnly.first)
        #expect(warning.contains("routes[0]") && warning.contains("listen[1]") && warning.contains("401"), "\(warning)")
        #expect(warning.contains("form:access_token, json:token"), "\(warning)")
        // A header source beside the body's, or no forward-auth listener, is fine.
        #expect(try warnings("- { path_prefix: /v1/, upstream: api, accept: [api], sources: [ authorization, \"form:access_token\" ] }").isEmpty)
        #expect(try warnings("- { path_prefix: /v1/, upstream: api, accept: [api], sources: [ \"form:access_token\" ] }", forwardAuth: false).isEmpty)
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

    /// RFC 8252 §8.6: a custom-scheme app whose confirmation is turned off lets any app that claims the scheme
    /// start a login the browser completes without asking. Allowed, but said; an https app needs no confirmation.
    @Test func aCustomSchemeAppWithoutConfirmationIsReported() throws {
        func warnings(_ apps: String) throws -> [String] {
            try parse(
                """
                listen:
                  - address: 127.0.0.1:8443
                    tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
                keys: [ { jwks: public.jwks } ]
                signing_key: { jwks: private.jwks }
                cutoffs: { file: cutoffs.json }
                routes:
                  - path_prefix: /token
                    kind: token_page
                    login: { session_cookie: session, login_url: /login }
                    apps: [ \(apps) ]
                """
            ).warnings
        }
        let reported = try warnings(
            "{ name: ios, callback: \"myapp://token\" }, { name: mdm, callback: \"corp.app://t\", confirm: false }")
        #expect(reported.count == 1, "\(reported)")
        let warning = try #require(reported.first)
        #expect(warning.hasPrefix("routes[0].apps[1] (mdm): confirm is false on the custom-scheme callback corp.app://t"))
        #expect(warning.contains("RFC 8252") && warning.contains("https://"), "\(warning)")
        for quiet in [
            "{ name: ios, callback: \"myapp://token\" }",
            "{ name: ios, callback: \"myapp://token\", confirm: true }",
            "{ name: web, callback: \"https://app.example.com/cb\" }",
            "{ name: web, callback: \"https://app.example.com/cb\", confirm: false }",
        ] {
            #expect(try warnings(quiet).isEmpty, "\(quiet)")
        }
    }

    /// Every file holding a secret is looked at, by mode and group only; one named twice is reported once, and
    /// public files (certificates, verification keys) are not reported whatever their mode. A group-readable
    /// secret is reported when its group is not one of the process's (`nogroup` here), and not when it is
    /// (the signing key, 0640 with the process's own group: how systemd and Kubernetes hand a secret to a
    /// service that does not own it).
    @Test func secretFilesOthersMayReadAreReported() throws {
        let directory = NSTemporaryDirectory() + "tokengate-modes-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let modes: [String: Int] = [
            "cert.pem": 0o644, "key.pem": 0o600, "admin-key.pem": 0o644, "admin.secret": 0o604, "public.jwks": 0o644,
            "hmac.key": 0o640, "private.jwks": 0o640, "pg.password": 0o644,
        ]
        for (name, mode) in modes {
            try "x".write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: directory + "/" + name)
        }
        // A group the test process is not in (the suite runs as root, which may give a file any group).
        try FileManager.default.setAttributes([.groupOwnerAccountID: 65_534], ofItemAtPath: directory + "/hmac.key")
        try #require(getegid() != 65_534)
        let yaml = """
            listen:
              - address: 127.0.0.1:8443
                tls: { certificates: [ { cert: cert.pem, key: key.pem }, { cert: cert.pem, key: admin-key.pem } ] }
            admin: { address: 127.0.0.1:9901, secret_file: admin.secret, tls: { certificates: [ { cert: cert.pem, key: admin-key.pem } ] } }
            keys: [ { jwks: public.jwks }, { hmac_file: hmac.key, alg: HS256, kid: h1 } ]
            signing_key: { jwks: private.jwks }
            cutoffs: { postgres: "postgres://tokengate@127.0.0.1/tokengate", password_file: pg.password }
            upstreams:
              api: { targets: [ "http://127.0.0.1:9000" ] }
            routes:
              - { path_prefix: /, upstream: api, accept: [api] }
            """
        let warnings = try GatewayConfiguration(yaml: yaml, sourcePath: directory + "/tokengate.yaml", checkFiles: false).warnings
        #expect(warnings.count == 4, "\(warnings)")
        let expected = [
            ("listen[0].tls.certificates[1].key", "mode 0644", "every user"),
            ("admin.secret_file", "mode 0604", "every user"),
            ("keys[1].hmac_file", "mode 0640", "its group, which is not one of the gateway's groups"),
            ("cutoffs.password_file", "mode 0644", "every user"),
        ]
        for (key, mode, who) in expected {
            #expect(warnings.contains { $0.hasPrefix(key + ": ") && $0.contains(mode) && $0.contains(who) }, "\(key): \(warnings)")
        }
        #expect(!warnings.contains { $0.contains("cert.pem") || $0.contains("public.jwks") || $0.contains("private.jwks") })
    }

    @Test func theShippedConfigurationsHaveNoWarnings() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Config").path
        for name in ["dev.yaml", "tokengate.yaml"] {
            let config = try GatewayConfiguration.load(path: directory + "/" + name, checkFiles: false)
            #expect(config.warnings.isEmpty, "\(name): \(config.warnings)")
        }
    }

    @Test func misdirectedRequestsOnASingleCertificateListenerIsReported() throws {
        let single = try parse(
            """
            listen:
              - address: 127.0.0.1:8443
                tls: { certificates: [ { cert: cert.pem, key: key.pem } ], misdirected_requests: allow }
            keys: [ { jwks: public.jwks } ]
            cutoffs: { file: cutoffs.json }
            upstreams: { api: { targets: [ "http://127.0.0.1:9000" ] } }
            routes: [ { path_prefix: /, upstream: api, accept: none } ]
            """
        )
        let warning = try #require(single.warnings.first { $0.contains("misdirected_requests") })
        #expect(warning.hasPrefix("listen[0].tls.misdirected_requests has no effect"), "\(warning)")
        // Left out, or on a listener with two certificates, nothing is said.
        let omitted = try self.configuration(routes: "  - { path_prefix: /, upstream: api, accept: none }")
        #expect(!omitted.warnings.contains { $0.contains("misdirected_requests") }, "\(omitted.warnings)")
        let two = try parse(
            """
            listen:
              - address: 127.0.0.1:8443
                tls:
                  certificates:
                    - { cert: cert.pem, key: key.pem }
                    - { cert: cert.pem, key: key.pem, server_names: [ b.example.com ] }
                  misdirected_requests: allow
            keys: [ { jwks: public.jwks } ]
            cutoffs: { file: cutoffs.json }
            upstreams: { api: { targets: [ "http://127.0.0.1:9000" ] } }
            routes: [ { path_prefix: /, upstream: api, accept: none } ]
            """
        )
        #expect(!two.warnings.contains { $0.contains("misdirected_requests") }, "\(two.warnings)")
    }
}

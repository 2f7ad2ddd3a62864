//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig

/// `upstreams.*.tls.client_certificate`, `secret_header` and `health_check` as the decoder reads and refuses them.
@Suite struct UpstreamTrustConfigurationTests {
    func yaml(_ upstream: String) -> String {
        minimalYAML.replacingOccurrences(of: "  api: { targets: [ \"http://127.0.0.1:9000\" ] }", with: "  api: \(upstream)")
    }

    @Test func theThreeSettingsDecodeWithTheirDefaults() throws {
        let configuration = try parse(yaml("""
            { targets: [ "https://10.0.0.5:8443" ], tls: { ca_file: ca.pem, client_certificate: { cert: gw.crt, key: gw.key } }, \
            secret_header: { name: X-Backend-Secret, value_file: backend.secret }, health_check: { path: /healthz } }
            """))
        let upstream = try #require(configuration.upstreams["api"])
        #expect(upstream.tls?.clientCertificate?.cert.original == "gw.crt")
        #expect(upstream.tls?.clientCertificate?.key.original == "gw.key")
        #expect(upstream.secretHeader?.name == "X-Backend-Secret")
        #expect(upstream.secretHeader?.valueFile.original == "backend.secret")
        let check = try #require(upstream.healthCheck)
        #expect(check == HealthCheckConfiguration(path: "/healthz"))
        #expect(check.interval == .seconds(5) && check.timeout == .seconds(2))
        #expect(check.healthyThreshold == 2 && check.unhealthyThreshold == 3)
        #expect(check.accepts(status: 200) && check.accepts(status: 399) && !check.accepts(status: 404) && !check.accepts(status: 199))
    }

    @Test func expectedStatusTakesAStatusARangeOrAList() throws {
        func statuses(_ text: String) throws -> [ClosedRange<Int>]? {
            try parse(yaml("{ targets: [ \"http://127.0.0.1:9000\" ], health_check: { path: /h, expected_status: \(text) } }"))
                .upstreams["api"]?.healthCheck?.expectedStatus
        }
        #expect(try statuses("204") == [204...204])
        #expect(try statuses("\"200-299\"") == [200...299])
        #expect(try statuses("[200, \"301-302\"]") == [200...200, 301...302])
        for bad in ["99", "600", "\"300-200\"", "[]", "\"2xx\"", "\"200-\""] {
            let error = parseError(yaml("{ targets: [ \"http://127.0.0.1:9000\" ], health_check: { path: /h, expected_status: \(bad) } }"))
            #expect(error != nil, "\(bad)")
        }
    }

    @Test func checkConfigPrintsExpectedStatusAsTheFileWritesIt() throws {
        let configuration = try parse(yaml(
            "{ targets: [ \"http://127.0.0.1:9000\" ], health_check: { path: /h, expected_status: [204, \"301-302\"] } }"))
        let lines = EffectiveConfigurationText.render(configuration).split(separator: "\n").map(String.init)
        let status = try #require(lines.firstIndex { $0.hasSuffix("expected_status:") })
        #expect(lines[status + 1].hasSuffix("- 204"))
        #expect(lines[status + 2].hasSuffix("- \"301-302\""))
        #expect(!lines.contains { $0.contains("...") })
    }

    @Test func badHealthChecksAreRefusedWithTheirSetting() {
        func error(_ check: String) -> String {
            parseError(yaml("{ targets: [ \"http://127.0.0.1:9000\" ], health_check: \(check) }"))?.description ?? "accepted"
        }
        #expect(error("{ interval: 1s }").contains("health_check"))
        #expect(error("{ path: healthz }").contains("expected a path such as /healthz"))
        #expect(error("{ path: \"/a b\" }").contains("expected a path such as /healthz"))
        #expect(error("{ path: /h, interval: 1s, timeout: 2s }").contains("must not be longer than interval"))
        #expect(error("{ path: /h, interval: 10ms }").contains("health_check.interval"))
        #expect(error("{ path: /h, healthy_threshold: 0 }").contains("health_check.healthy_threshold"))
        #expect(error("{ path: /h, unhealthy_threshold: 101 }").contains("health_check.unhealthy_threshold"))
        #expect(error("{ path: /h, method: HEAD }").contains("method"))
        // A short interval takes the timeout down with it unless one is given.
        let short = try? parse(yaml("{ targets: [ \"http://127.0.0.1:9000\" ], health_check: { path: /h, interval: 500ms } }"))
        #expect(short?.upstreams["api"]?.healthCheck?.timeout == .milliseconds(500))
    }

    @Test func aSecretHeaderMayNotBeAFieldTheGatewaySetsOrForwards() {
        func error(_ name: String) -> String {
            parseError(yaml("{ targets: [ \"http://127.0.0.1:9000\" ], secret_header: { name: \"\(name)\", value_file: s } }"))?.description
                ?? "accepted"
        }
        for reserved in ["X-Tokengate-User", "x-forwarded-for", "Host", "Content-Length", "Authorization", "Cookie", "Connection", "X-Request-Id"] {
            #expect(error(reserved).contains("is a field the gateway sets or forwards itself"), "\(reserved): \(error(reserved))")
        }
        #expect(error("X_Backend_Secret").contains("with _"))
        #expect(error("Bad Name").contains("expected a header field name"))
        #expect(error("X-Backend-Secret") == "accepted")
        #expect(parseError(yaml("{ targets: [ \"http://127.0.0.1:9000\" ], secret_header: { name: X-S } }"))?.description.contains("value_file") == true)
    }

    @Test func missingFilesAreRefusedNamingTheSetting() throws {
        let directory = NSTemporaryDirectory() + "tokengate-trust-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for name in ["cert.pem", "key.pem", "keys.jwks", "gw.crt"] {
            try "x".write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
        }
        let source = directory + "/test.yaml"
        let key = parseError(
            yaml("{ targets: [ \"https://10.0.0.5:8443\" ], tls: { client_certificate: { cert: gw.crt, key: gw.key } } }"),
            sourcePath: source, checkFiles: true)?.description ?? "accepted"
        #expect(key.contains("upstreams.api.tls.client_certificate.key: file ") && key.contains("gw.key") && key.contains("does not exist"), "\(key)")
        let secret = parseError(
            yaml("{ targets: [ \"http://127.0.0.1:9000\" ], secret_header: { name: X-S, value_file: none.secret } }"),
            sourcePath: source, checkFiles: true)?.description ?? "accepted"
        #expect(secret.contains("upstreams.api.secret_header.value_file: file ") && secret.contains("none.secret") && secret.contains("does not exist"), "\(secret)")
    }

    @Test func aSecretHeaderToPlainTargetsOffLoopbackIsWarnedAbout() throws {
        let remote = try parse(yaml("{ targets: [ \"http://10.0.0.5:9000\" ], secret_header: { name: X-S, value_file: s } }"))
        #expect(remote.warnings.contains { $0.hasPrefix("upstreams.api.secret_header: X-S goes to http:// targets off loopback in clear text") })
        let local = try parse(yaml("{ targets: [ \"http://127.0.0.1:9000\" ], secret_header: { name: X-S, value_file: s } }"))
        #expect(!local.warnings.contains { $0.contains("secret_header") })
    }
}

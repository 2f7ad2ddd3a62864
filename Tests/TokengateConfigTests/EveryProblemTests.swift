//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig

/// `check-config` reports every mistake of a file in one run: each independent part (a top-level section, an
/// unknown top-level key, a route, an upstream) is judged on its own, and nothing is reported because of another
/// problem.
struct EveryProblemTests {
    private func problems(_ yaml: String) throws -> [ConfigurationError] {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/test.yaml"
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        do {
            _ = try GatewayConfiguration.loadReportingEveryProblem(path: path, checkFiles: false, environment: .none)
            return []
        } catch {
            return error.errors
        }
    }

    @Test func reportsEveryIndependentProblemWithTodaysMessages() throws {
        let yaml = """
            listen:
              - address: 127.0.0.1:8443
                tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
            keys: [ { jwks: keys.jwks } ]
            cutoffs: { sqlite: cutoffs.db }
            upstreams:
              api: { targets: [ "http://127.0.0.1:9000" ] }
              broken: { targets: [ "ftp://127.0.0.1:21" ] }
            routes:
              - { path_prefix: /api/, upstream: api, accept: [api], acept: x }
              - { path_prefix: /b/, upstream: broken, accept: none }
              - { path_prefix: /c/, upstream: nowhere, accept: none }
              - { path_prefix: /api/, upstream: api, accept: none }
            log: { level: loud }
            bogus: 1

            """
        let found = try self.problems(yaml)
        let lines = found.map { "\($0.keyPath): \($0.message)" }
        #expect(
            lines == [
                "bogus: unknown key; expected one of: listen, admin, keys, signing_key, tokens, cutoffs, upstreams, routes, limits, realm, trusted_proxies, log, http2, hsts, event_loops, issuers, rate_limits",
                "upstreams.broken.targets[0]: expected http://host:port or https://host:port, got ftp://127.0.0.1:21",
                "routes[0].acept: unknown key, did you mean 'accept'?",
                "routes[2].upstream: unknown upstream 'nowhere' (defined: api, broken)",
                "log.level: expected one of trace, debug, info, notice, warning, error, critical, got loud",
            ],
            "\(lines)"
        )
        // The route naming the broken upstream is not reported (its upstream is), and the fourth route's
        // duplicate path is judged against the routes that decoded: routes[0] did not, so /api/ is free.
        #expect(found.allSatisfy { $0.line != nil && $0.file.hasSuffix("test.yaml") })
    }

    /// `serve` and a reload still stop at the first problem, which is the first that `check-config` lists.
    @Test func theFirstProblemIsTheOneServeReports() throws {
        let yaml = minimalYAML + "log: { level: loud }\nrealm: \"\"\nhsts: { max_age: forever }\n"
        let found = try self.problems(yaml)
        #expect(found.count == 3, "\(found)")
        let first = parseError(yaml)
        #expect(first.map { [$0.line, $0.column] } == found.first.map { [$0.line, $0.column] })
        #expect(first.map { "\($0.code) \($0.keyPath): \($0.message)" } == found.first.map { "\($0.code) \($0.keyPath): \($0.message)" })
    }

    /// A section that others depend on is not replaced by a stand-in: a broken tokens section hides the keys'
    /// and routes' checks rather than reporting them against default token settings.
    @Test func dependentSectionsAreSkippedWhenTheirSectionFails() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "keys: [ { jwks: keys.jwks } ]", with: "tokens: { issuer: [a] }\nkeys: [ { jwks: keys.jwks } ]")
            + "event_loops: 0\n"
        let found = try self.problems(yaml)
        #expect(found.map(\.keyPath) == ["tokens.issuer", "event_loops"], "\(found)")
    }

    @Test func aValidFileHasNoProblem() throws {
        #expect(try self.problems(minimalYAML).isEmpty)
    }

    @Test func tensOfThousandsOfStrayKeysGetABoundedAnswer() throws {
        let yaml = (0..<20_000).map { "k\($0): \($0)\n" }.joined()
        let unknown = try self.problems(yaml).filter { $0.code == .unknownKey }
        #expect(unknown.count == ConfigMapping.unknownKeysReported + 1)
        #expect(unknown.first?.description.contains("k0: unknown key") == true)
        #expect(unknown.last?.description.contains("19980 more unknown keys from here on") == true)
        #expect(unknown.last?.description.contains(":21:1:") == true)  // at the first key not listed
    }
}

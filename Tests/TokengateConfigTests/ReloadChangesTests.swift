//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateConfig

/// Which changes a reload must refuse (``GatewayConfiguration/restartOnlyChanges(comparedTo:)``): those used
/// only at start, named by key; everything else is reloadable and not reported.
@Suite struct ReloadChangesTests {
    @Test("settings used only at start are named", arguments: [
        ("cutoffs: { sqlite: cutoffs.db }", "cutoffs: { sqlite: other.db }", ["cutoffs"]),
        ("cutoffs: { sqlite: cutoffs.db }", "cutoffs: { file: cutoffs.json }", ["cutoffs"]),
        ("  - address: 127.0.0.1:8443", "  - address: 127.0.0.1:9443", ["listen (addresses, or tls against plain_http)"]),
        ("routes:", "event_loops: 2\nroutes:", ["event_loops"]),
        ("routes:", "admin: { address: 127.0.0.1:9901 }\nroutes:", ["admin"]),
        ("cutoffs: { sqlite: cutoffs.db }", "cutoffs: { sqlite: x.db }\nevent_loops: 3", ["cutoffs", "event_loops"]),
    ])
    func restartOnly(original: String, replacement: String, expected: [String]) throws {
        let running = try parse(minimalYAML)
        let edited = minimalYAML.replacingOccurrences(of: original, with: replacement)
        try #require(edited != minimalYAML)
        #expect(try parse(edited).restartOnlyChanges(comparedTo: running) == expected)
    }

    @Test("reloadable settings are not reported", arguments: [
        ("  - { path_prefix: /, upstream: api, accept: none }\n", ""),
        ("keys: [ { jwks: keys.jwks } ]", "keys: [ { jwks: other.jwks } ]"),
        ("routes:", "limits: { max_connections: 5, drain_timeout: 3s }\nroutes:"),
        ("routes:", "log: { access_log: false }\nroutes:"),
        ("routes:", "log: { level: debug }\nroutes:"),
        ("routes:", "hsts: { max_age: 0s }\nroutes:"),
        ("{ cert: cert.pem, key: key.pem }", "{ cert: new.pem, key: new.key }"),
        ("tls: { certificates:", "tls: { handshake_timeout: 2s, certificates:"),
        ("tls: { certificates:", "tls: { misdirected_requests: allow, certificates:"),
    ])
    func reloadable(original: String, replacement: String) throws {
        let running = try parse(minimalYAML)
        let edited = minimalYAML.replacingOccurrences(of: original, with: replacement)
        try #require(edited != minimalYAML)
        #expect(try parse(edited).restartOnlyChanges(comparedTo: running) == [])
    }
}

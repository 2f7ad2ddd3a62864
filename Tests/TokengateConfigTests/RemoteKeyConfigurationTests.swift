//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateConfig

/// `jwks_url` and `discovery` key entries: their URLs' shape and their bounds are checked when the configuration
/// loads, and nothing is fetched then.
struct RemoteKeyConfigurationTests {
    func yaml(_ keys: String, tokens: String = "") -> String {
        minimalYAML.replacingOccurrences(of: "keys: [ { jwks: keys.jwks } ]", with: keys + "\n" + tokens)
    }

    @Test func entriesParseWithTheirDefaultsAndSettings() throws {
        let configuration = try parse(self.yaml("""
            keys:
              - { discovery: "https://login.example.com/o" }
              - { jwks_url: "https://idp.example/keys.json", alg: RS256, cache_min: 1m, cache_max: 2h, refetch_interval: 5s, max_stale: 0s, timeout: 2s, max_bytes: 64KiB }
              - { jwks: keys.jwks }
            """))
        #expect(configuration.keys.count == 3)
        guard case .remote(let discovery) = configuration.keys[0].source, case .remote(let jwks) = configuration.keys[1].source
        else {
            Issue.record("not remote entries")
            return
        }
        #expect(discovery == RemoteKeySetConfiguration(kind: .discovery, url: "https://login.example.com/o"))
        #expect(jwks.kind == .jwks)
        #expect(jwks.cacheMinimum == .seconds(60) && jwks.cacheMaximum == .seconds(7200))
        #expect(jwks.refetchInterval == .seconds(5) && jwks.maxStale == .zero && jwks.timeout == .seconds(2))
        #expect(jwks.maxBytes == 64 * 1024)
        #expect(configuration.keys[1].algorithm == .rs256)
    }

    @Test(arguments: [
        ("{ jwks_url: \"http://idp.example/keys.json\" }", "https://"),
        ("{ jwks_url: \"https://user:pw@idp.example/keys.json\" }", "credentials"),
        ("{ jwks_url: \"https://idp.example/keys.json#x\" }", "fragment"),
        ("{ jwks_url: \"https:///keys.json\" }", "host"),
        ("{ discovery: \"https://idp.example/o?tenant=1\" }", "query"),
        ("{ jwks_url: \"https://idp.example/k\", discovery: \"https://idp.example\" }", "exactly one"),
        ("{ jwks_url: \"https://idp.example/k\", kid: a }", "kid"),
        ("{ jwks_url: \"https://idp.example/k\", alg: HS256 }", "HMAC"),
        ("{ jwks_url: \"https://idp.example/k\", cache_min: 2h, cache_max: 1h }", "cache_min"),
        ("{ jwks_url: \"https://idp.example/k\", refetch_interval: 0s }", "refetch_interval"),
        ("{ jwks_url: \"https://idp.example/k\", max_bytes: 1GiB }", "max_bytes"),
    ])
    func badEntriesAreRefusedOffline(entry: String, mention: String) {
        let error = parseError(self.yaml("keys: [ \(entry) ]"))
        #expect(error != nil, "\(entry)")
        #expect(error?.description.contains(mention) == true, "\(error?.description ?? "parsed") should mention \(mention)")
        #expect(error?.description.contains("pw@") != true, "no credentials in the message")
    }

    @Test func discoveryMustNameTheConfiguredIssuer() {
        let error = parseError(self.yaml(
            "keys: [ { discovery: \"https://login.example.com/o\" } ]",
            tokens: "tokens: { issuer: \"https://login.example.com/other\" }"))
        #expect(error?.description.contains("tokens.issuer") == true, "\(error?.description ?? "parsed")")
        #expect(
            parseError(self.yaml(
                "keys: [ { discovery: \"https://login.example.com/o\" } ]",
                tokens: "tokens: { issuer: \"https://login.example.com/o\" }")) == nil)
    }
}

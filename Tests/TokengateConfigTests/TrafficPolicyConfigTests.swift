//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig

@Suite struct TrafficPolicyConfigTests {
    private func yaml(listener: String = "", route: String = "", top: String = "") -> String {
        """
        listen:
          - address: 127.0.0.1:8443
            tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
            \(listener)
          - address: 127.0.0.1:8080
            plain_http: reject
        keys: [ { jwks: keys.jwks } ]
        cutoffs: { sqlite: cutoffs.db }
        upstreams:
          api: { targets: [ "http://127.0.0.1:9000" ] }
        routes:
          - path_prefix: /api/
            upstream: api
            accept: [api]
            \(route)
        \(top)
        """
    }

    @Test func everySettingDecodes() throws {
        let configuration = try parse(
            self.yaml(
                listener: "proxy_protocol: { from: [ 10.0.0.0/8 ] }\n    ip_rules: { deny: [ 192.0.2.0/24 ] }",
                route: """
                    ip_rules: { allow: [ 198.51.100.0/24, "2001:db8::/32" ] }
                        rate_limits: [ { key: client, rate: 10/s, burst: 20 }, { key: user, rate: 600/m } ]
                        cors: { origins: [ "https://App.example", "https://app.example:8443" ], methods: [ get, put ], headers: [ Authorization ], credentials: true, max_age: 10m }
                    """,
                top: "rate_limits: { failed_tokens: { rate: 5/m, burst: 5 }, token_page: off, max_keys: 5000 }"
            )
        )
        let listener = configuration.listeners[0]
        #expect(listener.proxyProtocolFrom == [CIDR("10.0.0.0/8")!])
        #expect(listener.ipRules == IPRules(deny: [CIDR("192.0.2.0/24")!]))
        let route = configuration.routes[0]
        #expect(route.ipRules.allow == [CIDR("198.51.100.0/24")!, CIDR("2001:db8::/32")!])
        #expect(route.rateLimits == [RateLimit(key: .client, perSecond: 10, burst: 20), RateLimit(key: .user, perSecond: 10, burst: 10)])
        #expect(route.cors?.origins == ["https://app.example", "https://app.example:8443"])
        #expect(route.cors?.methods == ["GET", "PUT"])
        #expect(route.cors?.headers == ["authorization"])
        #expect(route.cors?.credentials == true)
        #expect(route.cors?.maxAge == .seconds(600))
        let limits = configuration.rateLimits
        #expect(limits.failedTokens == RateLimit(key: .client, perSecond: 5.0 / 60, burst: 5))
        #expect(limits.tokenPage == nil)
        #expect(limits.maxKeys == 5000)
    }

    @Test func theDefaultsGuardFailedTokensAndTokenPages() throws {
        let configuration = try parse(self.yaml())
        #expect(configuration.rateLimits == RateLimitSettings())
        #expect(configuration.rateLimits.failedTokens != nil && configuration.rateLimits.tokenPage != nil)
        #expect(configuration.listeners[0].proxyProtocolFrom == nil)
        #expect(configuration.routes[0].cors == nil && configuration.routes[0].rateLimits.isEmpty)
    }

    /// Each mistake is refused with the setting's key path and what was wrong.
    @Test(arguments: [
        ("listener", "proxy_protocol: { }", "listen[0].proxy_protocol", "needs from"),
        ("listener", "proxy_protocol: { from: [ 10.0.0.1/8 ] }", "listen[0].proxy_protocol.from[0]", "host bits zero"),
        ("listener", "ip_rules: { }", "listen[0].ip_rules", "allow, deny or both"),
        ("listener", "ip_rules: { allow: [ example.com ] }", "listen[0].ip_rules.allow[0]", "expected an IP address"),
        ("route", "ip_rules: { deny: [ 10.0.0.0/8, 10.0.0.0/8 ] }", "routes[0].ip_rules.deny[1]", "listed twice"),
        ("route", "rate_limits: [ { key: client, rate: 10 } ]", "routes[0].rate_limits[0].rate", "10/s, 600/m or 3600/h"),
        ("route", "rate_limits: [ { key: client, rate: 0/s } ]", "routes[0].rate_limits[0].rate", "1 to 1000000"),
        ("route", "rate_limits: [ { key: ip, rate: 1/s } ]", "routes[0].rate_limits[0].key", "user, client, route"),
        ("route", "rate_limits: [ { key: client, rate: 1/s }, { key: client, rate: 2/s } ]", "routes[0].rate_limits[1]", "keyed by client"),
        ("route", "rate_limits: [ { key: route, rate: 1/s, burst: 0 } ]", "routes[0].rate_limits[0].burst", "from 1"),
        ("route", "cors: { origins: [ \"https://app.example/\" ] }", "routes[0].cors.origins[0]", "no path"),
        ("route", "cors: { origins: [ \"app.example\" ] }", "routes[0].cors.origins[0]", "expected an origin"),
        ("route", "cors: { origins: [ \"*\" ], credentials: true }", "routes[0].cors.credentials", "every site"),
        ("route", "cors: { origins: [ ] }", "routes[0].cors.origins", "at least one"),
        ("route", "cors: { origins: [ \"https://a.example\" ], methods: [ \"GET POST\" ] }", "routes[0].cors.methods[0]", "HTTP method"),
        ("route", "cors: { origins: [ \"https://a.example\" ], max_age: 2d }", "routes[0].cors.max_age", "must be from"),
        ("top", "rate_limits: { failed_tokens: { key: user, rate: 1/s } }", "rate_limits.failed_tokens", "key"),
        ("top", "rate_limits: { max_keys: 10 }", "rate_limits.max_keys", "from 1000"),
    ])
    func mistakesNameTheSetting(place: String, text: String, keyPath: String, words: String) throws {
        let yaml = switch place {
        case "listener": self.yaml(listener: text)
        case "route": self.yaml(route: text)
        default: self.yaml(top: text)
        }
        let error = try #require(parseError(yaml), "\(text) was accepted")
        #expect(error.keyPath.hasPrefix(keyPath), "\(text): \(error)")
        #expect(error.message.contains(words), "\(text): \(error)")
    }

    @Test func proxyProtocolIsForTLSListenersOnly() throws {
        let yaml = self.yaml().replacingOccurrences(of: "plain_http: reject", with: "plain_http: reject\n    proxy_protocol: { from: [ 10.0.0.1 ] }")
        let error = try #require(parseError(yaml))
        #expect(error.keyPath == "listen[1].proxy_protocol", "\(error)")
    }

    @Test func ipRulesDenyWinsAndAllowListsAreExclusive() {
        let rules = IPRules(allow: [CIDR("10.0.0.0/8")!, CIDR("2001:db8::/32")!], deny: [CIDR("10.1.0.0/16")!])
        #expect(rules.permits([10, 2, 3, 4]))
        #expect(!rules.permits([10, 1, 3, 4]), "deny wins over allow")
        #expect(!rules.permits([192, 0, 2, 1]), "not on the allow list")
        #expect(rules.permits([0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 12)))
        #expect(rules.permits([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 9, 9, 9]), "IPv4-mapped IPv6 matches IPv4")
        #expect(!rules.permits(nil), "no address never satisfies a rule")
        #expect(IPRules().permits(nil), "no rule: every request passes")
        let denyOnly = IPRules(deny: [CIDR("192.0.2.0/24")!])
        #expect(denyOnly.permits([198, 51, 100, 1]))
        #expect(!denyOnly.permits([192, 0, 2, 200]))
    }
}

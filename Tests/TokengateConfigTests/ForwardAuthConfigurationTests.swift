//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig

/// `listen[].forward_auth`: what is accepted, and each refusal with the key it names.
@Suite("forward_auth listeners")
struct ForwardAuthConfigurationTests {
    /// `minimalYAML` with one more listener.
    func with(_ listener: String) -> String {
        minimalYAML.replacingOccurrences(
            of: "    tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }\n",
            with: "    tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }\n" + listener + "\n")
    }

    @Test func aLoopbackCheckListenerParses() throws {
        let config = try parse(self.with("  - { address: 127.0.0.1:9181, forward_auth: { headers: nginx, trusted_peers: [ 127.0.0.1/32 ] } }"))
        let check = try #require(config.listeners[1].forwardAuth)
        #expect(check.headers == .nginx)
        #expect(check.trustedPeers == [CIDR("127.0.0.1/32")!])
        #expect(check.tls == nil)
        #expect(config.listeners[1].tls == nil)
        let envoy = try parse(self.with("  - { address: \"[::1]:9181\", forward_auth: { headers: envoy, path_prefix: /authz, trusted_peers: [ \"::1/128\" ] } }"))
        #expect(envoy.listeners[1].forwardAuth?.pathPrefix == "/authz")
    }

    @Test func plainHTTPOffLoopbackIsRefusedNamingTheKey() {
        let error = parseError(self.with("  - { address: 10.0.0.5:9181, forward_auth: { headers: forwarded, trusted_peers: [ 10.0.0.0/8 ] } }"))
        #expect(error?.code == .insecure)
        #expect(error?.description.contains("listen[1].forward_auth: the check listener on 10.0.0.5:9181 is reachable from other machines: it needs tls") == true)
        let wildcard = parseError(self.with("  - { address: 0.0.0.0:9181, forward_auth: { headers: forwarded, trusted_peers: [ 10.0.0.0/8 ] } }"))
        #expect(wildcard?.code == .insecure)
    }

    @Test func withTLSItMayListenAnywhere() throws {
        let config = try parse(self.with(
            "  - { address: 0.0.0.0:9181, forward_auth: { headers: forwarded, trusted_peers: [ 10.0.0.0/8 ], tls: { certificates: [ { cert: c.pem, key: k.pem } ] } } }"))
        #expect(config.listeners[1].forwardAuth?.tls?.certificates.count == 1)
    }

    @Test func trustedPeersAreRequiredAndTheShapeIsNamed() {
        #expect(parseError(self.with("  - { address: 127.0.0.1:9181, forward_auth: { headers: nginx } }"))?.code == .missingKey)
        #expect(parseError(self.with("  - { address: 127.0.0.1:9181, forward_auth: { headers: nginx, trusted_peers: [] } }"))?.code == .missingKey)
        #expect(parseError(self.with("  - { address: 127.0.0.1:9181, forward_auth: { trusted_peers: [ 127.0.0.1/32 ] } }"))?.code == .missingKey)
        let unknown = parseError(self.with("  - { address: 127.0.0.1:9181, forward_auth: { headers: traefik, trusted_peers: [ 127.0.0.1/32 ] } }"))
        #expect(unknown?.description.contains("expected one of nginx, forwarded, envoy") == true)
        let prefix = parseError(self.with("  - { address: 127.0.0.1:9181, forward_auth: { headers: nginx, path_prefix: /x, trusted_peers: [ 127.0.0.1/32 ] } }"))
        #expect(prefix?.code == .conflict)
        let slash = parseError(self.with("  - { address: 127.0.0.1:9181, forward_auth: { headers: envoy, path_prefix: /x/, trusted_peers: [ 127.0.0.1/32 ] } }"))
        #expect(slash?.code == .invalidValue)
    }

    @Test func oneKindPerListener() {
        let both = parseError(self.with(
            "  - { address: 127.0.0.1:9181, plain_http: reject, forward_auth: { headers: nginx, trusted_peers: [ 127.0.0.1/32 ] } }"))
        #expect(both?.code == .conflict)
    }

    @Test func aGatewayOfChecksOnlyNeedsNoTLSListener() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: "  - address: 127.0.0.1:8443\n    tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }\n",
            with: "  - { address: 127.0.0.1:9181, forward_auth: { headers: forwarded, trusted_peers: [ 127.0.0.1/32 ] } }\n")
        let config = try parse(yaml)
        #expect(config.listeners.count == 1)
        // A plain listener next to it still needs a TLS one.
        let plain = yaml.replacingOccurrences(of: "listen:\n", with: "listen:\n  - { address: 127.0.0.1:8080, plain_http: reject }\n")
        #expect(parseError(plain)?.code == .insecure)
    }
}

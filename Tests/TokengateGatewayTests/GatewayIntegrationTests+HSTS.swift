//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
@testable import TokengateGateway

/// `hsts:` over real TLS, both protocols: the configured `Strict-Transport-Security` on a forwarded response,
/// on the gateway's own answer (401) and on those the codecs give themselves (HTTP/2's 400, HTTP/1.1's 431), and
/// none at all with
/// `max_age: 0s`.
extension GatewayIntegrationTests {
    private func strictTransportSecurity(hsts: String) async throws -> [String: [String?]] {
        var seen: [String: [String?]] = [:]
        try await self.withGateway(limits: hsts) { gateway in
            for version in ["--http1.1", "--http2"] {
                let forwarded = try self.curl(gateway, [version, "\(gateway.baseURL)/about"])
                #expect(forwarded.status == 200, "\(version): \(forwarded.body)")
                let refused = try self.curl(gateway, [version, "\(gateway.baseURL)/api/items"])
                #expect(refused.status == 401, "\(version): \(refused.body)")
                seen[version] = [forwarded.header("strict-transport-security"), refused.header("strict-transport-security")]
            }
            // A method the HTTP/2 codec refuses before any exchange exists.
            let codec = try self.curl(gateway, ["--http2", "-X", "get", "\(gateway.baseURL)/about"])
            #expect(codec.status == 400, "\(codec.body)")
            // A head the HTTP/1.1 connection handler refuses before any exchange exists (a review found it without).
            let big = "X-Big: \(String(repeating: "a", count: 20_000))"
            let h1codec = try self.curl(gateway, ["--http1.1", "-H", big, "\(gateway.baseURL)/about"])
            #expect(h1codec.status == 431, "\(h1codec.body)")
            seen["codec"] = [codec.header("strict-transport-security"), h1codec.header("strict-transport-security")]
        }
        return seen
    }

    @Test func theConfiguredHSTSIsSentOnEveryKindOfAnswer() async throws {
        let value = "max-age=34560000; includeSubDomains; preload"
        let seen = try await self.strictTransportSecurity(hsts: "hsts: { max_age: 400d, include_subdomains: true, preload: true }")
        #expect(seen["--http1.1"] == [value, value])
        #expect(seen["--http2"] == [value, value])
        #expect(seen["codec"] == [value, value])
    }

    @Test func hstsWithAZeroMaxAgeSendsNoHeader() async throws {
        let seen = try await self.strictTransportSecurity(hsts: "hsts: { max_age: 0s }")
        #expect(seen["--http1.1"] == [nil, nil])
        #expect(seen["--http2"] == [nil, nil])
        #expect(seen["codec"] == [nil, nil])
    }

    @Test func hstsDefaultsToAYear() async throws {
        let seen = try await self.strictTransportSecurity(hsts: "")
        #expect(seen["--http1.1"] == ["max-age=31536000", "max-age=31536000"])
        #expect(seen["--http2"] == ["max-age=31536000", "max-age=31536000"])
        #expect(seen["codec"] == ["max-age=31536000", "max-age=31536000"])
    }
}

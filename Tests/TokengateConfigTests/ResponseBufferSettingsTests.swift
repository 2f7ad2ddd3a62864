//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig

/// `limits.response_buffer_per_connection`, `response_buffer_total`, `response_min_rate`, `response_send_timeout`
/// and a route's `response_min_rate`.
@Suite struct ResponseBufferSettingsTests {
    @Test func defaultsAreOnAndBounded() throws {
        let limits = try parse(minimalYAML).limits
        #expect(limits.responseBufferPerConnection == 256 * 1024)
        #expect(limits.responseBufferTotal == 64 * 1024 * 1024)
        #expect(limits.responseMinRate == 1024)
        #expect(limits.responseSendTimeout == .seconds(20))
        #expect(try parse(minimalYAML).routes.allSatisfy { $0.responseMinRate == nil })
    }

    @Test func limitsAndARouteSetTheirOwn() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: "  - { path_prefix: /, upstream: api, accept: none }",
            with: "  - { path_prefix: /, upstream: api, accept: none, response_min_rate: 0 }"
        ) + "limits: { response_buffer_per_connection: 1MiB, response_buffer_total: 0, response_min_rate: 4KiB, response_send_timeout: 5s }\n"
        let configuration = try parse(yaml)
        #expect(configuration.limits.responseBufferPerConnection == 1024 * 1024)
        #expect(configuration.limits.responseBufferTotal == 0)
        #expect(configuration.limits.responseMinRate == 4096)
        #expect(configuration.limits.responseSendTimeout == .seconds(5))
        #expect(configuration.routes.map(\.responseMinRate) == [nil, 0])
    }

    @Test func outOfRangeValuesAreRefused() {
        #expect(parseError(minimalYAML + "limits: { response_send_timeout: 0s }\n")?.description
            == "test.yaml:11:34: limits.response_send_timeout: must be from 1s to 1h, got 0s")
        #expect(parseError(minimalYAML + "limits: { response_buffer_per_connection: 2GiB }\n") != nil)
        #expect(parseError(minimalYAML + "limits: { response_min_rate: -1 }\n") != nil)
    }
}

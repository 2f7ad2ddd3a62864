//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOEmbedded
import Testing

@testable import TokengateGateway

@Suite struct ConnectionRegistryTests {
    @Test func theLimitHoldsAndAClosedConnectionFreesItsPlace() throws {
        let registry = ConnectionRegistry(limit: 2)
        let one = EmbeddedChannel()
        let two = EmbeddedChannel()
        #expect(registry.add(one) && registry.add(two))
        #expect(!registry.add(EmbeddedChannel()))
        #expect(registry.count == 2)
        _ = try one.finish()
        #expect(registry.count == 1)
        #expect(registry.add(EmbeddedChannel()))
        _ = try two.finish()
    }

    /// A flood past the limit gets one warning a second with the count, not one per connection.
    @Test func refusalsAreReportedAtMostOncePerInterval() {
        let registry = ConnectionRegistry(limit: 0)
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        #expect(registry.refusalsToReport(now: start) == nil, "nothing refused yet")
        #expect(!registry.add(EmbeddedChannel()))
        #expect(registry.refusalsToReport(now: start) == 1, "the first refusal is reported at once")
        for _ in 0..<500 { _ = registry.add(EmbeddedChannel()) }
        #expect(registry.refusalsToReport(now: start + .milliseconds(10)) == nil)
        #expect(registry.refusalsToReport(now: start + .milliseconds(999)) == nil)
        #expect(registry.refusalsToReport(now: start + .seconds(1)) == 500, "then the count since the last report")
        #expect(registry.refusalsToReport(now: start + .seconds(5)) == nil, "and nothing when nothing was refused")
    }
}

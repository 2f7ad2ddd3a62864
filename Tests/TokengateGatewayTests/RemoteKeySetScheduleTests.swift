//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateConfig

@testable import TokengateGateway

/// When a fetched key set is fetched again and when its last good copy stops counting, driven with a clock of
/// the test's (milliseconds): no timer runs.
struct RemoteKeySetScheduleTests {
    let configuration = RemoteKeySetConfiguration(
        kind: .jwks, url: "https://idp.example/jwks", cacheMinimum: .seconds(60), cacheMaximum: .seconds(3600),
        refetchInterval: .seconds(10), maxStale: .seconds(600))

    @Test func maxAgeIsKeptInsideTheBoundsAndRefreshComesBeforeExpiry() {
        var schedule = RemoteKeySetSchedule(self.configuration)
        #expect(schedule.lifetime(maxAgeSeconds: 0) == 60_000, "max-age=0 cannot make every request fetch")
        #expect(schedule.lifetime(maxAgeSeconds: 31_536_000) == 3_600_000, "a year is cut to cache_max")
        #expect(schedule.lifetime(maxAgeSeconds: nil) == 60_000)
        #expect(schedule.lifetime(maxAgeSeconds: Int64.max) == 3_600_000)
        let step = schedule.succeeded(now: 1_000_000, maxAgeSeconds: 600)
        #expect(step == .init(nextFetch: 1_000_000 + 480_000, dropKeys: false))
        #expect(schedule.expiresAt == 1_600_000)
    }

    @Test func failuresBackOffKeepTheSetThenDropItAfterMaxStale() {
        var schedule = RemoteKeySetSchedule(self.configuration)
        _ = schedule.succeeded(now: 0, maxAgeSeconds: 60)  // expires at 60 s, runs out at 660 s
        #expect(schedule.failed(now: 48_000) == .init(nextFetch: 58_000, dropKeys: false))
        #expect(schedule.failed(now: 58_000) == .init(nextFetch: 78_000, dropKeys: false))
        #expect(schedule.failed(now: 78_000) == .init(nextFetch: 118_000, dropKeys: false))
        // The retry never lands after the moment the set runs out.
        #expect(schedule.failed(now: 640_000).nextFetch == 660_000)
        let last = schedule.failed(now: 660_000)
        #expect(last.dropKeys)
        #expect(schedule.fetchedAt == nil)
        // With nothing left to keep, retries go on at the capped back-off.
        #expect(schedule.failed(now: 700_000).dropKeys == false)
        #expect(schedule.succeeded(now: 800_000, maxAgeSeconds: nil).dropKeys == false)
        #expect(schedule.failures == 0)
    }

    @Test func cacheControlMaxAge() {
        #expect(CacheControlMaxAge.seconds("public, max-age=3600, stale-while-revalidate=3600") == 3600)
        #expect(CacheControlMaxAge.seconds("max-age=\"120\"") == 120)
        #expect(CacheControlMaxAge.seconds("no-cache") == 0)
        #expect(CacheControlMaxAge.seconds("max-age=60, no-store") == 0)
        #expect(CacheControlMaxAge.seconds("max-age=60, max-age=7200") == nil, "a repeated max-age is invalid")
        #expect(CacheControlMaxAge.seconds("max-age=-1") == nil)
        #expect(CacheControlMaxAge.seconds("max-age=9999999999999") == nil)
        #expect(CacheControlMaxAge.seconds("private") == nil)
        #expect(CacheControlMaxAge.seconds(nil) == nil)
    }

    @Test func metadataMustNameTheIssuerExactly() throws {
        let good = Array(#"{"issuer":"https://idp.example/o","jwks_uri":"https://idp.example/o/jwks"}"#.utf8)
        #expect(try RemoteKeySource.jwksURI(metadata: good, issuer: "https://idp.example/o").host == "idp.example")
        for issuer in ["https://idp.example/o/", "https://idp.example", "https://IDP.example/o"] {
            #expect(throws: (any Error).self) { try RemoteKeySource.jwksURI(metadata: good, issuer: issuer) }
        }
        let plain = Array(#"{"issuer":"https://idp.example/o","jwks_uri":"http://idp.example/o/jwks"}"#.utf8)
        #expect(throws: (any Error).self) { try RemoteKeySource.jwksURI(metadata: plain, issuer: "https://idp.example/o") }
    }
}

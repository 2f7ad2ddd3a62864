//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers
import Testing
import TokengateConfig
import TokengateHTTP

@testable import TokengateGateway

/// The traffic policy's parts as values: the client address, the CORS decisions, the buckets. No channel.
@Suite struct TrafficPolicyTests {
    let trusted = [CIDR("10.0.0.0/8")!, CIDR("127.0.0.1")!]

    @Test func theClientAddressIsThePeerUnlessThePeerIsTrusted() {
        let direct = ClientAddress.resolve(peer: "203.0.113.5", forwardedFor: ["198.51.100.1"], trusted: self.trusted)
        #expect(direct == ClientAddress(text: "203.0.113.5", forwardedFor: "203.0.113.5"), "a client's own chain is not believed")
        let none = ClientAddress.resolve(peer: "10.1.1.1", forwardedFor: [], trusted: [])
        #expect(none.text == "10.1.1.1")
    }

    @Test func behindTrustedProxiesTheRightmostUntrustedEntryIsTheClient() {
        let one = ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: ["6.6.6.6, 198.51.100.7"], trusted: self.trusted)
        #expect(one == ClientAddress(text: "198.51.100.7", forwardedFor: "198.51.100.7, 10.0.0.2"), "6.6.6.6 was the client's own")
        let chained = ClientAddress.resolve(
            peer: "127.0.0.1", forwardedFor: ["6.6.6.6", "198.51.100.7 , 10.9.9.9", "10.0.0.3"], trusted: self.trusted)
        #expect(chained == ClientAddress(text: "198.51.100.7", forwardedFor: "198.51.100.7, 10.9.9.9, 10.0.0.3, 127.0.0.1"))
        let allTrusted = ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: ["10.0.0.9"], trusted: self.trusted)
        #expect(allTrusted.text == "10.0.0.9", "a chain of trusted proxies ends at its leftmost entry")
        let garbage = ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: ["198.51.100.7, unknown, 10.0.0.4"], trusted: self.trusted)
        #expect(garbage == ClientAddress(text: "10.0.0.4", forwardedFor: "10.0.0.4, 10.0.0.2"), "an entry that is no address ends the walk")
        let empty = ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: [], trusted: self.trusted)
        #expect(empty.text == "10.0.0.2")
        let six = ClientAddress.resolve(peer: "::ffff:10.0.0.2", forwardedFor: ["2001:db8::1"], trusted: self.trusted)
        #expect(six.text == "2001:db8::1", "an IPv4-mapped peer is matched as IPv4")
        let long = ClientAddress.resolve(
            peer: "10.0.0.2", forwardedFor: [Array(repeating: "10.0.0.1", count: 100).joined(separator: ",")], trusted: self.trusted)
        #expect(long.forwardedFor?.split(separator: ",").count == ClientAddress.maximumHops + 1, "the walk is bounded")
    }

    private func cors(credentials: Bool = true, origins: [String] = ["https://app.example"]) -> CORSPolicy {
        CORSPolicy(
            CORSConfiguration(
                origins: origins, methods: ["GET", "PUT"], headers: ["authorization", "x-trace"], exposeHeaders: ["x-request-id"],
                credentials: credentials, maxAge: .seconds(600)
            )
        )
    }

    @Test func aPreflightFromAnAllowedOriginGetsThePolicy() {
        let policy = self.cors()
        let answer = policy.preflight(
            origins: ["https://app.example"], requestMethod: ["PUT"], requestHeaders: ["Authorization, X-Trace", "accept"])
        #expect(
            answer == .allowed([
                ResponseField("access-control-allow-origin", "https://app.example"), ResponseField("vary", "origin"),
                ResponseField("access-control-allow-credentials", "true"),
                ResponseField("access-control-allow-methods", "GET, PUT"),
                ResponseField("access-control-allow-headers", "authorization, x-trace"),
                ResponseField("access-control-max-age", "600"),
            ]))
    }

    @Test func preflightsOutsideThePolicyAreRefused() {
        let policy = self.cors()
        #expect(policy.preflight(origins: ["https://evil.example"], requestMethod: ["GET"], requestHeaders: []) == .refused)
        #expect(policy.preflight(origins: ["https://app.example.evil"], requestMethod: ["GET"], requestHeaders: []) == .refused)
        #expect(policy.preflight(origins: ["null"], requestMethod: ["GET"], requestHeaders: []) == .refused)
        #expect(policy.preflight(origins: ["https://app.example"], requestMethod: ["DELETE"], requestHeaders: []) == .refused)
        #expect(policy.preflight(origins: ["https://app.example"], requestMethod: ["PUT"], requestHeaders: ["x-other"]) == .refused)
        #expect(policy.preflight(origins: ["https://app.example"], requestMethod: ["GET"], requestHeaders: ["content-type"]) == .refused)
        #expect(
            policy.preflight(origins: ["https://app.example", "https://app.example"], requestMethod: ["GET"], requestHeaders: [])
                == .refused)
        #expect(policy.preflight(origins: [], requestMethod: ["GET"], requestHeaders: []) == .notPreflight)
        #expect(policy.preflight(origins: ["https://app.example"], requestMethod: [], requestHeaders: []) == .notPreflight)
    }

    private func fields(_ policy: CORSPolicy, _ origin: String?) -> [ResponseField] {
        guard var origin else { return policy.responseFields(originBytes: nil) }
        return origin.withUTF8 { policy.responseFields(originBytes: UnsafeRawBufferPointer($0)) }
    }

    /// `lines` as the parsers hand them on: `name: value` each, CRLF-terminated.
    private func fields(_ policy: CORSPolicy, lines: [(String, String)]) -> [ResponseField] {
        var fields = RequestFields()
        for (name, value) in lines { fields.add(name: name, value: value) }
        return policy.responseFields(for: fields)
    }

    @Test func theOriginIsTheFirstFieldSoNamedInAnyCase() {
        let policy = self.cors()
        let allowed = fields(policy, "https://app.example")
        let refused = [ResponseField("vary", "origin")]
        #expect(fields(policy, lines: [("host", "api.example"), ("ORIGIN", "https://app.example")]) == allowed)
        #expect(fields(policy, lines: [("Origin", "https://app.example"), ("origin", "https://evil.example")]) == allowed)
        #expect(fields(policy, lines: [("origin", "https://evil.example"), ("origin", "https://app.example")]) == refused)
        #expect(fields(policy, lines: [("x-origin", "https://app.example"), ("origins", "https://app.example")]) == refused)
        #expect(fields(policy, lines: [("originx", "https://app.example"), ("accept", "*/*")]) == refused)
        #expect(fields(policy, lines: [("origin", "")]) == refused)
        #expect(fields(policy, lines: []) == refused)
        #expect(fields(policy, lines: [("a", "b"), ("origin", "https://app.example\t ")]) == allowed, "trailing whitespace is not the value")
        let open = self.cors(credentials: false, origins: ["*"])
        #expect(fields(open, lines: [("accept", "*/*")]).isEmpty, "no origin, no fields under a wildcard")
        #expect(fields(open, lines: [("origin", "")]).first == ResponseField("access-control-allow-origin", "*"))
    }

    @Test func actualResponsesGetTheFieldsOnlyForAnAllowedOrigin() {
        let policy = self.cors()
        #expect(
            fields(policy, "https://APP.example") == [
                ResponseField("access-control-allow-origin", "https://app.example"), ResponseField("vary", "origin"),
                ResponseField("access-control-allow-credentials", "true"), ResponseField("access-control-expose-headers", "x-request-id"),
            ])
        #expect(fields(policy, "https://evil.example") == [ResponseField("vary", "origin")])
        #expect(fields(policy, nil) == [ResponseField("vary", "origin")])
        let open = self.cors(credentials: false, origins: ["*"])
        #expect(fields(open, "https://any.example").first == ResponseField("access-control-allow-origin", "*"))
        #expect(!open.allowsCredentials(origin: "https://any.example"), "a wildcard never carries cookies")
        #expect(policy.allowsCredentials(origin: "https://app.example"))
        #expect(!self.cors(credentials: false).allowsCredentials(origin: "https://app.example"))
    }

    @Test func aBucketRefillsAtItsRateUpToItsBurst() {
        let second: UInt64 = 1_000_000_000
        var bucket = TokenBucket(burst: 3, now: 0)
        #expect(bucket.take(perSecond: 2, burst: 3, now: 0) == nil)
        #expect(bucket.take(perSecond: 2, burst: 3, now: 0) == nil)
        #expect(bucket.take(perSecond: 2, burst: 3, now: 0) == nil)
        #expect(bucket.take(perSecond: 2, burst: 3, now: 0) == 1, "empty: retry after a second (rounded up)")
        #expect(bucket.take(perSecond: 2, burst: 3, now: second / 2) == nil, "half a second at 2/s is one token")
        #expect(bucket.take(perSecond: 2, burst: 3, now: second / 2) != nil)
        #expect(bucket.isFull(perSecond: 2, burst: 3, now: 100 * second))
        var slow = TokenBucket(burst: 1, now: 0)
        #expect(slow.take(perSecond: 1.0 / 60, burst: 1, now: 0) == nil)
        #expect(slow.take(perSecond: 1.0 / 60, burst: 1, now: 0) == 60, "a minute's rate waits a minute")
        slow.spend(perSecond: 1.0 / 60, burst: 1, now: 0)
        slow.spend(perSecond: 1.0 / 60, burst: 1, now: 0)
        #expect(slow.check(perSecond: 1.0 / 60, burst: 1, now: 0) == 120, "debt is bounded at one token")
        var backwards = TokenBucket(burst: 1, now: 10 * second)
        #expect(backwards.take(perSecond: 1, burst: 1, now: 10 * second) == nil)
        #expect(backwards.take(perSecond: 1, burst: 1, now: 0) != nil, "a clock going back adds nothing")
    }

    @Test func aFloodOfDistinctKeysStaysWithinTheBound() {
        let limit = RateLimitValues(perSecond: 1, burst: 2)
        var table = BucketTable(capacity: 1000)
        let hot = BucketKey(address: [192, 0, 2, 1])
        #expect(table.take(hot, limit: limit, now: 0) == nil)
        #expect(table.take(hot, limit: limit, now: 0) == nil)
        #expect(table.take(hot, limit: limit, now: 0) != nil)
        var largest = 0
        for index in 0..<50_000 {
            let key = withUnsafeBytes(of: UInt32(index).bigEndian) { BucketKey(address: $0) }
            _ = table.take(key, limit: limit, now: 0)
            largest = max(largest, table.count)
        }
        #expect(largest == 1000, "full, and never past the bound")
        #expect(table.evicted > 40_000)
        // Checking an unknown key stores nothing.
        let before = table.count
        #expect(table.check(BucketKey(address: [1, 2, 3, 4, 5]), limit: limit, now: 0) == nil)
        #expect(table.count == before)
        // Refilled buckets go first: after the refill no eviction is needed to make room.
        var idle = BucketTable(capacity: 8)
        for index in 0..<8 { _ = idle.take(BucketKey(address: [UInt8(index)]), limit: limit, now: 0) }
        _ = idle.take(BucketKey(address: [99]), limit: limit, now: 10_000_000_000)
        #expect(idle.evicted == 0 && idle.count == 1)
    }

    @Test func bucketKeysCompareWholeNotByHash() {
        let limit = RateLimitValues(perSecond: 1, burst: 1)
        var table = BucketTable(capacity: 100)
        // Two subjects forced to one digest: same hash, different keys, so separate buckets.
        let alice = BucketKey(user: "alice", digest: 42)
        let mallory = BucketKey(user: "mallx", digest: 42)
        #expect(alice.hashValue == mallory.hashValue)
        #expect(alice != mallory)
        #expect(table.take(mallory, limit: limit, now: 0) == nil)
        #expect(table.take(mallory, limit: limit, now: 0) != nil, "mallory's bucket is spent")
        #expect(table.take(alice, limit: limit, now: 0) == nil, "alice's is her own")
        #expect(table.count == 2)
        // An IPv4 address, the IPv6 address that maps it, the address-less key and the route's are all distinct.
        let four = BucketKey(address: [192, 0, 2, 1])
        let mapped = BucketKey(address: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 1])
        let zeros = BucketKey(address: [0, 0, 0, 0])
        #expect(Set([four, mapped, zeros, BucketKey(client: nil), BucketKey.route, BucketKey(user: "")]).count == 6)
        #expect(BucketKey(client: [192, 0, 2, 1]) == four)
        #expect(BucketKey(user: "alice") == BucketKey(user: "alice"))
    }

    @Test func theLimiterSharesBucketsAcrossCallers() {
        let clock = ManualClock()
        let evicted = NIOLockedValueBox(0)
        let limiter = RateLimiter(
            perSecond: 1, burst: 2, maxKeys: 1000, evicted: { count in evicted.withLockedValue { $0 += count } },
            clock: { clock.now })
        #expect(limiter.take(BucketKey(address: [1])) == nil)
        #expect(limiter.take(BucketKey(address: [1])) == nil)
        #expect(limiter.take(BucketKey(address: [1])) == 1)
        #expect(limiter.take(BucketKey(address: [2])) == nil, "another key has its own bucket")
        clock.now = 1_000_000_000
        #expect(limiter.take(BucketKey(address: [1])) == nil)
        #expect(limiter.keys.count == 2)
        #expect(evicted.withLockedValue { $0 } == 0)
        for index in 0..<5000 { _ = limiter.take(withUnsafeBytes(of: UInt32(index).bigEndian) { BucketKey(address: $0) }) }
        #expect(limiter.keys.count <= 1000)
        #expect(evicted.withLockedValue { $0 } == limiter.keys.evicted && limiter.keys.evicted > 3000, "each drop is counted")
    }
}

/// A clock the test moves.
private final class ManualClock: @unchecked Sendable {
    // @unchecked: set and read by one test's thread only.
    var now: UInt64 = 0
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing
import TokengateHTTP

@testable import TokengateConfig
@testable import TokengateGateway

@Suite struct FieldNameSetTests {
    static let names: [StaticString] = [
        "connection", "keep-alive", "te", "x-forwarded-for", "x-real-ip", "http2-settings", "upgrade",
        "a-name-of-sixty-three-bytes-which-is-the-longest-a-set-may-hold",
    ]

    /// The definition the set stands for: one of the names, ASCII letters folded, every other byte exact.
    static func isMember(_ candidate: [UInt8]) -> Bool {
        Self.names.contains { name in
            let bytes = Array(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            return bytes.count == candidate.count
                && zip(bytes, candidate).allSatisfy { expected, byte in
                    expected == byte || (byte >= 0x41 && byte <= 0x5A && byte | 0x20 == expected)
                }
        }
    }

    @Test func agreesWithTheListOnNamesTheirCaseMixesNearMissesAndEveryLength() {
        let set = FieldNameSet(Self.names)
        var candidates: [[UInt8]] = []
        var generator = SystemRandomNumberGenerator()
        for name in Self.names {
            let bytes = Array(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            candidates.append(bytes)
            // Each byte upper-cased, changed, dropped; one byte more at either end.
            for index in bytes.indices {
                var upper = bytes
                if upper[index] >= 0x61 && upper[index] <= 0x7A { upper[index] -= 0x20 }
                candidates.append(upper)
                var changed = bytes
                changed[index] ^= 0x01
                candidates.append(changed)
                var dropped = bytes
                dropped.remove(at: index)
                candidates.append(dropped)
            }
            candidates.append(bytes + [0x61])
            candidates.append([0x61] + bytes)
            // Case folding is for letters only: `-` (0x2D) and `\r` (0x0D) differ by 0x20 as well.
            candidates.append(bytes.map { $0 == 0x2D ? 0x0D : $0 })
        }
        // Every length up to past the limit, random bytes and random letters of that length.
        for length in 0...70 {
            candidates.append((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
            candidates.append((0..<length).map { _ in UInt8.random(in: 0x61...0x7A, using: &generator) })
        }
        var members = 0
        for candidate in candidates {
            let expected = Self.isMember(candidate)
            members += expected ? 1 : 0
            #expect(candidate.withUnsafeBytes { set.contains($0) } == expected, "\(candidate)")
        }
        #expect(members > Self.names.count)  // the names and their upper-cased variants
    }

    @Test(arguments: [
        ("Connection", true), ("TE", true), ("X-Forwarded-For", true), ("expect", true), ("x-original-url", true),
        ("Proxy-Authorization", true), ("Accept", false), ("content-type", false), ("x-forwarded", false),
        ("x-forwarded-forx", false), ("tE ", false), ("", false),
    ])
    func theRequestRewritersDropListUsesIt(_ name: String, _ dropped: Bool) {
        #expect(Array(name.utf8).withUnsafeBytes { RequestRewriter.isDroppedFromRequest($0) } == dropped)
    }

    /// The configuration refuses `forward_token: keep` for a `header:` source the rewriter removes (keep would
    /// forward nothing): its list must be the rewriter's, name for name.
    @Test func theConfigurationKnowsWhatTheRewriterDrops() {
        let rewriter = Set((ProxyFieldRules.hopByHopFieldNames + ProxyFieldRules.forwardingFieldNames).map(\.description) + ["expect"])
        #expect(ConfigurationDecoder.headersRemovedBeforeForwarding == rewriter)
        for name in rewriter {
            #expect(Array(name.utf8).withUnsafeBytes { RequestRewriter.isDroppedFromRequest($0) }, "\(name)")
        }
        // And the two rules beside the list: the gateway's own prefix, and any name with `_`.
        for name in ["X-Tokengate-User", "x-tokengate-anything", "X_Token", "a_b"] {
            #expect(ConfigurationDecoder.isRemovedBeforeForwarding(header: name), "\(name)")
        }
        #expect(!ConfigurationDecoder.isRemovedBeforeForwarding(header: "X-Api-Token"))
    }
}

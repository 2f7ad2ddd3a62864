//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing
import TokengateConfig

/// `tokens.verified_cache.entries`: on by default, 0 turns it off, bounded, and nothing else under the key.
@Suite struct VerifiedCacheConfigurationTests {
    @Test func defaultsOnAndTakesACount() throws {
        #expect(try parse(minimalYAML).tokens.verifiedCacheEntries == 4096)
        #expect(TokenSettings().verifiedCacheEntries == 4096)
        let off = try parse(minimalYAML + "tokens: { verified_cache: { entries: 0 } }\n")
        #expect(off.tokens.verifiedCacheEntries == 0)
        let large = try parse(minimalYAML + "tokens: { verified_cache: { entries: 262144 } }\n")
        #expect(large.tokens.verifiedCacheEntries == 262_144)
        let empty = try parse(minimalYAML + "tokens: { verified_cache: {} }\n")
        #expect(empty.tokens.verifiedCacheEntries == 4096)
    }

    @Test func refusesWhatItCannotBound() {
        for yaml in [
            "tokens: { verified_cache: { entries: 262145 } }\n",
            "tokens: { verified_cache: { entries: -1 } }\n",
            "tokens: { verified_cache: { entries: many } }\n",
            "tokens: { verified_cache: { size: 10 } }\n",
            "tokens: { verified_cache: 10 }\n",
        ] {
            let error = parseError(minimalYAML + yaml)
            #expect(error != nil, "\(yaml)")
            #expect(error?.description.contains("tokens.verified_cache") == true, "\(String(describing: error))")
        }
    }
}

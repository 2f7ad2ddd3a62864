//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateTokens

/// A provider's JWK Set read leniently: unusable keys are skipped with the reason, keys without `alg` are bound
/// by the issuer's algorithms, and a set with a private or secret key is refused whole.
struct FetchedKeySetTests {
    /// The fixture's RSA and P-256 public keys as JSON objects.
    func key(_ fixture: String) throws -> [String: Any] {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(TestSupport.fixture(fixture))) as? [String: Any])
        return try #require((object["keys"] as? [[String: Any]])?.first)
    }

    func document(_ keys: [[String: Any]]) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: ["keys": keys]))
    }

    @Test func unusableKeysAreSkippedAndTheRestServe() throws {
        let rsa = try self.key("test-only-rs256-public.jwks")
        var encryption = try self.key("test-only-es256-public.jwks")
        encryption["use"] = "enc"
        encryption["kid"] = "enc-key"
        let unknownType: [String: Any] = ["kty": "PQC", "kid": "future", "x": "AAAA"]
        var noAlg = rsa
        noAlg["kid"] = "no-alg"
        noAlg.removeValue(forKey: "alg")
        let set = try FetchedKeySet(
            jwks: self.document([rsa, encryption, unknownType, noAlg]), algorithm: nil, allowed: TokenAlgorithm.allCases)
        #expect(set.keys?.keyIDs == ["test-only-rs256"])
        #expect(set.skipped.map(\.keyID) == ["enc-key", "future", "no-alg"])
        #expect(set.skipped[0].reason.contains("'use' is 'enc'"))
        #expect(set.skipped[2].reason.contains("alg"), "an RSA key without alg serves RS256 and PS256: skipped")
    }

    /// The issuer's algorithms name one RSA algorithm: a key without `alg` is bound to it (and only to it).
    @Test func issuerAlgorithmsBindKeysWithoutAlg() throws {
        var noAlg = try self.key("test-only-rs256-public.jwks")
        noAlg.removeValue(forKey: "alg")
        let set = try FetchedKeySet(jwks: self.document([noAlg]), algorithm: nil, allowed: [.rs256, .es256])
        #expect(set.skipped.isEmpty)
        #expect(set.keys?.algorithms == [[.rs256]])
        let ps = try FetchedKeySet(jwks: self.document([noAlg]), algorithm: .ps256, allowed: TokenAlgorithm.allCases)
        #expect(ps.keys?.algorithms == [[.ps256]], "the entry's alg binds it when given")
    }

    @Test func privateOrSecretKeysRefuseTheWholeSet() throws {
        let rsa = try self.key("test-only-rs256-public.jwks")
        let privateKey = try self.key("test-only-es256-private.jwks")
        let secret = try self.key("test-only-hs256-public.jwks")
        for leaked in [privateKey, secret] {
            #expect(throws: KeyLoadingError.self) {
                try FetchedKeySet(jwks: self.document([rsa, leaked]), algorithm: nil, allowed: TokenAlgorithm.allCases)
            }
        }
        do {
            _ = try FetchedKeySet(jwks: self.document([rsa, privateKey]), algorithm: nil, allowed: TokenAlgorithm.allCases)
        } catch let error as KeyLoadingError {
            #expect(error.code == "private_key")
            #expect(!error.description.contains(privateKey["d"] as? String ?? "-"), "never key material")
        }
    }

    @Test func noUsableKeyGivesNoSetAndDuplicatesAreSkipped() throws {
        var encryption = try self.key("test-only-es256-public.jwks")
        encryption["use"] = "enc"
        let none = try FetchedKeySet(jwks: self.document([encryption]), algorithm: nil, allowed: TokenAlgorithm.allCases)
        #expect(none.keys == nil)
        let rsa = try self.key("test-only-rs256-public.jwks")
        let twice = try FetchedKeySet(jwks: self.document([rsa, rsa]), algorithm: nil, allowed: TokenAlgorithm.allCases)
        #expect(twice.keys?.count == 1)
        #expect(twice.skipped.first?.reason.contains("same kid") == true)
        #expect(throws: KeyLoadingError.self) {
            try FetchedKeySet(jwks: Array("[1,2]".utf8), algorithm: nil, allowed: TokenAlgorithm.allCases)
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

/// Project Wycheproof vectors (shared/testvectors/wycheproof). Every `invalid` case must be rejected and every
/// `valid` case with a supported algorithm accepted.
///
/// Deviations, each with its reason:
/// - hmac_sha256: `valid` cases with a truncated tag (tagSize < 256) are rejected: JWS HS256 uses the full
///   32-byte tag (RFC 7518 §3.2), so a shorter tag is never valid for tokengate.
/// - json_web_signature tcId 372 and 373 ("InvalidCharacterInsertedInHeader/Payload", `valid`): a `?` inside a
///   base64url part. Wycheproof marks them valid for lenient decoders; tokengate decodes base64url strictly
///   (the brief: reject anything outside the alphabet), so they are `malformed`.
/// - json_web_signature/json_web_key `valid` cases whose key or token uses an algorithm tokengate does not
///   support (RS384, RS512, PS384, PS512, ES512 / P-521) are skipped; their `invalid` cases must still be rejected
///   (the key set does not load, or the algorithm is not allowed).
/// - json_web_signature tcId 367 and 370 ("invalidBase64Padding…", `invalid`): the stored `jws` strings are
///   byte-for-byte identical to tcId 357 (`valid`); the padding they describe is absent from the data file, so
///   no verifier can tell them apart. The test asserts they are identical to 357 and that they verify. Padding
///   itself is rejected: AttackTests.base64Strictness.
/// - JWS/JWK payloads are not JWT claim sets ("foo"), so these go through the internal JWS-layer entry point
///   `TokenVerifier.checkSignature`, which checks encoding, header, key, algorithm binding and signature.
@Suite struct WycheproofTests {
    static func load(_ name: String) throws -> [String: Any] {
        try TestSupport.json(TestSupport.wycheproof.appendingPathComponent(name))
    }

    static func groups(_ root: [String: Any]) -> [[String: Any]] { root["testGroups"] as? [[String: Any]] ?? [] }
    static func tests(_ group: [String: Any]) -> [[String: Any]] { group["tests"] as? [[String: Any]] ?? [] }

    @Test func hmacSHA256() throws {
        let root = try Self.load("hmac_sha256_test.json")
        var checked = 0
        for group in Self.groups(root) {
            for test in Self.tests(group) {
                let id = test["tcId"] as! Int
                let key = TestSupport.hex(test["key"] as! String)
                let message = TestSupport.hex(test["msg"] as! String)
                let tag = TestSupport.hex(test["tag"] as! String)
                let valid = test["result"] as! String == "valid"
                let check = try #require(SignatureCheck(hmacBits: 256, secret: key))
                let accepted = message.withUnsafeBytes { m in
                    tag.withUnsafeBytes { t in check.verify(data: m, signature: t) }
                }
                if valid && tag.count != 32 {
                    #expect(!accepted, "tcId \(id): truncated tags are never accepted (deviation, see above)")
                } else {
                    #expect(accepted == valid, "tcId \(id): \(test["comment"] ?? "")")
                }
                checked += 1
            }
        }
        #expect(checked == root["numberOfTests"] as? Int)
    }

    /// Signature primitive files: a public key per group, (msg, sig, result) per test.
    @Test(arguments: [
        ("ed25519_test.json", TokenAlgorithm.edDSA),
        ("ecdsa_secp256r1_sha256_p1363_test.json", .es256),
        ("rsa_signature_2048_sha256_test.json", .rs256),
        ("rsa_pss_2048_sha256_mgf1_32_test.json", .ps256),
    ])
    func signaturePrimitive(file: String, algorithm: TokenAlgorithm) throws {
        let root = try Self.load(file)
        var checked = 0
        var acceptedValid = 0
        for group in Self.groups(root) {
            let keySet: KeySet?
            if let jwk = group["publicKeyJwk"] as? [String: Any] {
                keySet = try? KeySet(jwks: [UInt8](JSONSerialization.data(withJSONObject: ["keys": [jwk]])))
            } else {
                let pem = try #require(group["publicKeyPem"] as? String)
                keySet = try? KeySet(pem: pem, algorithm: algorithm)
            }
            for test in Self.tests(group) {
                let id = test["tcId"] as! Int
                let valid = test["result"] as! String == "valid"
                let message = TestSupport.hex(test["msg"] as! String)
                let signature = TestSupport.hex(test["sig"] as! String)
                checked += 1
                guard let keySet else {
                    #expect(!valid, "tcId \(id): the group's key did not load")
                    continue
                }
                let check = try #require(keySet.keys[0].checks[algorithm.index])
                let accepted = message.withUnsafeBytes { m in
                    signature.withUnsafeBytes { s in check.verify(data: m, signature: s) }
                }
                #expect(accepted == valid, "tcId \(id): \(test["comment"] ?? "") flags \(test["flags"] ?? "")")
                if accepted { acceptedValid += 1 }
            }
        }
        #expect(checked == root["numberOfTests"] as? Int)
        #expect(acceptedValid > 0)
    }

    static let unsupportedAlgorithms: Set<String> = ["RS384", "RS512", "PS384", "PS512", "ES384", "ES512", "ES521"]

    static func headerAlgorithm(_ jws: String) -> String? {
        guard let head = jws.split(separator: ".", omittingEmptySubsequences: false).first,
            let bytes = Base64URL.decode(String(head)),
            let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        else { return nil }
        return object["alg"] as? String
    }

    /// json_web_signature_test.json and json_web_key_test.json: whole compact JWS objects with a key set.
    @Test(arguments: ["json_web_signature_test.json", "json_web_key_test.json"])
    func jsonWebSignatures(file: String) throws {
        let root = try Self.load(file)
        let lenientValid: Set<Int> = file == "json_web_signature_test.json" ? [372, 373] : []
        let sameAs357: Set<Int> = file == "json_web_signature_test.json" ? [367, 370] : []
        var jws357: String?
        var checked = 0
        var validAccepted = 0
        for group in Self.groups(root) {
            let keyObject = group["public"] ?? group["private"]
            let keyDocument: Any
            if let dict = keyObject as? [String: Any], dict["keys"] != nil {
                keyDocument = dict
            } else {
                keyDocument = ["keys": [keyObject as Any]]
            }
            let keySet = try? KeySet(jwks: [UInt8](JSONSerialization.data(withJSONObject: keyDocument)))
            let keyAlgorithms = ((keyDocument as? [String: Any])?["keys"] as? [[String: Any]] ?? []).compactMap {
                $0["alg"] as? String
            }
            for test in Self.tests(group) {
                let id = test["tcId"] as! Int
                let valid = test["result"] as! String == "valid"
                checked += 1
                guard let jws = test["jws"] as? String else {
                    // JSON serialization: not a compact token; tokengate only reads compact tokens.
                    #expect(!valid, "tcId \(id)")
                    if let keySet {
                        let text = String(
                            decoding: try JSONSerialization.data(withJSONObject: test["jws"]!),
                            as: UTF8.self
                        )
                        #expect(TokenVerifier(keys: keySet).checkSignature(text) != nil, "tcId \(id)")
                    }
                    continue
                }
                let unsupported =
                    keyAlgorithms.contains(where: Self.unsupportedAlgorithms.contains)
                    || Self.headerAlgorithm(jws).map(Self.unsupportedAlgorithms.contains) == true
                let outcome = keySet.map { TokenVerifier(keys: $0).checkSignature(jws) }
                let accepted = outcome.map { $0 == nil } ?? false
                if id == 357 { jws357 = jws }
                if sameAs357.contains(id) {
                    #expect(jws == jws357, "tcId \(id) is a copy of 357 in the data file (deviation, see above)")
                    #expect(accepted)
                } else if valid && lenientValid.contains(id) {
                    #expect(outcome == .some(.malformed), "tcId \(id): strict base64url (deviation, see above)")
                } else if valid && unsupported {
                    #expect(!accepted, "tcId \(id): unsupported algorithm must not verify")
                } else {
                    #expect(
                        accepted == valid,
                        "tcId \(id): \(test["comment"] ?? "") outcome \(String(describing: outcome))"
                    )
                    if valid && accepted { validAccepted += 1 }
                }
            }
        }
        #expect(checked == root["numberOfTests"] as? Int)
        #expect(validAccepted > 0)
    }
}

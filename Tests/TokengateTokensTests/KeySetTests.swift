//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

@Suite struct KeySetTests {
    func loadError(_ jwks: String) -> KeyLoadingError? {
        do {
            _ = try KeySet(jwks: Array(jwks.utf8))
            return nil
        } catch {
            return error as? KeyLoadingError
        }
    }

    static let secret = Base64URL.encode([UInt8](repeating: 0x42, count: 32))
    static let ecX = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
    static let ecY = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"

    @Test func algorithmsBoundToKeyTypes() throws {
        let oct = try KeySet(jwks: Array(#"{"keys":[{"kty":"oct","alg":"HS256","k":"\#(Self.secret)"}]}"#.utf8))
        #expect(oct.algorithms == [[.hs256]])
        let ec = try KeySet(jwks: Array(#"{"kty":"EC","crv":"P-256","x":"\#(Self.ecX)","y":"\#(Self.ecY)"}"#.utf8))
        #expect(ec.algorithms == [[.es256]], "P-256 serves one algorithm: no alg needed")
        let ed = try KeySet(jwks: Array(#"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#.utf8))
        #expect(ed.algorithms == [[.edDSA]], "Ed25519 serves one algorithm: no alg needed")
        let rsa = try KeyGenerator.generate(algorithm: .rs256, keyID: "r")
        #expect(try KeySet(jwks: Array(rsa.publicJWKS.utf8)).algorithms == [[.rs256]])
    }

    /// An `oct` or `RSA` JWK without `alg` serves several algorithms; the token's header would choose. Refused
    /// unless the configuration's keys entry binds it (`algorithm:`); the JWK's own `alg` always wins.
    @Test func keysServingSeveralAlgorithmsNeedAnAlg() throws {
        let rsa = try KeyGenerator.generate(algorithm: .rs256, keyID: "r")
        let rsaNoAlg = rsa.publicJWKS.replacingOccurrences(of: #""alg" : "RS256","#, with: "")
        #expect(rsaNoAlg != rsa.publicJWKS)
        let rsaError = try #require(self.loadError(rsaNoAlg))
        #expect(rsaError.code == "missing_alg")
        #expect(rsaError.keyID == "r")
        #expect(rsaError.description.contains("RS256, PS256") && rsaError.description.contains("set 'alg'"))
        #expect(try KeySet(jwks: Array(rsaNoAlg.utf8), algorithm: .ps256).algorithms == [[.ps256]])
        #expect(try KeySet(jwks: Array(rsa.publicJWKS.utf8), algorithm: .ps256).algorithms == [[.rs256]])

        for bytes in [32, 64] {
            let secret = Base64URL.encode([UInt8](repeating: 1, count: bytes))
            let octNoAlg = #"{"keys":[{"kty":"oct","kid":"h","k":"\#(secret)"}]}"#
            #expect(self.loadError(octNoAlg)?.code == "missing_alg", "\(bytes)-byte secret")
            #expect(try KeySet(jwks: Array(octNoAlg.utf8), algorithm: .hs256).algorithms == [[.hs256]])
        }
        let long = Base64URL.encode([UInt8](repeating: 1, count: 64))
        #expect(try KeySet(jwks: Array(#"{"kty":"oct","k":"\#(long)"}"#.utf8), algorithm: .hs512).algorithms == [[.hs512]])

        // The fallback must fit the key type, like a JWK's own alg.
        let ec = #"{"kty":"EC","crv":"P-256","x":"\#(Self.ecX)","y":"\#(Self.ecY)"}"#
        #expect(throws: KeyLoadingError.self) { try KeySet(jwks: Array(ec.utf8), algorithm: .rs256) }

        // From a file: the error names the file and the kid; the load's algorithm binds the key.
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("rsa-no-alg-\(UUID()).jwks").path
        try rsaNoAlg.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect {
            _ = try KeySet.load(path: path)
        } throws: { error in
            let description = "\(error)"
            return description.contains(path) && description.contains("kid 'r'") && description.contains("alg")
        }
        #expect(try KeySet.load(path: path, algorithm: .rs256).algorithms == [[.rs256]])
        // Signing keeps its documented default (RS256 for RSA): this rule is about what a verifier accepts.
        let privateNoAlg = rsa.privateJWKS.replacingOccurrences(of: #""alg" : "RS256","#, with: "")
        #expect(try TokenSigner(privateJWKS: Array(privateNoAlg.utf8)).algorithm == .rs256)
    }

    @Test func loadErrorsNameTheKeyAndNeverTheMaterial() throws {
        let cases: [(String, String)] = [
            (
                #"{"keys":[{"kty":"oct","kid":"short","k":"\#(Base64URL.encode([UInt8](repeating: 1, count: 31)))"}]}"#,
                "weak_key"
            ),
            (#"{"keys":[{"kty":"oct","kid":"a","alg":"HS512","k":"\#(Self.secret)"}]}"#, "weak_key"),
            (#"{"keys":[{"kty":"oct","k":""}]}"#, "weak_key"),
            (#"{"keys":[{"kty":"oct","kid":"h","k":"\#(Self.secret)"}]}"#, "missing_alg"),
            (#"{"keys":[{"kty":"oct","alg":"A256GCM","k":"\#(Self.secret)"}]}"#, "unsupported_key"),
            (#"{"keys":[{"kty":"oct","use":"enc","k":"\#(Self.secret)"}]}"#, "unsupported_key"),
            (#"{"keys":[{"kty":"oct","key_ops":["encrypt"],"k":"\#(Self.secret)"}]}"#, "unsupported_key"),
            (#"{"keys":[{"kty":"EC","crv":"P-384","x":"\#(Self.ecX)","y":"\#(Self.ecY)"}]}"#, "unsupported_key"),
            (#"{"keys":[{"kty":"EC","crv":"secp256k1","x":"\#(Self.ecX)","y":"\#(Self.ecY)"}]}"#, "unsupported_key"),
            (
                #"{"keys":[{"kty":"EC","crv":"P-256","x":"\#(Self.ecX)","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a1"}]}"#,
                "invalid_key"
            ),
            (
                #"{"keys":[{"kty":"EC","crv":"P-256","alg":"HS256","x":"\#(Self.ecX)","y":"\#(Self.ecY)"}]}"#,
                "unsupported_key"
            ),
            (
                #"{"keys":[{"kty":"OKP","crv":"X25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#,
                "unsupported_key"
            ),
            (
                #"{"keys":[{"kty":"OKP","crv":"Ed448","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#,
                "unsupported_key"
            ),
            (
                #"{"keys":[{"kty":"RSA","n":"\#(Base64URL.encode([UInt8](repeating: 0xC3, count: 128)))","e":"AQAB"}]}"#,
                "weak_key"
            ),
            (#"{"keys":[{"kty":"foo"}]}"#, "unsupported_key"),
            (#"{"keys":[{"k":"\#(Self.secret)"}]}"#, "invalid_key"),
            (#"{"keys":[{"kty":"oct","k":"\#(Self.secret)="}]}"#, "invalid_key"),
            (#"{"keys":[]}"#, "no_keys"),
            (#"{"keys":{}}"#, "invalid_json"),
            (#"[1]"#, "invalid_json"),
            (#"{"#, "invalid_json"),
            (
                #"{"keys":[{"kty":"oct","alg":"HS256","kid":"a","k":"\#(Self.secret)"},{"kty":"oct","alg":"HS256","kid":"a","k":"\#(Self.secret)"}]}"#,
                "duplicate_kid"
            ),
            (
                #"{"keys":[{"kty":"oct","alg":"HS256","kid":"a","k":"\#(Self.secret)"},{"kty":"oct","alg":"HS256","k":"\#(Self.secret)"}]}"#,
                "missing_kid"
            ),
            (
                #"{"keys":[{"kty":"oct","alg":"HS256","kid":"a","k":"\#(Self.secret)"},{"kty":"EC","kid":"b","crv":"P-256","x":"\#(Self.ecX)","y":"\#(Self.ecY)"}]}"#,
                "mixed_key_types"
            ),
        ]
        for (jwks, code) in cases {
            let error = try #require(self.loadError(jwks), "\(jwks) must not load")
            #expect(error.code == code, "\(jwks): \(error)")
            #expect(!error.description.contains(Self.secret), "no key material in \(error)")
        }
        let named = try #require(
            self.loadError(
                #"{"keys":[{"kty":"oct","alg":"HS256","kid":"ok","k":"\#(Self.secret)"},{"kty":"EC","kid":"bad-one","crv":"P-521","x":"AA","y":"AA"}]}"#
            )
        )
        #expect(named.keyIndex == 1 && named.keyID == "bad-one")
        #expect(named.description.contains("key #1") && named.description.contains("bad-one"))
    }

    @Test func rocaAndExponentOneKeysAreRefused() throws {
        let root = try TestSupport.json(TestSupport.wycheproof.appendingPathComponent("json_web_key_test.json"))
        let groups = root["testGroups"] as! [[String: Any]]
        for comment in ["jws_rsa_roca_key", "exponentOne"] {
            let group = try #require(groups.first { $0["comment"] as? String == comment })
            let data = try JSONSerialization.data(withJSONObject: group["public"]!)
            #expect(throws: KeyLoadingError.self, "\(comment)") { try KeySet(jwks: [UInt8](data)) }
        }
        // A generated key is not mistaken for ROCA.
        for _ in 0..<3 {
            let generated = try KeyGenerator.generate(algorithm: .rs256, keyID: nil)
            _ = try KeySet(jwks: Array(generated.publicJWKS.utf8))
        }
    }

    @Test func pemKeys() throws {
        for (file, algorithm) in [
            ("test-only-eddsa-public.pem", TokenAlgorithm.edDSA), ("test-only-es256-public.pem", .es256),
            ("test-only-rs256-public.pem", .rs256),
        ] {
            let text = String(decoding: try TestSupport.fixture(file), as: UTF8.self)
            let path = TestSupport.fixtures.appendingPathComponent(file).path
            // An RSA key serves RS256 and PS256: it must be told which, as a JWK without `alg` must.
            let bound: TokenAlgorithm? = algorithm == .rs256 ? .rs256 : nil
            if bound != nil {
                let unbound = #expect(throws: KeyLoadingError.self) { try KeySet(pem: text) }
                #expect(unbound?.code == "missing_alg", "\(String(describing: unbound))")
                #expect(throws: KeyLoadingError.self) { try KeySet.load(path: path) }
            }
            let keys = try KeySet(pem: text, algorithm: bound)
            #expect(keys.count == 1 && keys.keyIDs == [nil])
            #expect(keys.algorithms == [[algorithm]])
            let loaded = try KeySet.load(path: path, algorithm: bound)
            #expect(loaded.algorithms == keys.algorithms)
            #expect(throws: KeyLoadingError.self) { try KeySet(pem: text, algorithm: .hs256) }
        }
        #expect(throws: KeyLoadingError.self) {
            try KeySet(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
        }
        #expect(throws: KeyLoadingError.self) {
            try KeySet(pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
        }
    }

    @Test func loadNamesTheFile() throws {
        let missing = "/nonexistent/keys.jwks"
        do {
            _ = try KeySet.load(path: missing)
            Issue.record("a missing file must not load")
        } catch let error as KeyLoadingError {
            #expect(error.code == "unreadable_file" && error.description.contains(missing))
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("weak.jwks").path
        try #"{"keys":[{"kty":"oct","kid":"w","k":"AAAA"}]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        do {
            _ = try KeySet.load(path: path)
            Issue.record("a weak key must not load")
        } catch let error as KeyLoadingError {
            #expect(error.code == "weak_key")
            #expect(
                error.description.contains(path) && error.description.contains("key #0")
                    && error.description.contains("'w'")
            )
        }
    }

    @Test func kidSelectionAndMerging() throws {
        let a = try KeyGenerator.generate(algorithm: .edDSA, keyID: "a")
        let b = try KeyGenerator.generate(algorithm: .edDSA, keyID: "b")
        let merged = try KeySet(jwks: Array(a.publicJWKS.utf8)).merging(try KeySet(jwks: Array(b.publicJWKS.utf8)))
        #expect(merged.keyIDs == ["a", "b"])
        let verifier = TokenVerifier(keys: merged)
        for (keys, kid) in [(a, "a"), (b, "b")] {
            let token = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
                .mint(TokenClaims(subject: "u", issuedAt: TestSupport.now, apiOnly: true))
            #expect(verifier.verify(token, accept: .any, cutoffs: .empty, now: TestSupport.now).token?.keyID == kid)
        }
        #expect(throws: KeyLoadingError.self) { try merged.merging(try KeySet(jwks: Array(a.publicJWKS.utf8))) }
        #expect(throws: KeyLoadingError.self) { try merged.merging(try TestSupport.hmacKeys()) }

        // With several keys a token needs a kid; with one it may omit it.
        let noKid =
            TestSupport.b64u(#"{"alg":"EdDSA"}"#) + "." + TestSupport.b64u(TestSupport.claims()) + "."
            + Base64URL.encode([UInt8](repeating: 0, count: 64))
        #expect(verifier.verify(noKid, accept: .any, cutoffs: .empty, now: TestSupport.now).reason == "unknown_key")
        let hmacNoKid = TestSupport.hs256(header: #"{"alg":"HS256"}"#, payload: TestSupport.claims())
        #expect(
            TokenVerifier(keys: try TestSupport.hmacKeys()).verify(
                hmacNoKid,
                accept: .any,
                cutoffs: .empty,
                now: TestSupport.now
            ).token != nil
        )
    }
}

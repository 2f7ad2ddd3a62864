//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

/// Known attacks on JWT verifiers, each rejected with its reason.
@Suite struct AttackTests {
    let now = TestSupport.now

    func verify(_ token: String, keys: KeySet) -> String? {
        TokenVerifier(keys: keys).verify(token, accept: .any, cutoffs: .empty, now: self.now).reason
    }

    @Test func algNoneIsRejectedWhateverTheKey() throws {
        let payload = TestSupport.b64u(TestSupport.claims())
        for header in [#"{"alg":"none"}"#, #"{"alg":"none","kid":"test-hmac"}"#, #"{"alg":"none","typ":"JWT"}"#] {
            let base = TestSupport.b64u(header) + "." + payload
            for token in [base + ".", base + "." + Base64URL.encode([1, 2, 3])] {
                #expect(self.verify(token, keys: try TestSupport.hmacKeys()) == "alg_not_allowed")
            }
        }
    }

    /// CVE-2015-9235-style key confusion: an HS256 token whose HMAC secret is the server's *public* key bytes
    /// (the JWK JSON, the PEM text, the raw point). The key's type binds it to its algorithm, so the HS256
    /// header is refused before any MAC is computed.
    @Test(arguments: TokenAlgorithm.allCases.filter { !$0.isHMAC })
    func keyConfusionWithPublicKeyAsHMACSecret(_ algorithm: TokenAlgorithm) throws {
        let generated = try KeyGenerator.generate(algorithm: algorithm, keyID: "k1")
        let keys = try KeySet(jwks: Array(generated.publicJWKS.utf8))
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(generated.publicJWKS.utf8)) as? [String: Any]
        )
        let jwk = try #require((object["keys"] as? [[String: Any]])?.first)
        var secrets: [[UInt8]] = [Array(generated.publicJWKS.utf8)]
        for member in ["x", "y", "n"] {
            if let value = jwk[member] as? String {
                secrets.append(Array(value.utf8))
                secrets.append(try #require(Base64URL.decode(value)))
            }
        }
        for secret in secrets {
            for alg in ["HS256", "HS384", "HS512"] {
                let token = TestSupport.hs256(
                    header: #"{"alg":"\#(alg)","kid":"k1"}"#,
                    payload: TestSupport.claims(),
                    secret: secret
                )
                #expect(self.verify(token, keys: keys) == "alg_not_allowed")
            }
        }
    }

    @Test func crossAlgorithmOnAsymmetricKeys() throws {
        // An RSA key bound to RS256 refuses PS256 and the other way round; EC refuses EdDSA.
        let rs = try KeyGenerator.generate(algorithm: .rs256, keyID: "k1")
        let signer = try TokenSigner(privateJWKS: Array(rs.privateJWKS.utf8))
        let token = try signer.mint(TokenClaims(subject: "alice", issuedAt: self.now, apiOnly: true))
        let parts = token.split(separator: ".")
        let psHeader = TestSupport.b64u(#"{"alg":"PS256","kid":"k1"}"#)
        let relabelled = psHeader + "." + parts[1] + "." + parts[2]
        #expect(self.verify(relabelled, keys: try KeySet(jwks: Array(rs.publicJWKS.utf8))) == "alg_not_allowed")
        #expect(self.verify(token, keys: try KeySet(jwks: Array(rs.publicJWKS.utf8))) == nil)
    }

    @Test func signatureStripping() throws {
        let token = TestSupport.hs256(header: TestSupport.header, payload: TestSupport.claims())
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        let keys = try TestSupport.hmacKeys()
        #expect(self.verify(parts[0] + "." + parts[1] + ".", keys: keys) == "bad_signature")
        #expect(self.verify(parts[0] + "." + parts[1], keys: keys) == "malformed")
        #expect(
            self.verify(parts[0] + "." + parts[1] + "." + parts[2].prefix(20), keys: keys) == "malformed"
                || self.verify(parts[0] + "." + parts[1] + "." + parts[2].prefix(20), keys: keys) == "bad_signature"
        )
        #expect(
            self.verify(parts[0] + "." + parts[1] + "." + parts[2].prefix(40), keys: keys) == "bad_signature",
            "a truncated MAC"
        )
    }

    @Test func unknownKid() throws {
        let keys = try TestSupport.hmacKeys()
        for header in [
            #"{"alg":"HS256","kid":"nope"}"#, #"{"alg":"HS256","kid":""}"#,
            #"{"alg":"HS256","kid":"test-hmac "}"#,
        ] {
            #expect(
                self.verify(TestSupport.hs256(header: header, payload: TestSupport.claims()), keys: keys)
                    == "unknown_key"
            )
        }
        #expect(
            self.verify(
                TestSupport.hs256(header: #"{"alg":"HS256","kid":5}"#, payload: TestSupport.claims()),
                keys: keys
            ) == "malformed"
        )
    }

    @Test func derEncodedECDSAIsRejected() throws {
        let generated = try KeyGenerator.generate(algorithm: .es256, keyID: "ec")
        let signer = try TokenSigner(privateJWKS: Array(generated.privateJWKS.utf8))
        let token = try signer.mint(TokenClaims(subject: "alice", issuedAt: self.now, apiOnly: true))
        let keys = try KeySet(jwks: Array(generated.publicJWKS.utf8))
        #expect(self.verify(token, keys: keys) == nil)
        let parts = token.split(separator: ".")
        let raw = try #require(Base64URL.decode(String(parts[2])))
        #expect(raw.count == 64)
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var value = Array(bytes.drop(while: { $0 == 0 }))
            if value.isEmpty { value = [0] }
            if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(raw[0..<32]) + integer(raw[32..<64])
        let der = [0x30, UInt8(body.count)] + body
        let derToken = parts[0] + "." + parts[1] + "." + Base64URL.encode(der)
        #expect(self.verify(derToken, keys: keys) == "bad_signature")
        // Neither a zero-padded 65-byte nor a 63-byte raw form.
        #expect(
            self.verify(parts[0] + "." + parts[1] + "." + Base64URL.encode(raw + [0]), keys: keys) == "bad_signature"
        )
        #expect(
            self.verify(parts[0] + "." + parts[1] + "." + Base64URL.encode(raw.dropLast()), keys: keys)
                == "bad_signature"
        )
    }

    @Test func oversizedAndGarbageInput() throws {
        let keys = try TestSupport.hmacKeys()
        let big = TestSupport.hs256(
            header: TestSupport.header,
            payload: TestSupport.claims(extra: #","pad":"\#(String(repeating: "x", count: 7000))""#)
        )
        #expect(big.utf8.count > 8192)
        #expect(self.verify(big, keys: keys) == "malformed")
        let fits = TestSupport.hs256(
            header: TestSupport.header,
            payload: TestSupport.claims(extra: #","pad":"\#(String(repeating: "x", count: 5800))""#)
        )
        #expect(fits.utf8.count <= 8192)
        #expect(self.verify(fits, keys: keys) == nil, "large but within the limit, and beyond the 1 KiB stack case")
        for garbage in [
            "", ".", "..", "...", "a.b.c", "a.b.c.d", "\u{0}\u{0}.\u{0}.\u{0}", String(repeating: ".", count: 9000),
            "eyJ.eyJ.", "🙂.🙂.🙂", "e30.e30.", "W10.e30.AAAA", "bnVsbA.e30.AAAA",
        ] {
            #expect(self.verify(garbage, keys: keys) == "malformed", "garbage \(garbage.prefix(20))")
        }
        // Random bytes never crash and never verify.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let length = Int.random(in: 0..<400, using: &generator)
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let result = bytes.withUnsafeBytes {
                TokenVerifier(keys: keys).verify($0, accept: .any, cutoffs: .empty, now: self.now)
            }
            #expect(result.token == nil)
        }
    }

    @Test func base64Strictness() throws {
        let keys = try TestSupport.hmacKeys()
        let token = TestSupport.hs256(header: TestSupport.header, payload: TestSupport.claims())
        let parts = token.split(separator: ".").map(String.init)
        let variants = [
            parts[0] + "=." + parts[1] + "." + parts[2],
            parts[0] + "." + parts[1] + "==." + parts[2],
            parts[0] + "." + parts[1] + "." + parts[2] + "=",
            parts[0].replacingOccurrences(of: "J", with: "+") + "." + parts[1] + "." + parts[2],
            parts[0] + "." + parts[1] + "."
                + parts[2].replacingOccurrences(of: "_", with: "/").replacingOccurrences(of: "-", with: "+") + "+/",
            " " + token,
            token + "\n",
            parts[0] + " ." + parts[1] + "." + parts[2],
            parts[0] + "." + parts[1] + "\t." + parts[2],
        ]
        for variant in variants {
            #expect(self.verify(variant, keys: keys) == "malformed", "\(variant.prefix(60))")
        }
        // Non-canonical trailing bits: "eyJ..." headers end in a partial quantum; flip an unused bit.
        var header = #"{"alg":"HS256","kid":"test-hmac","x":1}"#
        while header.utf8.count % 3 == 0 { header = header.replacingOccurrences(of: "1}", with: "12}") }
        let encoded = TestSupport.b64u(header)
        #expect(encoded.count % 4 != 0)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let last = alphabet.firstIndex(of: encoded.last!)!
        let sloppy = String(encoded.dropLast()) + String(alphabet[last + 1])
        #expect(Base64URL.decode(sloppy) == nil)
        #expect(Base64URL.decode(encoded) == Array(header.utf8))
    }

    @Test func duplicateMemberNames() throws {
        let keys = try TestSupport.hmacKeys()
        func run(_ header: String, _ payload: String) -> String? {
            self.verify(TestSupport.hs256(header: header, payload: payload), keys: keys)
        }
        #expect(
            run(TestSupport.header, #"{"sub":"alice","sub":"admin","iat":\#(self.now),"api_only":true}"#) == "malformed"
        )
        #expect(
            run(TestSupport.header, #"{"sub":"alice","iat":\#(self.now),"api_only":false,"api_only":true}"#)
                == "malformed"
        )
        #expect(
            run(TestSupport.header, #"{"sub":"alice","iat":\#(self.now),"x":1,"x":2}"#) == "malformed",
            "any duplicate, not only known claims"
        )
        #expect(
            run(TestSupport.header, #"{"s\u0075b":"admin","sub":"alice","iat":\#(self.now)}"#) == "malformed",
            "duplicates after unescaping"
        )
        #expect(run(#"{"alg":"HS256","alg":"none","kid":"test-hmac"}"#, TestSupport.claims()) == "malformed")
        #expect(run(#"{"alg":"HS256","kid":"test-hmac","kid":"other"}"#, TestSupport.claims()) == "malformed")
        // Same name in a nested object is not a duplicate at the top level.
        #expect(run(TestSupport.header, TestSupport.claims(extra: #","ctx":{"sub":"x"}"#)) == nil)
    }

    @Test func nonObjectHeaderOrPayload() throws {
        let keys = try TestSupport.hmacKeys()
        for payload in [
            "[]", "\"alice\"", "42", "null", "true", #"[{"sub":"alice"}]"#, "", "{", #"{"sub":"a",}"#,
            #"{"sub":"a"}x"#, #"{"sub":"a"}{}"#, #"{'sub':'a'}"#, "{\"sub\":\"a\u{1}\"}",
        ] {
            #expect(
                self.verify(TestSupport.hs256(header: TestSupport.header, payload: payload), keys: keys) == "malformed",
                "payload \(payload)"
            )
        }
        for header in [
            "[]", "\"HS256\"", "null", "", #"{"alg":"HS256","kid":"test-hmac"} x"#, #"{"kid":"test-hmac"}"#,
            #"{"alg":null,"kid":"test-hmac"}"#,
        ] {
            #expect(
                self.verify(TestSupport.hs256(header: header, payload: TestSupport.claims()), keys: keys)
                    == "malformed",
                "header \(header)"
            )
        }
        // Deep nesting is bounded.
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(
            self.verify(
                TestSupport.hs256(header: TestSupport.header, payload: TestSupport.claims(extra: ",\"d\":" + deep)),
                keys: keys
            ) == "malformed"
        )
        // Invalid UTF-8 inside a string (an overlong "/", a lone continuation byte, a UTF-16 surrogate, > U+10FFFF).
        for bad in [[0xC0, 0xAF], [0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xFF]] as [[UInt8]] {
            let payload = Array(#"{"sub":"a"#.utf8) + bad + Array(#"","iat":\#(self.now)}"#.utf8)
            let token = TestSupport.hs256(header: TestSupport.header, payloadBytes: payload)
            #expect(self.verify(token, keys: keys) == "malformed", "bytes \(bad)")
        }
        let fine = Array(#"{"sub":"a"#.utf8) + [0xF0, 0x9F, 0x98, 0x80] + Array(#"","iat":\#(self.now)}"#.utf8)
        #expect(self.verify(TestSupport.hs256(header: TestSupport.header, payloadBytes: fine), keys: keys) == nil)
    }

    @Test func critHeaderIsRejected() throws {
        let keys = try TestSupport.hmacKeys()
        for header in [
            #"{"alg":"HS256","kid":"test-hmac","crit":["exp"],"exp":1}"#,
            #"{"alg":"HS256","kid":"test-hmac","crit":[]}"#,
            #"{"alg":"HS256","kid":"test-hmac","crit":["b64"],"b64":false}"#,
        ] {
            #expect(
                self.verify(TestSupport.hs256(header: header, payload: TestSupport.claims()), keys: keys) == "malformed"
            )
        }
    }

    @Test func iatTypes() throws {
        let keys = try TestSupport.hmacKeys()
        func run(_ iat: String?) -> String? {
            let member = iat.map { #","iat":\#($0)"# } ?? ""
            return self.verify(
                TestSupport.hs256(header: TestSupport.header, payload: #"{"sub":"alice","api_only":true\#(member)}"#),
                keys: keys
            )
        }
        #expect(run(nil) == "missing_claim")
        #expect(run("\"1759999940\"") == "malformed")
        #expect(run("1759999940.25") == "malformed")
        #expect(run("1759999940") == nil)
    }

    @Test func embeddedKeyHeadersAreIgnored() throws {
        // An attacker's own key in `jwk`/`jku`/`x5u` never replaces the configured key.
        let attacker: [UInt8] = Array(repeating: 9, count: 32)
        let header =
            #"{"alg":"HS256","kid":"test-hmac","jwk":{"kty":"oct","k":"\#(Base64URL.encode(attacker))"},"jku":"https://evil.example/jwks"}"#
        let token = TestSupport.hs256(header: header, payload: TestSupport.claims(), secret: attacker)
        #expect(self.verify(token, keys: try TestSupport.hmacKeys()) == "bad_signature")
    }
}

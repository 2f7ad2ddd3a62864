//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateSessionCookies

/// The vectors the frameworks' own test suites publish (data only): Rails' key generator, MessageVerifier,
/// MessageEncryptor and cookie jar (rails/rails, activesupport/test and actionpack/test), cookie-session's signed
/// cookies (expressjs/cookie-session, test/test.js) and keygrip's signatures (crypto-utils/keygrip,
/// test/keygrip.js).
@Suite struct FrameworkVectorTests {
    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    static let userFields = SessionCookieFields(
        userID: SessionJSONPointer("/user_id")!, loginTime: SessionJSONPointer("/login_at")!)

    // MARK: Rails: ActiveSupport::KeyGenerator (activesupport/test/key_generator_test.rb, "Expected results")

    @Test func railsKeyGeneratorSHA1() throws {
        // KeyGenerator.new("0" * 64): 2**16 iterations, SHA1 (the class default).
        let secret = Array(String(repeating: "0", count: 64).utf8)
        let salt = Array("some_salt".utf8)
        let full = try #require(SessionCookieDigest.sha1.pbkdf2(secret: secret, salt: salt, iterations: 65536, length: 64))
        #expect(
            Self.hex(full)
                == "b129376f68f1ecae788d7433310249d65ceec090ecacd4c872a3a9e9ec78e055739be5cc6956345d5ae38e7e1daa66f1de587dc8da2bf9e8b965af4b3918a122"
        )
        let short = try #require(SessionCookieDigest.sha1.pbkdf2(secret: secret, salt: salt, iterations: 65536, length: 32))
        #expect(Self.hex(short) == "b129376f68f1ecae788d7433310249d65ceec090ecacd4c872a3a9e9ec78e055")
        let two = try #require(SessionCookieDigest.sha1.pbkdf2(secret: secret, salt: salt, iterations: 2, length: 64))
        #expect(
            Self.hex(two)
                == "cbea7f7f47df705967dc508f4e446fd99e7797b1d70011c6899cd39bbe62907b8508337d678505a7dc8184e037f1003ba3d19fc5d829454668e91d2518692eae"
        )
    }

    @Test func railsKeyGeneratorSHA256() throws {
        // "With custom hash digest class": hash_digest_class = SHA256, what Rails 7.0's defaults set.
        let key = try #require(
            SessionCookieDigest.sha256.pbkdf2(
                secret: Array(String(repeating: "0", count: 64).utf8), salt: Array("some_salt".utf8), iterations: 65536,
                length: 64))
        #expect(
            Self.hex(key)
                == "c92322ad55ee691520e8e0f279b53e7a5cc9c1f8efca98295ae252b04cc6e2274c3aaf75ef53b260a6dc548f3e5fbb8af0edf10e7663cf7054c35bcc12835fc0"
        )
    }

    // MARK: Rails: cookie jar vectors (actionpack/test/dispatch/cookies_test.rb)

    /// The suite's jar: secret_key_base "b3c631c314c0bbca50c1b2843150fe33", KeyGenerator with 2 iterations (SHA1).
    static func cookiesTestVerifier(_ protection: RailsCookieOptions.Protection) throws -> SessionCookieVerifier {
        try SessionCookieVerifier(
            format: .rails(
                RailsCookieOptions(version: .v6_1, cookieName: "favorite", protection: protection, iterations: 2)),
            secrets: [SessionCookieSecret(bytes: Array("b3c631c314c0bbca50c1b2843150fe33".utf8))],
            fields: Self.userFields)
    }

    @Test func railsEncryptedCookieVectorOpens() throws {
        // cookies.encrypted[:favorite] = { value: "5-2-Stable Chocolate Cookies", expires: 1000.years } from
        // 5-2-stable, before cookies carried their name as purpose: the GCM tag opens (the key derivation, the
        // three-part split and the cipher are right), and the envelope's null purpose is not cookie.favorite.
        let verifier = try Self.cookiesTestVerifier(.encrypted)
        let cookie =
            "KvH5lIHvX5vPQkLIK63r/NuIMwzWky8M0Zwk8SZ6DwUv8+srf36geR4nWq5KmhsZIYXA8NRdCZYIfxMKJsOFlz77Gf+Fq8vBBCWJTp95rx39A28TCUTJEyMhCNJO5eie7Skef76Qt5Jo/SCnIADAhzyGQkGBopKRcA==--qXZZFWGbCy6N8AGy--WswoH+xHrNh9MzSXDpB2fA=="
        let result = verifier.verify(cookie, accept: .any, cutoffs: .empty, now: 1_700_000_000)
        #expect(result.rejection == .wrongPurpose)
        // The same bytes URL-escaped, as a browser sends them back, read the same.
        let escaped = PercentCoding.encode(Array(cookie.utf8))
        #expect(verifier.verify(escaped, accept: .any, cutoffs: .empty, now: 1_700_000_000).rejection == .wrongPurpose)
        // With another iteration count the key differs and the tag fails.
        let other = try SessionCookieVerifier(
            format: .rails(RailsCookieOptions(version: .v6_1, cookieName: "favorite", iterations: 1000)),
            secrets: [SessionCookieSecret(bytes: Array("b3c631c314c0bbca50c1b2843150fe33".utf8))],
            fields: Self.userFields)
        #expect(other.verify(cookie, accept: .any, cutoffs: .empty, now: 1_700_000_000).rejection == .badSignature)
        // And one flipped ciphertext character fails the GCM tag.
        var bytes = Array(cookie.utf8)
        bytes[10] = bytes[10] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(
            verifier.verify(String(decoding: bytes, as: UTF8.self), accept: .any, cutoffs: .empty, now: 1_700_000_000)
                .rejection == .badSignature)
    }

    @Test func railsSignedCookieVectorVerifiesAndItsPurposeIsChecked() throws {
        // cookies.signed[:favorite] from 5-2-stable: {"_rails":{"message":<Marshal>,"exp":"3018-…","pur":null}}.
        // The HMAC-SHA1 over the data verifies; the null purpose is not cookie.favorite.
        let verifier = try Self.cookiesTestVerifier(.signed)
        let cookie =
            "eyJfcmFpbHMiOnsibWVzc2FnZSI6IkJBaEpJaUUxTFRJdFUzUmhZbXhsSUVOb2IyTnZJRU5vYVhBZ1EyOXZhMmxsQmpvR1JWUT0iLCJleHAiOiIzMDE4LTA3LTExVDE2OjExOjI2Ljc1M1oiLCJwdXIiOm51bGx9fQ==--7df5d885b78b70a501d6e82140ae91b24060ac00"
        #expect(verifier.verify(cookie, accept: .any, cutoffs: .empty, now: 1_700_000_000).rejection == .wrongPurpose)
        let wrongDigest = cookie.dropLast() + (cookie.last == "0" ? "1" : "0")
        #expect(
            verifier.verify(String(wrongDigest), accept: .any, cutoffs: .empty, now: 1_700_000_000).rejection
                == .badSignature)
        // The 5-2-stable cookie without metadata is bare Marshal: refused.
        let bare = "BAhJIiE1LTItU3RhYmxlIENob2NvIENoaXAgQ29va2llBjoGRVQ=--50bbdbf8d64f5a3ec3e54878f54d4f55b6cb3aff"
        #expect(verifier.verify(bare, accept: .any, cutoffs: .empty, now: 1_700_000_000).rejection == .marshalRefused)
    }

    @Test func railsCookieStoreMarshalSessionIsRefused() throws {
        // actionpack/test/dispatch/session/cookie_store_test.rb, EncryptedSerializedCookie: a Marshal-serialized
        // session (with an object of an application class in it), AES-256-GCM under
        // KeyGenerator("b3c631c314c0bbca50c1b2843150fe33", iterations: 1000).generate_key(salt, 32).
        let verifier = try SessionCookieVerifier(
            format: .rails(RailsCookieOptions(version: .v6_1, cookieName: "_myapp_session")),
            secrets: [SessionCookieSecret(bytes: Array("b3c631c314c0bbca50c1b2843150fe33".utf8))],
            fields: Self.userFields)
        let cookie =
            "9RZ2Fij0qLveUwM4s+CCjGqhpjyUC8jiBIf/AiBr9M3TB8xh2vQZtvSOMfN3uf6oYbbpIDHAcOFIEl69FcW1ozQYeSrCLonYCazoh34ZdYskIQfGwCiSYleVXG1OD9Z4jFqeVArw4Ewm0paOOPLbN1rc6A==--I359v/KWdZ1ok0ey--JFFhuPOY7WUo6tB/eP05Aw=="
        #expect(verifier.verify(cookie, accept: .any, cutoffs: .empty, now: 1_700_000_000).rejection == .marshalRefused)
    }

    @Test func railsMessageEncryptorVectorWithRawKey() throws {
        // activesupport/test/message_encryptor_test.rb,
        // test_backwards_compatibility_decrypt_previously_encrypted_messages_without_metadata: "Ruby on Rails",
        // Marshal, no envelope, AES-256-GCM under a raw 32-byte key.
        let key: [UInt8] = [
            0xB7, 0xF0, 0xBC, 0x57, 0xB1, 0x18, 0x60, 0xAB, 0xF0, 0x81, 0x10, 0xA4, 0x24, 0xF4, 0x34, 0xEC, 0xA1, 0xDC,
            0xC1, 0xDD, 0x44, 0xAF, 0xA9, 0xB8, 0x14, 0xCD, 0x18, 0x9A, 0x99, 0x20, 0x80, 0x29,
        ]
        let codec = RailsCookieCodec(
            options: RailsCookieOptions(version: .v7_1, cookieName: "x"), gcmKeys: [try #require(GCMKey(key))],
            hmacKeys: [], purpose: nil, fields: Self.userFields)
        let message = "9cVnFs2O3lL9SPvIJuxBOLS51nDiBMw=--YNI5HAfHEmZ7VDpl--ddFJ6tXA0iH+XGcCgMINYQ=="
        var bytes = Array(message.utf8)
        let read = bytes.withUnsafeMutableBytes { codec.read(UnsafeRawBufferPointer($0)) }
        guard case .rejected(let rejection) = read else {
            Issue.record("a Marshal message was read")
            return
        }
        #expect(rejection == .marshalRefused)
    }

    @Test func rails70LegacyEnvelopeVectors() throws {
        // activesupport/test/messages/message_verifier_metadata_test.rb: "Message generated by Rails 7.0" with
        // MessageVerifier.new("secret", serializer: JSON) — HMAC-SHA1 with the raw key, the legacy envelope, purpose
        // "test". Its data is the JSON string "legacy", not a session object: everything up to that is checked.
        let codec = RailsCookieCodec(
            options: RailsCookieOptions(version: .v7_0, cookieName: "x", protection: .signed), gcmKeys: [],
            hmacKeys: [try #require(HMACKey(digest: .sha1, secret: Array("secret".utf8)))], purpose: "test",
            fields: Self.userFields)
        func read(_ text: String) -> SessionRead {
            var bytes = Array(text.utf8)
            return bytes.withUnsafeMutableBytes { codec.read(UnsafeRawBufferPointer($0)) }
        }
        let withExpiry =
            "eyJfcmFpbHMiOnsibWVzc2FnZSI6IklteGxaMkZqZVNJPSIsImV4cCI6IjMwMDAtMDEtMDFUMDA6MDA6MDAuMDAwWiIsInB1ciI6InRlc3QifX0=--81b11c317dba91cedd86ab79b7d7e68de8d290b3"
        let withoutExpiry =
            "eyJfcmFpbHMiOnsibWVzc2FnZSI6IklteGxaMkZqZVNJPSIsImV4cCI6bnVsbCwicHVyIjoidGVzdCJ9fQ==--53b1fc02f5b89b2da8c6ce94efa95f5cb656d975"
        for vector in [withExpiry, withoutExpiry] {
            guard case .rejected(let rejection) = read(vector) else {
                Issue.record("a non-object session was accepted")
                continue
            }
            #expect(rejection == .notJSON)
        }
        // The exp of the first is 3000-01-01T00:00:00.000Z.
        var expiry = Array("3000-01-01T00:00:00.000Z".utf8)
        #expect(expiry.withUnsafeMutableBytes { RailsTimestamp.parse(UnsafeRawBufferPointer($0)) } == 32_503_680_000)
        #expect(RailsTimestamp.format(32_503_680_000) == "3000-01-01T00:00:00.000Z")
        let tampered = withExpiry.replacingOccurrences(of: "81b11c", with: "81b11d")
        guard case .rejected(.badSignature) = read(tampered) else {
            Issue.record("a tampered digest was accepted")
            return
        }
    }

    // MARK: cookie-session (test/test.js: keys ["a", "b"], req.session.message = "hi")

    @Test func cookieSessionVectors() throws {
        let codec = try CookieSessionCodec(
            options: CookieSessionOptions(),
            secrets: [SessionCookieSecret(unchecked: Array("a".utf8)), SessionCookieSecret(unchecked: Array("b".utf8))],
            fields: SessionCookieFields(
                userID: SessionJSONPointer("/message")!, loginTime: SessionJSONPointer("/login_at")!))
        func read(_ value: String, _ signature: String?) -> SessionRead {
            var value = value
            return value.withUTF8 { v in
                guard var signature else { return codec.read(UnsafeRawBufferPointer(v), signature: nil) }
                return signature.withUTF8 { codec.read(UnsafeRawBufferPointer(v), signature: UnsafeRawBufferPointer($0)) }
            }
        }
        // "should set cookie signature with first key": minting {"message":"hi"} gives exactly the suite's cookies.
        let minted = codec.make(sessionJSON: Array(#"{"message":"hi"}"#.utf8))
        #expect(minted.value == "eyJtZXNzYWdlIjoiaGkifQ==")
        #expect(minted.signature == "vdp2-kj-91tgzbWcV1QzofT3hu0")
        // "should accept session with signature" / "with secondary signature": authentic, and the session has
        // the user field but no login time, which is the next thing refused.
        for signature in ["vdp2-kj-91tgzbWcV1QzofT3hu0", "SiRRAEncekXEzVdvey_7SkWaMM4"] {
            guard case .rejected(let rejection) = read("eyJtZXNzYWdlIjoiaGkifQ==", signature) else {
                Issue.record("a session without a login time was accepted")
                continue
            }
            #expect(rejection == .missingLoginTime)
        }
        // "should reject session with invalid signature" / "with no signature".
        guard case .rejected(.badEncoding) = read("eyJtZXNzYWdlIjoiaGkifQ==", "foobar"),
            case .rejected(.missingSignatureCookie) = read("eyJtZXNzYWdlIjoiaGkifQ==", nil),
            case .rejected(.badSignature) = read("eyJtZXNzYWdlIjoiaGkifQ==", "xmM8HQl2eBtPP9nmZ7BK_wpqoxQ")
        else {
            Issue.record("a bad or missing signature was not refused for what it is")
            return
        }
    }

    @Test func keygripVectors() throws {
        // keygrip's test/keygrip.js: sign("Keyboard Cat has a hat.") with "SEKRIT1" (SHA1, then SHA256) and
        // "SEKRIT2", in URL-safe base64 without padding.
        let data = Array("Keyboard Cat has a hat.".utf8)
        func sign(_ key: String, _ digest: SessionCookieDigest) throws -> String {
            let hmac = try #require(HMACKey(digest: digest, secret: Array(key.utf8)))
            return String(decoding: SessionBase64.urlSafeUnpadded.encode(hmac.tag(data)), as: UTF8.self)
        }
        #expect(try sign("SEKRIT1", .sha1) == "34Sr3OIsheUYWKL5_w--zJsdSNk")
        #expect(try sign("SEKRIT2", .sha1) == "_jl9qXYgk5AgBiKFOPYK073FMEQ")
        #expect(try sign("SEKRIT1", .sha256) == "pu97aPRZRLKi3-eANtIlTG_CwSc39mAcIZ1c6FxsGCk")
        let hmac = try #require(HMACKey(digest: .sha1, secret: Array("SEKRIT1".utf8)))
        #expect(Self.hex(hmac.tag(data)) == "df84abdce22c85e51858a2f9ff0fbecc9b1d48d9")
    }
}

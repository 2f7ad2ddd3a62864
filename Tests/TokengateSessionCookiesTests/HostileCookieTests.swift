//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateSessionCookies

/// Bad cookies of every shape, made as an attacker would (and, where the attack needs it, signed with the real
/// key, as after a leak or by a site bug): each gets its specific refusal, within bounded memory, and nothing
/// crashes.
@Suite struct HostileCookieTests {
    static let secret = try! SessionCookieSecret(bytes: Array("hostile-test-only-secret-0123456789".utf8))
    static let fields = SessionCookieFields(
        userID: SessionJSONPointer("/user")!, loginTime: SessionJSONPointer("/login_at")!,
        apiOnly: SessionJSONPointer("/api")!)
    static let now: Int64 = 1_765_000_000

    static func verifier(_ format: SessionCookieFormat) -> SessionCookieVerifier {
        try! SessionCookieVerifier(format: format, secrets: [Self.secret], fields: Self.fields)
    }

    static let flask = verifier(.flask(FlaskSessionOptions()))
    static let django = verifier(.django(DjangoSessionOptions()))
    static let rails = verifier(.rails(RailsCookieOptions(version: .v7_1, cookieName: "_s")))
    static let railsSigned = verifier(.rails(RailsCookieOptions(version: .v7_1, cookieName: "_s", protection: .signed)))
    static let cookieSession = verifier(.cookieSession(CookieSessionOptions()))

    static func check(_ verifier: SessionCookieVerifier, _ value: String, _ signature: String? = nil)
        -> SessionCookieRejection?
    {
        verifier.verify(value, signature: signature, accept: .any, cutoffs: .empty, now: Self.now).rejection
    }

    /// Signs `payload` text (already encoded) the Flask way with the real key.
    static func flaskSigned(_ payload: [UInt8]) -> String {
        guard case .timestamped(let codec) = Self.flask.codec else { preconditionFailure("not flask") }
        return codec.sign(payloadText: payload, now: Self.now)
    }

    static func cookieSessionSigned(_ json: [UInt8]) -> (String, String) {
        guard case .cookieSession(let codec) = Self.cookieSession.codec else { preconditionFailure("not cs") }
        return codec.sign(valueText: SessionBase64.standardPadded.encode(json))
    }

    static let goodJSON = Array(#"{"user":"u1","login_at":1764999000}"#.utf8)

    @Test func aGoodCookieOfEachFormatPasses() throws {
        let minters: [(SessionCookieFormat, SessionCookieVerifier)] = [
            (Self.flask.format, Self.flask), (Self.django.format, Self.django), (Self.rails.format, Self.rails),
            (Self.railsSigned.format, Self.railsSigned), (Self.cookieSession.format, Self.cookieSession),
        ]
        for (format, verifier) in minters {
            let minter = try SessionCookieMinter(format: format, secrets: [Self.secret], fields: Self.fields)
            let cookie = try minter.mint(userID: "u1", loginTime: Self.now - 60, apiOnly: true, now: Self.now)
            let result = verifier.verify(
                cookie.value, signature: cookie.signature, accept: .any, cutoffs: .empty, now: Self.now)
            #expect(result.token?.subject == "u1", "\(format.name): \(result) \(cookie.value)")
            #expect(result.token?.kind == .api)
        }
    }

    @Test func truncatedCookies() throws {
        let minter = try SessionCookieMinter(format: Self.flask.format, secrets: [Self.secret], fields: Self.fields)
        let good = try minter.mint(userID: "u1", loginTime: Self.now - 60, now: Self.now).value
        #expect(Self.check(Self.flask, "") == .truncated)
        #expect(Self.check(Self.flask, "abc") == .truncated)
        #expect(Self.check(Self.flask, String(good.prefix(while: { $0 != "." }))) == .truncated)
        // Cut inside the signature: its length no longer fits the digest.
        #expect(Self.check(Self.flask, String(good.dropLast(3))) == .badEncoding)
        #expect(Self.check(Self.django, "e30:1") == .truncated)
        #expect(Self.check(Self.rails, "abc--def") == .truncated)
        #expect(Self.check(Self.railsSigned, "abc") == .truncated)
        #expect(Self.check(Self.cookieSession, "e30=", nil) == .missingSignatureCookie)
    }

    @Test func wrongBase64AndBadPadding() throws {
        // Rails: padding missing, padding where none belongs, the URL-safe alphabet, a bad escape.
        let nonce = "AAAAAAAAAAAAAAAA"
        let tag = "AAAAAAAAAAAAAAAAAAAAAA=="
        #expect(Self.check(Self.rails, "YWJj--\(nonce)--AAAAAAAAAAAAAAAAAAAAAA") == .badEncoding)
        #expect(Self.check(Self.rails, "YWJjZA--\(nonce)--\(tag)") == .badEncoding)
        #expect(Self.check(Self.rails, "YW=j--\(nonce)--\(tag)") == .badEncoding)
        #expect(Self.check(Self.rails, "YW-_--\(nonce)--\(tag)") == .badEncoding)
        #expect(Self.check(Self.rails, "YWJj%2--\(nonce)--\(tag)") == .badEncoding)
        #expect(Self.check(Self.rails, "YWJj--\(nonce)--\(tag)--YWJj") == .badEncoding)
        // Non-zero unused bits in the last character (two encodings of one byte string).
        #expect(Self.check(Self.rails, "YWJjZB==--\(nonce)--\(tag)") == .badEncoding)
        // Authentic length, wrong key: the GCM tag fails.
        #expect(Self.check(Self.rails, "YWJj--\(nonce)--\(tag)") == .badSignature)
        // Signatures of the wrong length, or not base64url, never reach the MAC.
        #expect(Self.check(Self.flask, "e30.AAAA.c2ln") == .badEncoding)
        #expect(Self.check(Self.flask, "e30.AAAA.\(String(repeating: "+", count: 27))") == .badEncoding)
        #expect(Self.check(Self.django, "e30:1:\(String(repeating: "A", count: 43))") == .badSignature)
        #expect(Self.check(Self.django, "e30:1:\(String(repeating: "A", count: 43))=") == .badEncoding)
        // A payload whose base64 is broken, signed with the real key: refused after the MAC, as bad encoding.
        #expect(Self.check(Self.flask, Self.flaskSigned(Array("e30=".utf8))) == .badEncoding)
        #expect(Self.check(Self.flask, Self.flaskSigned(Array("A".utf8))) == .badEncoding)
        let (value, signature) = Self.cookieSessionSigned(Self.goodJSON)
        #expect(Self.check(Self.cookieSession, value, String(signature.dropLast())) == .badEncoding)
        #expect(Self.check(Self.cookieSession, String(value.dropLast()), signature) == .badSignature)
    }

    @Test func oversizeCookies() {
        let huge = String(repeating: "A", count: SessionCookieLimits.maxCookieLength + 1)
        for verifier in [Self.flask, Self.django, Self.rails, Self.railsSigned, Self.cookieSession] {
            #expect(Self.check(verifier, huge, "x") == .oversize)
        }
    }

    @Test func compressionBombsAreCapped() throws {
        // 4 MiB of white space inside a JSON object compresses to about 4 KiB; signed with the real key it
        // would still make the reader inflate 4 MiB without the cap. The cap stops it at 64 KiB.
        var json = [UInt8(ascii: "{")] + [UInt8](repeating: 0x20, count: 4 << 20) + [UInt8(ascii: "}")]
        var payload = CompressiblePayload.make(json)
        #expect(payload.first == UInt8(ascii: "."))
        #expect(payload.count < SessionCookieLimits.maxCookieLength)
        #expect(Self.check(Self.flask, Self.flaskSigned(payload)) == .inflatedTooLarge)
        // Just under the cap inflates (and then lacks the fields).
        json = [UInt8(ascii: "{")] + [UInt8](repeating: 0x20, count: SessionCookieLimits.maxInflatedLength - 2)
            + [UInt8(ascii: "}")]
        payload = CompressiblePayload.make(json)
        #expect(Self.check(Self.flask, Self.flaskSigned(payload)) == .missingUser)
        // Not zlib at all, a truncated stream, trailing bytes after the stream.
        #expect(Self.check(Self.flask, Self.flaskSigned(Array(".AAAA".utf8))) == .badCompression)
        let good = CompressiblePayload.make(Self.goodJSON + [UInt8](repeating: 0x20, count: 200))
        let decoded = SessionBase64.urlSafeUnpadded.decode(Array(good.dropFirst()))!
        let truncated = [UInt8(ascii: ".")] + SessionBase64.urlSafeUnpadded.encode(Array(decoded.dropLast(4)))
        #expect(Self.check(Self.flask, Self.flaskSigned(truncated)) == .badCompression)
        let trailing = [UInt8(ascii: ".")] + SessionBase64.urlSafeUnpadded.encode(decoded + [0])
        #expect(Self.check(Self.flask, Self.flaskSigned(trailing)) == .badCompression)
    }

    @Test func nestedJSONDepth() {
        let deep = Array("{\"a\":".utf8) + [UInt8](repeating: UInt8(ascii: "["), count: 30_000)
            + [UInt8](repeating: UInt8(ascii: "]"), count: 30_000) + [UInt8(ascii: "}")]
        // 60 KiB of brackets (inside the inflate cap) compresses into a cookie.
        let payload = CompressiblePayload.make(deep)
        #expect(Self.check(Self.flask, Self.flaskSigned(payload)) == .jsonTooDeep)
        let (value, signature) = Self.cookieSessionSigned(
            Array("{\"a\":".utf8) + [UInt8](repeating: UInt8(ascii: "["), count: 40)
                + [UInt8](repeating: UInt8(ascii: "]"), count: 40) + [UInt8(ascii: "}")])
        #expect(Self.check(Self.cookieSession, value, signature) == .jsonTooDeep)
        // 31 levels below the top are fine.
        let (fine, fineSignature) = Self.cookieSessionSigned(
            Array(#"{"user":"u1","login_at":1764999000,"a":"#.utf8) + [UInt8](repeating: UInt8(ascii: "["), count: 31)
                + [UInt8](repeating: UInt8(ascii: "]"), count: 31) + [UInt8(ascii: "}")])
        #expect(Self.cookieSession.verify(fine, signature: fineSignature, accept: .any, cutoffs: .empty, now: Self.now).token != nil)
    }

    @Test func badJSONAndFields() {
        let cases: [(String, SessionCookieRejection)] = [
            (#"{"user":"u1","login_at":1764999000"#, .badJSON),
            (#"{"user":"u1","login_at":1764999000,}"#, .badJSON),
            (#"{"user":"u1\u","login_at":1764999000}"#, .badJSON),
            (#"{"user":"\ud800","login_at":1764999000}"#, .badJSON),
            (#"{"user":"u1","login_at":01}"#, .badJSON),
            (#"["user"]"#, .notJSON),
            (#"{"user":"u1","user":"admin","login_at":1764999000}"#, .duplicateField),
            (#"{"login_at":1764999000}"#, .missingUser),
            (#"{"user":null,"login_at":1764999000}"#, .missingUser),
            (#"{"user":" u1","login_at":1764999000}"#, .badUser),
            (#"{"user":"u\n1","login_at":1764999000}"#, .badUser),
            (#"{"user":true,"login_at":1764999000}"#, .badUser),
            (#"{"user":1.5,"login_at":1764999000}"#, .badUser),
            (#"{"user":"u1"}"#, .missingLoginTime),
            (#"{"user":"u1","login_at":"1764999000"}"#, .badLoginTime),
            (#"{"user":"u1","login_at":-1}"#, .badLoginTime),
            (#"{"user":"u1","login_at":1e9}"#, .badLoginTime),
            (#"{"user":"u1","login_at":99999999999999}"#, .badLoginTime),
            (#"{"user":"u1","login_at":1764999000,"api":"yes"}"#, .badAPIFlag),
            (#"{"user":"u1","login_at":1765999000}"#, .loginInFuture),
        ]
        for (json, expected) in cases {
            let (value, signature) = Self.cookieSessionSigned(Array(json.utf8))
            #expect(Self.check(Self.cookieSession, value, signature) == expected, "\(json)")
        }
        // Integers, fractions of a second, escapes and nested pointers read right.
        let (value, signature) = Self.cookieSessionSigned(Array(#"{"user":12,"login_at":1764999000.75,"x":{"user":"no"}}"#.utf8))
        let token = Self.cookieSession.verify(value, signature: signature, accept: .any, cutoffs: .empty, now: Self.now).token
        #expect(token?.subject == "12")
        #expect(token?.issuedAt == 1_764_999_000)
        let (escaped, escapedSignature) = Self.cookieSessionSigned(Array(#"{"\u0075ser":"\u00e9l\u00e8ve","login_at":1764999000}"#.utf8))
        #expect(Self.cookieSession.verify(escaped, signature: escapedSignature, accept: .any, cutoffs: .empty, now: Self.now).token?.subject == "élève")
    }

    @Test func railsEnvelopes() throws {
        guard case .rails(let codec) = Self.railsSigned.codec else { preconditionFailure("not rails") }
        func check(_ envelope: String) -> SessionCookieRejection? {
            Self.check(Self.railsSigned, codec.seal(envelope: Array(envelope.utf8))!)
        }
        let session = String(decoding: SessionBase64.standardPadded.encode(Self.goodJSON), as: UTF8.self)
        #expect(check(#"{"_rails":{"message":"\#(session)","exp":null,"pur":"cookie._s"}}"#) == nil)
        // Rails 7.1's inline envelope.
        #expect(check(#"{"_rails":{"data":{"user":"u1","login_at":1764999000},"pur":"cookie._s"}}"#) == nil)
        #expect(check(#"{"_rails":{"message":"\#(session)","exp":null,"pur":"cookie.other"}}"#) == .wrongPurpose)
        #expect(check(#"{"_rails":{"message":"\#(session)","exp":null,"pur":null}}"#) == .wrongPurpose)
        #expect(check(#"{"user":"u1","login_at":1764999000}"#) == .missingMetadata)
        #expect(check(#"{"_rails":{"message":"\#(session)","exp":"2020-01-01T00:00:00.000Z","pur":"cookie._s"}}"#) == .formatExpired)
        #expect(check(#"{"_rails":{"message":"\#(session)","exp":"2030-02-30T00:00:00.000Z","pur":"cookie._s"}}"#) == .badMetadata)
        #expect(check(#"{"_rails":{"message":"\#(session)","exp":1,"pur":"cookie._s"}}"#) == .badMetadata)
        #expect(check(#"{"_rails":{"message":"not base64!","exp":null,"pur":"cookie._s"}}"#) == .badMetadata)
        // Marshal, outside the envelope and inside it: refused by its signature bytes, never parsed.
        #expect(Self.check(Self.railsSigned, codec.seal(envelope: [0x04, 0x08, 0x7B, 0x00])!) == .marshalRefused)
        let marshal = String(decoding: SessionBase64.standardPadded.encode([0x04, 0x08, 0x49, 0x22]), as: UTF8.self)
        #expect(check(#"{"_rails":{"message":"\#(marshal)","exp":null,"pur":"cookie._s"}}"#) == .marshalRefused)
        // MessagePack (Rails 7.1's :message_pack starts with 0xCC 0x80).
        #expect(Self.check(Self.railsSigned, codec.seal(envelope: [0xCC, 0x80, 0x81])!) == .notJSON)
    }

    @Test func secretsNeverShow() throws {
        let secret = "do-not-print-me-0123456789abcdef"
        let value = try SessionCookieSecret(bytes: Array(secret.utf8))
        #expect(!"\(value)".contains("do-not"))
        do {
            _ = try SessionCookieSecret(bytes: Array("tiny-pw".utf8))
            Issue.record("a short secret was accepted")
        } catch {
            #expect(!error.description.contains("tiny-pw"))
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tokengate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("secret").path
        try (secret + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let loaded = try SessionCookieSecret.file(file)
        #expect(loaded.bytes == Array(secret.utf8))
        setenv("TOKENGATE_TEST_SESSION_SECRET", secret + "\r\n", 1)
        defer { unsetenv("TOKENGATE_TEST_SESSION_SECRET") }
        #expect(try SessionCookieSecret.environment("TOKENGATE_TEST_SESSION_SECRET").bytes == Array(secret.utf8))
        #expect(throws: SessionCookieKeyError.self) { try SessionCookieSecret.environment("TOKENGATE_TEST_UNSET_VARIABLE") }
        #expect(throws: SessionCookieKeyError.self) { try SessionCookieSecret.file(directory.appendingPathComponent("none").path) }
    }

    @Test func rotatedSecretsVerifyAndTheFirstSigns() throws {
        let old = try SessionCookieSecret(bytes: Array("the-old-secret-of-the-site-0123".utf8))
        let format = SessionCookieFormat.django(DjangoSessionOptions())
        let oldCookie = try SessionCookieMinter(format: format, secrets: [old], fields: Self.fields).mint(
            userID: "u1", loginTime: Self.now - 60, now: Self.now)
        let rotated = try SessionCookieVerifier(format: format, secrets: [Self.secret, old], fields: Self.fields)
        #expect(rotated.verify(oldCookie.value, accept: .any, cutoffs: .empty, now: Self.now).token != nil)
        #expect(Self.django.verify(oldCookie.value, accept: .any, cutoffs: .empty, now: Self.now).rejection == .badSignature)
    }
}

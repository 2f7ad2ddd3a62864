//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

/// Paths and small helpers shared by the token tests.
enum TestSupport {
    /// The package root, found from this file's path (Tests/TokengateTokensTests/TestSupport.swift).
    static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static let fixtures = packageRoot.appendingPathComponent("Tests/TokengateTokensTests/Fixtures")

    /// `../shared/testvectors/wycheproof/` relative to the package root (shared/testvectors/README.md).
    static let wycheproof = packageRoot.deletingLastPathComponent()
        .appendingPathComponent("shared/testvectors/wycheproof")

    static func fixture(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: fixtures.appendingPathComponent(name)))
    }

    static func json(_ url: URL) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    static func hex(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            out.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    static func b64u(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }

    /// A 32-byte test-only HMAC secret and its one-key set.
    static let hmacSecret: [UInt8] = Array(0..<32)
    static let hmacKID = "test-hmac"
    static var hmacJWKS: String {
        #"{"keys":[{"kty":"oct","alg":"HS256","kid":"test-hmac","k":""# + Base64URL.encode(hmacSecret) + #""}]}"#
    }

    static func hmacKeys() throws -> KeySet { try KeySet(jwks: Array(hmacJWKS.utf8)) }

    /// Builds an HS256 token from raw header and payload JSON text (so tests can craft any bytes).
    static func hs256(header: String, payload: String, secret: [UInt8] = hmacSecret) -> String {
        self.hs256(header: header, payloadBytes: Array(payload.utf8), secret: secret)
    }

    static func hs256(header: String, payloadBytes: [UInt8], secret: [UInt8] = hmacSecret) -> String {
        let input = b64u(header) + "." + Base64URL.encode(payloadBytes)
        let tag = SignatureCheck(hmacBits: 256, secret: secret)!.hmacTag(Array(input.utf8))!
        return input + "." + Base64URL.encode(tag)
    }

    static let now: Int64 = 1_760_000_000

    static func claims(sub: String = "alice", iat: Int64 = now - 60, apiOnly: Bool = true, extra: String = "")
        -> String
    {
        #"{"sub":"\#(sub)","iat":\#(iat),"api_only":\#(apiOnly)\#(extra)}"#
    }

    static let header = #"{"alg":"HS256","typ":"JWT","kid":"test-hmac"}"#
}

extension VerificationResult {
    var reason: String? {
        if case .invalid(let reason) = self { return reason.code }
        return nil
    }

    var token: VerifiedToken? {
        if case .valid(let token) = self { return token }
        return nil
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client's side of PKCE: the verifier and challenge, the page URL, the code in the callback, and its
/// redemption.
@Suite struct PKCETests {
    static let site = URL(string: "https://example.com")!
    /// RFC 7636 Appendix B.
    static let rfcVerifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    static let rfcChallenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    static let code = "eyJ2IjoxfQ.c2lnbmF0dXJl"

    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test("SHA-256: FIPS 180 vectors and every padding boundary")
    func sha256() {
        #expect(self.hex(SHA256.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(self.hex(SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            self.hex(SHA256.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        )
        // Python's hashlib over bytes (i*7+3) % 256.
        let expected = [
            55: "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b",
            56: "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27",
            63: "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055",
            64: "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241",
            65: "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e",
            128: "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6",
        ]
        for (length, digest) in expected {
            let bytes = (0..<length).map { UInt8(($0 * 7 + 3) % 256) }
            #expect(self.hex(SHA256.hash(bytes)) == digest, "\(length) bytes")
        }
    }

    @Test func verifierAndChallenge() throws {
        #expect(try PKCEVerifier(verifier: Self.rfcVerifier).challenge == Self.rfcChallenge)
        let random = PKCEVerifier.random()
        #expect(random.verifier.count == 43)
        #expect(random.challenge.count == 43)
        #expect(random != PKCEVerifier.random())
        #expect(try PKCEVerifier(verifier: random.verifier) == random)
        for bad in [String(repeating: "a", count: 42), String(repeating: "a", count: 129), String(repeating: "a", count: 42) + "+"] {
            #expect(throws: TokengateClientError(.invalidURL, "")) { try PKCEVerifier(verifier: bad) }
        }
        #expect(!"\(random)".contains(random.verifier))
        #expect(!String(reflecting: random).contains(random.verifier))
        #expect(!"\(Mirror(reflecting: random).children.map(\.value))".contains(random.verifier))
    }

    @Test func pageURLCarriesTheChallenge() throws {
        let pkce = try PKCEVerifier(verifier: Self.rfcVerifier)
        let page = try TokenPageURL(site: Self.site, app: "android", state: "s1", pkce: pkce)
        #expect(
            page.url.absoluteString
                == "https://example.com/token?app=android&state=s1&code_challenge=\(Self.rfcChallenge)&code_challenge_method=S256"
        )
        #expect(!page.url.absoluteString.contains(Self.rfcVerifier))
        #expect(throws: TokengateClientError(.invalidURL, "")) { try TokenPageURL(site: Self.site, pkce: pkce) }
    }

    @Test func theCallbackGivesTheCode() throws {
        let callback = "myapp://token"
        let url = URL(string: "myapp://token#code=\(Self.code)&state=s1")!
        let delivery = try TokenCapture.deliveryFromCallback(url, callback: callback, expectedState: "s1")
        #expect(delivery == .code(try #require(AuthorizationCode(Self.code))))
        #expect(try TokenCapture.deliveryFromCallback(URL(string: "other://x#code=a")!, callback: callback) == nil)
        #expect(throws: TokengateClientError(.stateMismatch, "")) {
            try TokenCapture.deliveryFromCallback(url, callback: callback, expectedState: "s2")
        }
        // The old entry point says what to do instead of dropping the code.
        #expect(throws: TokengateClientError(.codeNeedsRedemption, "")) {
            try TokenCapture.fromCallback(url, callback: callback, expectedState: "s1")
        }
        for broken in ["myapp://token#code=a%20b", "myapp://token#code=\(Self.code)&access_token=\(TestTokens.jwt())"] {
            #expect(throws: TokengateClientError(.malformedCallback, ""), "\(broken)") {
                try TokenCapture.deliveryFromCallback(URL(string: broken)!, callback: callback)
            }
        }
        // A token callback still gives the token, by either entry point.
        let tokenURL = URL(string: "myapp://token#access_token=\(TestTokens.jwt())&token_type=bearer")!
        guard case .token(let token) = try TokenCapture.deliveryFromCallback(tokenURL, callback: callback) else {
            Issue.record("expected a token")
            return
        }
        #expect(try TokenCapture.fromCallback(tokenURL, callback: callback) == token)
        // An app that sent a challenge takes a code only: a token in its callback was put there by someone else
        // (an app that intercepted the login knows the state), so it is refused (a review found it stored).
        #expect(try TokenCapture.codeFromCallback(url, callback: callback, expectedState: "s1") == AuthorizationCode(Self.code))
        #expect(try TokenCapture.codeFromCallback(URL(string: "other://x#code=a")!, callback: callback) == nil)
        let injected = URL(string: "myapp://token#access_token=\(TestTokens.jwt())&token_type=bearer&state=s1")!
        #expect(throws: TokengateClientError(.malformedCallback, "")) {
            try TokenCapture.codeFromCallback(injected, callback: callback, expectedState: "s1")
        }
        #expect(!"\(try #require(AuthorizationCode(Self.code)))".contains(Self.code))
    }

    @Test func theRedemptionRequest() throws {
        let pkce = try PKCEVerifier(verifier: Self.rfcVerifier)
        let code = try #require(AuthorizationCode(Self.code))
        let request = try CodeRedemption.request(site: Self.site, path: "/m/token", app: "android", code: code, verifier: pkce)
        #expect(request.httpMethod == "POST")
        #expect(request.url?.absoluteString == "https://example.com/m/token")
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/x-www-form-urlencoded")
        #expect(request.httpShouldHandleCookies == false)
        #expect(
            String(decoding: try #require(request.httpBody), as: UTF8.self)
                == "grant_type=authorization_code&code=\(Self.code)&code_verifier=\(Self.rfcVerifier)&app=android"
        )
        #expect(throws: TokengateClientError(.insecureURL, "")) {
            try CodeRedemption.request(site: URL(string: "http://example.com")!, app: "a", code: code, verifier: pkce)
        }
        #expect(throws: TokengateClientError(.invalidURL, "")) {
            try CodeRedemption.request(site: Self.site, app: "a&b", code: code, verifier: pkce)
        }
    }

    @Test func theRedemptionAnswer() throws {
        let jwt = TestTokens.jwt()
        let now = TestTokens.now
        let token = try CodeRedemption.token(
            status: 200,
            body: Data(#"{"access_token":"\#(jwt)","token_type":"bearer","expires_in":3600}"#.utf8),
            now: now
        )
        #expect(token == StoredToken(value: jwt, expiresAt: now.addingTimeInterval(3600)))
        let forever = try CodeRedemption.token(status: 200, body: Data(#"{"access_token":"\#(jwt)","token_type":"Bearer"}"#.utf8))
        #expect(forever.expiresAt == nil)

        do {
            _ = try CodeRedemption.token(
                status: 400,
                body: Data(#"{"error":"invalid_grant","error_description":"the code has expired"}"#.utf8)
            )
            Issue.record("a refusal gave a token")
        } catch let error as TokengateClientError {
            #expect(error.code == .redemptionRefused)
            #expect(error.serverMessage == "the code has expired")
        }
        for (status, body) in [
            (502, #"{"error":"bad_gateway"}"#), (200, "{}"), (200, #"{"access_token":"a b","token_type":"bearer"}"#),
            (200, #"{"access_token":"\#(jwt)"}"#), (200, #"{"access_token":"\#(jwt)","token_type":"bearer","expires_in":"x"}"#),
            (200, "not json"),
        ] {
            #expect(throws: TokengateClientError(.malformedResponse, ""), "\(status) \(body)") {
                try CodeRedemption.token(status: status, body: Data(body.utf8))
            }
        }
    }

    /// `expires_in` is read by one rule in the callback and in the redemption's answer (``ExpiresIn``). The two
    /// copies disagreed on a JSON `true` or `false`: the redemption took it as 1 or 0 seconds (JSONSerialization
    /// hands booleans over as numbers), where the callback refuses `expires_in=true`.
    @Test func theRedemptionsExpiresInIsAWholeNumberOfSeconds() throws {
        let jwt = TestTokens.jwt()
        let now = TestTokens.now
        for value in ["true", "false", "1.5", "-1", "\"60\"", "null", "3153600001", "[60]"] {
            #expect(throws: TokengateClientError(.malformedResponse, ""), "\(value)") {
                try CodeRedemption.token(
                    status: 200,
                    body: Data(#"{"access_token":"\#(jwt)","token_type":"bearer","expires_in":\#(value)}"#.utf8),
                    now: now
                )
            }
        }
        for (value, seconds) in [("0", 0.0), ("1e3", 1000), ("60.0", 60), ("3153600000", 3_153_600_000)] {
            let token = try CodeRedemption.token(
                status: 200,
                body: Data(#"{"access_token":"\#(jwt)","token_type":"bearer","expires_in":\#(value)}"#.utf8),
                now: now
            )
            #expect(token.expiresAt == now.addingTimeInterval(seconds), "\(value)")
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

/// The `did` claim: what the signer writes, what the verifier reads (and refuses), and the revoked-device check.
@Suite struct DeviceTokenTests {
    let verifier: TokenVerifier
    let signer: TokenSigner
    let now: Int64 = 1_800_000_000
    let header = #"{"alg":"HS256","kid":"test-hmac","typ":"JWT"}"#

    init() throws {
        self.verifier = TokenVerifier(keys: try TestSupport.hmacKeys())
        self.signer = try TokenSigner(privateJWKS: Array(TestSupport.hmacJWKS.utf8))
    }

    func verify(_ token: String, _ snapshot: CutoffSnapshot = .empty) -> VerificationResult {
        self.verifier.verify(token, accept: .api, cutoffs: snapshot, now: self.now)
    }

    func payload(did: String) -> String {
        #"{"sub":"alice","iat":1799999000,"api_only":true,"did":"# + did + "}"
    }

    @Test func deviceIDsRoundTripAndOnlyTheGatewaysSpellingParses() throws {
        let id = try #require(DeviceID.random())
        #expect(id.text.utf8.count == DeviceID.textLength)
        #expect(DeviceID(id.text) == id)
        #expect(DeviceID.random() != id, "128 random bits")
        let sample = DeviceID(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
        #expect(sample.text == Base64URL.encode(TestSupport.hex("0123456789abcdeffedcba9876543210")))
        for bad in [
            "", String(id.text.dropLast()), id.text + "A", id.text + "=", id.text.replacingOccurrences(of: id.text.prefix(1), with: "+"),
            String(repeating: "A", count: 21) + "B",  // not canonical: the last character's low bits set
            String(repeating: "A", count: 4096), "AAAAAAAAAAAAAAAAAAAAA\u{0}",
        ] {
            #expect(DeviceID(bad) == nil, "\(bad.prefix(30))")
        }
    }

    @Test func theSignerWritesTheClaimAndTheVerifierReturnsIt() throws {
        let id = try #require(DeviceID.random())
        let token = try self.signer.mint(TokenClaims(subject: "alice", issuedAt: self.now - 10, apiOnly: true, device: id))
        guard case .valid(let verified) = self.verify(token) else {
            Issue.record("a token with a device is valid")
            return
        }
        #expect(verified.device == id)
        let plain = try self.signer.mint(TokenClaims(subject: "alice", issuedAt: self.now - 10, apiOnly: true))
        guard case .valid(let old) = self.verify(plain) else {
            Issue.record("a token without a device is valid as before")
            return
        }
        #expect(old.device == nil)
    }

    @Test func aRevokedDeviceIsRefusedAndNothingElseIs() throws {
        let lost = try #require(DeviceID.random())
        let kept = try #require(DeviceID.random())
        let snapshot = CutoffSnapshot(
            revokedDevices: [lost: RevokedDevice(user: "alice", revokedAt: self.now - 5, tokensExpireBy: nil)])
        func token(_ device: DeviceID?, user: String = "alice") throws -> String {
            try self.signer.mint(TokenClaims(subject: user, issuedAt: self.now - 10, apiOnly: true, device: device))
        }
        #expect(self.verify(try token(lost), snapshot) == .invalid(.deviceRevoked))
        #expect(self.verify(try token(lost, user: "mallory"), snapshot) == .invalid(.deviceRevoked), "by the id alone")
        guard case .valid = self.verify(try token(kept), snapshot), case .valid = self.verify(try token(nil), snapshot) else {
            Issue.record("the user's other devices and tokens without a device stay valid")
            return
        }
        // Revoked is a 401 (start over), checked before the kind: a session-only route still says revoked.
        let session = self.verifier.verify(try token(lost), accept: .session, cutoffs: snapshot, now: self.now)
        #expect(session == .invalid(.deviceRevoked))
        #expect(RejectionReason.all.contains(.deviceRevoked))
    }

    @Test func aForgedOrOversizedClaimIsMalformedNotAnotherDevice() throws {
        let id = try #require(DeviceID.random())
        for did in [
            "\"" + String(id.text.dropLast()) + "\"", "\"" + id.text + "A\"", "\"" + id.text + "==\"",
            "\"" + String(repeating: "A", count: 6000) + "\"", "17", "null", "true", "[\"" + id.text + "\"]",
            "{\"id\":\"" + id.text + "\"}", "\"\"",
        ] {
            let token = TestSupport.hs256(header: self.header, payload: self.payload(did: did))
            #expect(self.verify(token) == .invalid(.malformed), "\(did.prefix(40))")
        }
        // Two device claims: which one would be checked?
        let twice = TestSupport.hs256(
            header: self.header,
            payload: #"{"sub":"alice","iat":1799999000,"did":""# + id.text + #"","did":""# + id.text + #""}"#)
        #expect(self.verify(twice) == .invalid(.malformed))
    }

    @Test func anEntryIsDeadOnceACutoffAfterItOrTheLastExpKillsEveryToken() {
        let entry = RevokedDevice(user: "alice", revokedAt: 1000, tokensExpireBy: 2000)
        #expect(!entry.isDead(userCutoffs: nil, globalRevokedBefore: nil, now: 1500, clockSkew: 60))
        #expect(!entry.isDead(userCutoffs: nil, globalRevokedBefore: nil, now: 2059, clockSkew: 60), "exp plus skew")
        #expect(entry.isDead(userCutoffs: nil, globalRevokedBefore: nil, now: 2060, clockSkew: 60))
        #expect(!entry.isDead(userCutoffs: UserCutoffs(revokedBefore: 1000), globalRevokedBefore: nil, now: 0, clockSkew: 60),
            "a token issued at the revocation's second outlives a cutoff at that second")
        #expect(entry.isDead(userCutoffs: UserCutoffs(revokedBefore: 1001), globalRevokedBefore: nil, now: 0, clockSkew: 60))
        #expect(entry.isDead(userCutoffs: UserCutoffs(apiRevokedBefore: 1001), globalRevokedBefore: nil, now: 0, clockSkew: 60))
        #expect(entry.isDead(userCutoffs: nil, globalRevokedBefore: 1001, now: 0, clockSkew: 60))
        let forever = RevokedDevice(user: "alice", revokedAt: 1000, tokensExpireBy: nil)
        #expect(!forever.isDead(userCutoffs: nil, globalRevokedBefore: nil, now: .max / 2, clockSkew: 60))
    }

    @Test func refreshTokensAreOpaqueBoundedAndOnlyTheirKeysOpenThem() throws {
        let key = self.signer.refreshTokenKey
        let device = try #require(DeviceID.random())
        let token = key.issue(device: device, generation: 7)
        #expect(token.utf8.count == RefreshTokenKey.textLength)
        #expect(!token.contains(device.text), "the device id is not readable in it as such")
        let opened = try #require(key.open(token))
        #expect(opened.device == device && opened.generation == 7)
        #expect(key.issue(device: device, generation: 8) != token)
        // Another signing key's gateway made it: not a refresh token here.
        let other = try TokenSigner(privateJWKS: Array(try KeyGenerator.generate(algorithm: .hs256, keyID: "other").privateJWKS.utf8))
        #expect(other.refreshTokenKey.open(token) == nil)
        // Any change, truncation or extension is refused.
        var bytes = Array(token.utf8)
        for index in [0, 5, 30, bytes.count - 3] {
            let original = bytes[index]
            bytes[index] = original == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            #expect(key.open(String(decoding: bytes, as: UTF8.self)) == nil, "changed at \(index)")
            bytes[index] = original
        }
        #expect(key.open(String(token.dropLast())) == nil)
        #expect(key.open(token + "A") == nil)
        #expect(key.open(String(repeating: "A", count: 100_000)) == nil)
        #expect(key.open("") == nil)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOHTTP1
import Testing
import TokengateConfig
import TokengateHTTP
import TokengateTokens

@testable import TokengateGateway

/// PKCE on the token page as plain values: the code in the callback, and its redemption by `POST`.
@Suite struct TokenPagePKCEResponderTests {
    static let now: Int64 = 1_700_000_000
    static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    static let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    let signer: TokenSigner
    let verifier: TokenVerifier

    init() throws {
        let keys = try KeyGenerator.generate(algorithm: .es256, keyID: "test-only-pkce")
        self.signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        self.verifier = TokenVerifier(keys: try KeySet(jwks: Array(keys.publicJWKS.utf8)))
    }

    private func responder(
        lifetime: Duration? = nil,
        page: String = "/token",
        redeemedCodes: RedeemedCodeMemory = RedeemedCodeMemory(logger: Logger(label: "test"))
    ) -> TokenPageResponder {
        var configuration = TokenPageConfiguration(
            login: .sessionCookie("session"),
            loginURL: "/login",
            // `confirm: false`: these tests are about the code once the page issues it, not the question before
            // (TokenPageConfirmationResponderTests).
            apps: [
                TokenPageApp(name: "ios", callback: "myapp://token", confirm: false),
                TokenPageApp(name: "android", callback: "myapp://android", pkce: .required, confirm: false),
            ]
        )
        configuration.tokenLifetime = lifetime
        return TokenPageResponder(
            configuration: configuration, signer: self.signer, verifier: self.verifier, page: page, redeemedCodes: redeemedCodes)
    }

    private func get(_ uri: String, loggedIn: Bool = true) throws -> TokenPageAnswer {
        var headers = HTTPHeaders()
        headers.add(name: "host", value: "example.com")
        if loggedIn {
            let session = try self.signer.mint(TokenClaims(subject: "alice", issuedAt: Self.now - 60, apiOnly: false))
            headers.add(name: "cookie", value: "session=\(session)")
        }
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri, headers: headers)
        guard case .answer(let answer) = self.responder().respond(to: head, cutoffs: .empty, now: Self.now) else {
            Issue.record("expected an answer")
            throw CancellationError()
        }
        return answer
    }

    /// The code from a `302 myapp://…#code=…&state=…`.
    private func code(from answer: TokenPageAnswer) throws -> String {
        let location = try #require(answer.headers["location"].first)
        let fragment = try #require(location.split(separator: "#", maxSplits: 1).last)
        let pair = try #require(fragment.split(separator: "&").first { $0.hasPrefix("code=") })
        return String(pair.dropFirst(5))
    }

    private func body(code: String, verifier: String = Self.verifier, app: String = "ios") -> [UInt8] {
        Array("grant_type=authorization_code&code=\(code)&code_verifier=\(verifier)&app=\(app)".utf8)
    }

    private func json(_ answer: TokenPageAnswer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
    }

    private var pkceQuery: String { "code_challenge=\(Self.challenge)&code_challenge_method=S256" }

    @Test func aChallengeGetsACodeInTheFragmentAndTheCodeATokenMintedAtRedemption() throws {
        let answer = try self.get("/token?app=ios&state=S&\(self.pkceQuery)")
        #expect(answer.status == .found)
        #expect(answer.reasonCode == "token_page_issued_code")
        #expect(answer.user == "alice")
        let location = try #require(answer.headers["location"].first)
        #expect(location.hasPrefix("myapp://token#code="))
        #expect(location.hasSuffix("&state=S"))
        #expect(!location.contains("access_token"))
        let code = try self.code(from: answer)

        let redeemed = self.responder(lifetime: .seconds(3600)).redeem(
            body: self.body(code: code),
            cutoffs: .empty,
            now: Self.now + 5
        )
        #expect(redeemed.status == .ok)
        #expect(redeemed.reasonCode == "token_page_code_redeemed")
        #expect(redeemed.headers["cache-control"] == ["no-store"])
        #expect(redeemed.headers["content-type"] == ["application/json"])
        let object = try self.json(redeemed)
        #expect(object["token_type"] as? String == "bearer")
        #expect((object["expires_in"] as? NSNumber)?.intValue == 3600)
        let token = try #require(object["access_token"] as? String)
        guard case .valid(let verified) = self.verifier.verify(token, accept: .api, cutoffs: .empty, now: Self.now + 5)
        else {
            Issue.record("the redeemed token does not verify")
            return
        }
        #expect(verified.subject == "alice")
        #expect(verified.issuedAt == Self.now, "the code's issue time")
        #expect(verified.expiresAt == Self.now + 5 + 3600, "the whole lifetime from the redemption")
        // The code itself is no token.
        guard case .invalid = self.verifier.verify(code, accept: .any, cutoffs: .empty, now: Self.now) else {
            Issue.record("the code verified as a token")
            return
        }
    }

    @Test(arguments: [
        "code_challenge_method=plain&code_challenge=\(String(repeating: "a", count: 43))",
        "code_challenge=\(Self.challenge)",
        "code_challenge=\(Self.challenge)&code_challenge_method=s256",
        "code_challenge=\(Self.challenge)&code_challenge_method=S512",
        "code_challenge=\(Self.challenge.dropLast())&code_challenge_method=S256",
        "code_challenge=\(Self.challenge)A&code_challenge_method=S256",
        "code_challenge_method=S256",
    ])
    func onlyAnS256ChallengeOf43CharactersIsAccepted(_ query: String) throws {
        let answer = try self.get("/token?app=ios&\(query)")
        #expect(answer.status == .badRequest)
        #expect(try self.json(answer)["error"] as? String == "invalid_code_challenge")
        #expect(answer.reasonCode == "token_page_invalid_code_challenge")
        #expect(answer.headers["location"].isEmpty)
    }

    @Test func aChallengeNeedsAnApp() throws {
        let answer = try self.get("/token?\(self.pkceQuery)")
        #expect(answer.status == .badRequest)
        #expect(try self.json(answer)["error"] as? String == "invalid_request")
    }

    @Test func requiredRefusesARequestWithoutAChallengeButNotACancel() throws {
        let refused = try self.get("/token?app=android&state=S")
        #expect(refused.status == .badRequest)
        #expect(try self.json(refused)["error"] as? String == "code_challenge_required")
        #expect(refused.reasonCode == "token_page_code_challenge_required")
        let cancel = try self.get("/token?app=android&cancel=1", loggedIn: false)
        #expect(cancel.headers["location"] == ["myapp://android?status=unauthorized&message=user%20canceled"])
        let withChallenge = try self.get("/token?app=android&\(self.pkceQuery)")
        #expect(withChallenge.headers["location"].first?.hasPrefix("myapp://android#code=") == true)
        // Optional keeps the old flow for a request without a challenge.
        let old = try self.get("/token?app=ios")
        #expect(old.headers["location"].first?.hasPrefix("myapp://token#access_token=") == true)
    }

    @Test func redemptionRefusals() throws {
        let responder = self.responder()
        let code = try self.code(from: try self.get("/token?app=ios&\(self.pkceQuery)"))
        func refusal(_ body: String, now: Int64 = Self.now, cutoffs: CutoffSnapshot = .empty) throws -> (String, String, String) {
            let answer = responder.redeem(body: Array(body.utf8), cutoffs: cutoffs, now: now)
            #expect(answer.status == .badRequest)
            #expect(answer.headers["cache-control"] == ["no-store"])
            let text = String(decoding: answer.body, as: UTF8.self)
            #expect(!text.contains(code) && !text.contains(Self.verifier))
            let object = try self.json(answer)
            return (object["error"] as? String ?? "", object["error_description"] as? String ?? "", answer.reasonCode)
        }
        let good = "grant_type=authorization_code&code=\(code)&code_verifier=\(Self.verifier)&app=ios"
        #expect(try refusal("code=\(code)&code_verifier=\(Self.verifier)&app=ios").0 == "invalid_request")
        #expect(try refusal(good + "&code=\(code)").1 == "code is given twice")
        #expect(try refusal(good.replacingOccurrences(of: "authorization_code", with: "password")).0 == "unsupported_grant_type")
        #expect(try refusal(good.replacingOccurrences(of: Self.verifier, with: "short")).0 == "invalid_request")
        let wrongVerifier = try refusal(good.replacingOccurrences(of: Self.verifier, with: String(repeating: "b", count: 43)))
        #expect(wrongVerifier.0 == "invalid_grant")
        #expect(wrongVerifier.2 == "token_page_redeem_wrong_verifier")
        #expect(try refusal(good.replacingOccurrences(of: "app=ios", with: "app=android")).2 == "token_page_redeem_wrong_app")
        #expect(try refusal(good.replacingOccurrences(of: "app=ios", with: "app=web")).0 == "invalid_client")
        #expect(try refusal(good, now: Self.now + 60).2 == "token_page_redeem_expired")
        #expect(try refusal(good.replacingOccurrences(of: code, with: "x" + code.dropFirst())).0 == "invalid_grant")
        // A cutoff after the code was issued kills it (the token would carry the code's issue time as its `iat`).
        for cutoff in [
            UserCutoffs(revokedBefore: Self.now + 1),
            UserCutoffs(apiRevokedBefore: Self.now + 1),
        ] {
            let cutoffs = CutoffSnapshot(users: [CutoffUserKey("alice"): cutoff])
            #expect(try refusal(good, now: Self.now + 2, cutoffs: cutoffs).2 == "token_page_redeem_revoked")
        }
        #expect(try refusal(good, now: Self.now + 2, cutoffs: CutoffSnapshot(globalRevokedBefore: Self.now + 1)).2 == "token_page_redeem_revoked")
        // A cutoff from before the code does not.
        let earlier = CutoffSnapshot(users: [CutoffUserKey("alice"): UserCutoffs(revokedBefore: Self.now)])
        #expect(responder.redeem(body: Array(good.utf8), cutoffs: earlier, now: Self.now + 2).status == .ok)
    }

    /// A password change just after the code was issued, redeemed before the gateway has the cutoff (its snapshot
    /// is up to a poll behind): the redemption passes, but the token carries the code's issue time as its `iat`,
    /// so the cutoff kills it as soon as the gateway has it. A review found it minted with `iat` now, which
    /// outlived the password change by the token's whole lifetime.
    @Test func aTokenRedeemedBeforeTheGatewayLearnsOfACutoffDiesWithIt() throws {
        let code = try self.code(from: try self.get("/token?app=ios&\(self.pkceQuery)"))
        let redeemed = self.responder().redeem(body: self.body(code: code), cutoffs: .empty, now: Self.now + 2)
        #expect(redeemed.status == .ok)
        let token = try #require(try self.json(redeemed)["access_token"] as? String)
        let changed = CutoffSnapshot(users: [CutoffUserKey("alice"): UserCutoffs(revokedBefore: Self.now + 1)])
        #expect(self.verifier.verify(token, accept: .api, cutoffs: changed, now: Self.now + 3) == .invalid(.revoked))
    }

    /// Only the page that issued a code redeems it: another page may have a longer `token_lifetime`, or none.
    @Test func anotherTokenPageRefusesTheCode() throws {
        let code = try self.code(from: try self.get("/token?app=ios&\(self.pkceQuery)"))
        let other = self.responder(page: "other.example/token").redeem(
            body: self.body(code: code), cutoffs: .empty, now: Self.now + 1)
        #expect(other.status == .badRequest)
        #expect(other.reasonCode == "token_page_redeem_wrong_page")
    }

    /// RFC 6749 §4.1.2: a code used twice must be refused. The memory is the process's: a responder of the next
    /// configuration generation, built with the same memory, refuses it too.
    @Test func aCodeIsRedeemedOnce() throws {
        let memory = RedeemedCodeMemory(logger: Logger(label: "test"))
        let responder = self.responder(redeemedCodes: memory)
        let code = try self.code(from: try self.get("/token?app=ios&\(self.pkceQuery)"))
        // Refusals before it do not use the code up: an app without the verifier cannot spoil the real app's login.
        let thief = responder.redeem(
            body: self.body(code: code, verifier: String(repeating: "b", count: 43)), cutoffs: .empty, now: Self.now + 1)
        #expect(thief.reasonCode == "token_page_redeem_wrong_verifier")
        #expect(responder.redeem(body: self.body(code: code, app: "android"), cutoffs: .empty, now: Self.now + 1).status == .badRequest)
        let first = responder.redeem(body: self.body(code: code), cutoffs: .empty, now: Self.now + 2)
        #expect(first.status == .ok)
        for again in [
            responder.redeem(body: self.body(code: code), cutoffs: .empty, now: Self.now + 3),
            self.responder(lifetime: .seconds(60), redeemedCodes: memory).redeem(body: self.body(code: code), cutoffs: .empty, now: Self.now + 59),
        ] {
            #expect(again.status == .badRequest)
            #expect(again.reasonCode == "token_page_redeem_reused")
            let object = try self.json(again)
            #expect(object["error"] as? String == "invalid_grant")
            #expect(object["error_description"] as? String == "the code was already redeemed")
            #expect(object["access_token"] == nil)
            let text = String(decoding: again.body, as: UTF8.self)
            #expect(!text.contains(code) && !text.contains(Self.verifier))
        }
        // Expired, it is refused as expired, not as reused: expiry is checked first.
        #expect(responder.redeem(body: self.body(code: code), cutoffs: .empty, now: Self.now + 60).reasonCode == "token_page_redeem_expired")
        // Another process (a memory of its own) knows nothing of it: instances do not share the memory.
        #expect(self.responder().redeem(body: self.body(code: code), cutoffs: .empty, now: Self.now + 3).status == .ok)
    }

    /// A memory full of codes that have not expired refuses the redemption (503) rather than letting it through
    /// unremembered; the code is not used up, and once room comes back it is redeemed.
    @Test func aFullMemoryRefusesRedemptionsUntilCodesExpire() throws {
        let responder = self.responder(redeemedCodes: RedeemedCodeMemory(capacity: 1, logger: Logger(label: "test")))
        let first = try self.code(from: try self.get("/token?app=ios&\(self.pkceQuery)"))
        let later = try #require(
            self.signer.tokenPageCodeKey.seal(
                TokenPageCode(
                    subject: "alice", app: "ios", page: "/token", challenge: CodeChallenge(Self.challenge)!,
                    issuedAt: Self.now + 80)
            )
        )
        #expect(responder.redeem(body: self.body(code: first), cutoffs: .empty, now: Self.now + 31).status == .ok)
        let busy = responder.redeem(body: self.body(code: later), cutoffs: .empty, now: Self.now + 31)
        #expect(busy.status == .serviceUnavailable)
        #expect(busy.reasonCode == "token_page_redeem_busy")
        #expect(try self.json(busy)["error"] as? String == "temporarily_unavailable")
        #expect(busy.headers["cache-control"] == ["no-store"])
        // The first code expired at now + 60, but is kept for the clock skew (60 s) past that.
        #expect(responder.redeem(body: self.body(code: later), cutoffs: .empty, now: Self.now + 60).reasonCode == "token_page_redeem_busy")
        #expect(responder.redeem(body: self.body(code: later), cutoffs: .empty, now: Self.now + 119).reasonCode == "token_page_redeem_busy")
        // At now + 120: room for the later one.
        #expect(responder.redeem(body: self.body(code: later), cutoffs: .empty, now: Self.now + 120).status == .ok)
        #expect(responder.redeem(body: self.body(code: later), cutoffs: .empty, now: Self.now + 121).reasonCode == "token_page_redeem_reused")
    }

    /// A sweep at the code's `exp`, then the wall clock stepped back (NTP, a VM restored): the code is unexpired
    /// again by the clock, and must still be known as redeemed. Kept for the clock skew past `exp`, it is.
    @Test func aClockSteppedBackAfterASweepDoesNotReopenACode() throws {
        // Room for two: the two codes fill it, and a third redemption at their expiry starts a sweep.
        let responder = self.responder(redeemedCodes: .forTest(capacity: 2))
        func code(issuedAt: Int64) throws -> String {
            try #require(
                self.signer.tokenPageCodeKey.seal(
                    TokenPageCode(
                        subject: "alice", app: "ios", page: "/token", challenge: CodeChallenge(Self.challenge)!, issuedAt: issuedAt)))
        }
        let first = try code(issuedAt: Self.now)
        let second = try code(issuedAt: Self.now)
        let third = try code(issuedAt: Self.now + 59)
        #expect(responder.redeem(body: self.body(code: first), cutoffs: .empty, now: Self.now + 1).status == .ok)
        #expect(responder.redeem(body: self.body(code: second), cutoffs: .empty, now: Self.now + 1).status == .ok)
        // At their expiry (now + 60) the memory is full and sweeps: the two are kept (busy), not dropped.
        #expect(responder.redeem(body: self.body(code: third), cutoffs: .empty, now: Self.now + 60).reasonCode == "token_page_redeem_busy")
        // The clock steps back 10 seconds: the first code is unexpired again, and still refused as reused.
        #expect(responder.redeem(body: self.body(code: first), cutoffs: .empty, now: Self.now + 50).reasonCode == "token_page_redeem_reused")
    }

    @Test func redemptionHeadChecks() {
        #expect(TokenPageResponder.redemptionHeadProblem(contentType: "application/x-www-form-urlencoded", contentLength: 300) == nil)
        #expect(TokenPageResponder.redemptionHeadProblem(contentType: "application/x-www-form-urlencoded", contentLength: nil) == nil)
        #expect(TokenPageResponder.redemptionHeadProblem(contentType: "application/json", contentLength: 30)?.status == .badRequest)
        #expect(TokenPageResponder.redemptionHeadProblem(contentType: nil, contentLength: 30)?.status == .badRequest)
        #expect(
            TokenPageResponder.redemptionHeadProblem(contentType: "application/x-www-form-urlencoded", contentLength: 4097)?.status
                == .payloadTooLarge
        )
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import Testing
import TokengateConfig
import TokengateHTTP
import TokengateHTTPTestSupport
import TokengateTokens

@testable import TokengateGateway

/// The token page's exchange as a value: what each input returns, with no channel, clock or RP.
@Suite struct TokenPageExchangeTests {
    static let now: Int64 = 1_700_000_000
    let signer: TokenSigner
    let verifier: TokenVerifier

    init() throws {
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-page-exchange")
        self.signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        self.verifier = TokenVerifier(keys: try KeySet(jwks: Array(keys.publicJWKS.utf8)))
    }

    private func page(login: TokenPageLogin = .sessionCookie("session")) -> TokenPageRoute {
        let configuration = TokenPageConfiguration(
            login: login, loginURL: "/login", apps: [TokenPageApp(name: "ios", callback: "myapp://token", confirm: false)])
        let responder = TokenPageResponder(
            configuration: configuration, signer: self.signer, verifier: self.verifier, page: "/token", redeemedCodes: .forTest())
        return TokenPageRoute(responder: responder, whoami: nil)
    }

    private func head(_ uri: String, method: HTTPMethod = .GET, _ fields: [(String, String)] = []) -> ClientRequestHead {
        var headers = HTTPHeaders([("host", "example.com")])
        headers.add(contentsOf: fields)
        return ClientRequestHead(version: .http1_1, method: method, uri: uri, headers: headers)
    }

    private func begin(_ exchange: inout TokenPageExchange) -> TokenPageExchange.Action {
        exchange.begin(
            cutoffs: .empty, realm: "api", now: Self.now, nowMilliseconds: Self.now * 1000, bodyAllocator: ByteBufferAllocator())
    }

    private func end(_ exchange: inout TokenPageExchange) -> TokenPageExchange.Action? {
        exchange.receivedEnd(cutoffs: .empty, now: Self.now, nowMilliseconds: Self.now * 1000)
    }

    private func form(_ length: Int) -> [(String, String)] {
        [("content-type", "application/x-www-form-urlencoded"), ("content-length", String(length))]
    }

    @Test func aLoggedInGetIsAnsweredAtOnce() throws {
        let session = try self.signer.mint(TokenClaims(subject: "alice", issuedAt: Self.now - 60, apiOnly: false))
        var exchange = TokenPageExchange(page: self.page(), head: self.head("/token?app=ios&state=s", [("cookie", "session=\(session)")]))
        guard case .answer(let answer) = self.begin(&exchange) else {
            Issue.record("expected an answer")
            return
        }
        #expect(answer.status == .found)
        #expect(answer.headers["location"].first?.hasPrefix("myapp://token#") == true)
        #expect(answer.user == "alice")
        #expect(!exchange.isReadingBody)
    }

    @Test func aTokenInTheURLIsRefusedBeforeTheResponderSeesIt() {
        let token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJlc2lnbmF0dXJl"
        var exchange = TokenPageExchange(page: self.page(), head: self.head("/token?access_token=\(token)"))
        guard case .refuse(let answer) = self.begin(&exchange) else {
            Issue.record("expected a refusal")
            return
        }
        #expect(answer.reasonCode == "token_in_url")
    }

    @Test func aRedemptionIsReadWithinItsMaximumThenRedeemed() {
        var exchange = TokenPageExchange(page: self.page(), head: self.head("/token", method: .POST, self.form(10)))
        guard case .readBody(let initial) = self.begin(&exchange) else {
            Issue.record("expected the body to be read")
            return
        }
        #expect(initial == 10)
        #expect(exchange.isReadingBody)
        guard case .holdBody(let held) = exchange.receivedBody(ByteBuffer(string: "code=abcde")) else {
            Issue.record("expected the part to be kept")
            return
        }
        #expect(held == 10)
        guard case .answer(let answer) = self.end(&exchange) else {
            Issue.record("expected the redemption's answer")
            return
        }
        #expect(answer.status == .badRequest)  // No such code: refused, as a redemption.
        #expect(!exchange.isReadingBody)
        #expect(self.end(&exchange) == nil)
    }

    @Test func aBodyPastTheRedemptionsMaximumIsAnsweredAndTheRestIgnored() {
        let announced = TokenPageRedemptionRequest.maximumBody
        var exchange = TokenPageExchange(page: self.page(), head: self.head("/token", method: .POST, self.form(announced)))
        guard case .readBody(let initial) = self.begin(&exchange) else {
            Issue.record("expected the body to be read")
            return
        }
        #expect(initial == announced)
        let tooMuch = ByteBuffer(repeating: UInt8(ascii: "a"), count: announced + 1)
        guard case .answer(let answer) = exchange.receivedBody(tooMuch) else {
            Issue.record("expected the too-large answer")
            return
        }
        #expect(answer == TokenPageResponder.redemptionTooLarge)
        #expect(exchange.receivedBody(ByteBuffer(string: "more")) == nil)
        #expect(self.end(&exchange) == nil)
    }

    @Test func aRedemptionWithTheWrongBodyTypeIsAnsweredWithoutReadingIt() {
        var exchange = TokenPageExchange(
            page: self.page(), head: self.head("/token", method: .POST, [("content-type", "application/json"), ("content-length", "2")]))
        guard case .answer(let answer) = self.begin(&exchange) else {
            Issue.record("expected an answer")
            return
        }
        #expect(answer.status.code >= 400)
        #expect(!exchange.isReadingBody)
    }

    @Test func theLoginSubrequestsAnswerIsUsedOnce() {
        let whoami = TokenPageLogin.whoami(WhoamiConfiguration(url: "http://127.0.0.1:9/whoami", userHeader: "X-User-Id"))
        var exchange = TokenPageExchange(page: self.page(login: whoami), head: self.head("/token?app=ios&state=s", [("cookie", "sid=1")]))
        guard case .askWhoami(let cookies) = self.begin(&exchange) else {
            Issue.record("expected the RP to be asked")
            return
        }
        #expect(cookies == "sid=1")
        let answer = exchange.loginAnswered(
            .answered(status: 200, userHeaderValues: ["bob"]), now: Self.now, nowMilliseconds: Self.now * 1000)
        #expect(answer?.user == "bob")
        #expect(answer?.status == .found)
        // A second answer (or one after the exchange was answered) is dropped.
        #expect(exchange.loginAnswered(.failed, now: Self.now, nowMilliseconds: Self.now * 1000) == nil)
    }
}

extension TokenPageExchange.Action: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.answer(let a), .answer(let b)): a == b
        case (.refuse(let a), .refuse(let b)): a.reasonCode == b.reasonCode && a.status == b.status
        case (.readBody(let a), .readBody(let b)): a == b
        case (.holdBody(let a), .holdBody(let b)): a == b
        case (.askWhoami(let a), .askWhoami(let b)): a == b
        default: false
        }
    }
}

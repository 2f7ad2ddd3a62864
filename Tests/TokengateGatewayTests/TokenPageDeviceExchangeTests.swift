//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TokengateConfig
import TokengateHTTP
import TokengateHTTPTestSupport
import TokengateTokens

@testable import TokengateGateway

/// The token page's exchange with devices and refresh tokens, as a value: which answer carries a device record to
/// store first, and the two steps of a refresh around the store's rotation.
@Suite struct TokenPageDeviceExchangeTests {
    static let now: Int64 = 1_700_000_000
    let signer: TokenSigner
    let verifier: TokenVerifier

    init() throws {
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-device-exchange")
        self.signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        self.verifier = TokenVerifier(keys: try KeySet(jwks: Array(keys.publicJWKS.utf8)))
    }

    private func page(devices: Bool = true) -> TokenPageRoute {
        let configuration = TokenPageConfiguration(
            login: .sessionCookie("session"), loginURL: "/login",
            apps: [
                TokenPageApp(name: "ios", callback: "myapp://token", confirm: false),
                TokenPageApp(
                    name: "fresh", callback: "myapp://fresh", pkce: .required, confirm: false,
                    refreshTokens: TokenPageRefreshTokens(accessTokenLifetime: .seconds(300))),
            ])
        let registry = DeviceRegistry(record: { _ in }, refresh: { _ in .refused(.unknownDevice) })
        let responder = TokenPageResponder(
            configuration: configuration, signer: self.signer, verifier: self.verifier, page: "/token",
            redeemedCodes: .forTest(), mintsDevices: devices, refreshes: devices)
        return TokenPageRoute(responder: responder, whoami: nil, devices: devices ? registry : nil)
    }

    private func head(_ uri: String, method: HTTPMethod = .GET, _ fields: [(String, String)] = []) -> ClientRequestHead {
        var headers = HTTPHeaders([("host", "example.com")])
        headers.add(contentsOf: fields)
        return ClientRequestHead(version: .http1_1, method: method, uri: uri, headers: headers)
    }

    private func post(_ page: TokenPageRoute, _ body: String) -> (TokenPageExchange, TokenPageExchange.Action?) {
        let fields = [("content-type", "application/x-www-form-urlencoded"), ("content-length", String(body.utf8.count))]
        var exchange = TokenPageExchange(page: page, head: self.head("/token", method: .POST, fields))
        _ = exchange.begin(
            cutoffs: .empty, realm: "api", now: Self.now, nowMilliseconds: Self.now * 1000, bodyAllocator: ByteBufferAllocator())
        _ = exchange.receivedBody(ByteBuffer(string: body))
        let action = exchange.receivedEnd(cutoffs: .empty, now: Self.now, nowMilliseconds: Self.now * 1000)
        return (exchange, action)
    }

    @Test func theTokenOfALoginCarriesAFreshDeviceWhoseRecordGoesFirst() throws {
        let session = try self.signer.mint(TokenClaims(subject: "alice", issuedAt: Self.now - 60, apiOnly: false))
        var devices: [DeviceID] = []
        for _ in 0..<2 {
            var exchange = TokenPageExchange(page: self.page(), head: self.head("/token?app=ios", [("cookie", "session=\(session)")]))
            guard case .answer(let answer) = exchange.begin(
                cutoffs: .empty, realm: "api", now: Self.now, nowMilliseconds: Self.now * 1000, bodyAllocator: ByteBufferAllocator())
            else {
                Issue.record("expected an answer")
                return
            }
            let device = try #require(answer.device, "the gateway stores it before it writes the answer")
            #expect(device.user == "alice" && device.app == "ios" && device.createdAt == Self.now)
            #expect(device.refreshGeneration == nil, "an app without refresh tokens")
            let location = try #require(answer.headers["location"].first)
            let token = try #require(location.split(separator: "=").dropFirst().first?.split(separator: "&").first)
            let verified = self.verifier.verify(String(token).removingPercentEncoding!, accept: .api, cutoffs: .empty, now: Self.now)
            guard case .valid(let identity) = verified else {
                Issue.record("the minted token is valid: \(verified)")
                return
            }
            #expect(identity.device == device.device)
            devices.append(device.device)
        }
        #expect(devices[0] != devices[1], "one device per login")

        // Without a store that keeps devices: no device, as before.
        var plain = TokenPageExchange(page: self.page(devices: false), head: self.head("/token?app=ios", [("cookie", "session=\(session)")]))
        guard case .answer(let answer) = plain.begin(
            cutoffs: .empty, realm: "api", now: Self.now, nowMilliseconds: Self.now * 1000, bodyAllocator: ByteBufferAllocator())
        else {
            Issue.record("expected an answer")
            return
        }
        #expect(answer.device == nil)
    }

    @Test func aRefreshAsksTheStoreThenAnswersWhatItDid() throws {
        let page = self.page()
        let device = try #require(DeviceID.random())
        let token = self.signer.refreshTokenKey.issue(device: device, generation: 3)
        let (exchange, action) = self.post(page, "grant_type=refresh_token&refresh_token=\(token)&client_id=fresh")
        guard case .rotateRefresh(let rotation) = action else {
            Issue.record("expected the store to be asked: \(String(describing: action))")
            return
        }
        #expect(rotation.device == device && rotation.generation == 3 && rotation.app == "fresh")
        #expect(rotation.accessExpiresAt == Self.now + 300)

        let record = DeviceRecord(
            device: device, user: "alice", app: "fresh", createdAt: Self.now - 1000, tokensExpireBy: Self.now + 300,
            refreshGeneration: 4, refreshExpiresAt: Self.now + 86_400)
        var rotated = exchange
        let first = rotated.refreshAnswered(.rotated(record), cutoffs: .empty, now: Self.now)
        let answer = try #require(first)
        #expect(answer.status == .ok && answer.reasonCode == "token_page_refreshed")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
        #expect(json["expires_in"] as? Int == 300 && json["token_type"] as? String == "bearer")
        let next = try #require(json["refresh_token"] as? String)
        #expect(self.signer.refreshTokenKey.open(next)?.generation == 4, "the next generation")
        guard case .valid(let access) = self.verifier.verify(
            try #require(json["access_token"] as? String), accept: .api, cutoffs: .empty, now: Self.now)
        else {
            Issue.record("the new access token is valid")
            return
        }
        #expect(access.device == device && access.issuedAt == Self.now - 1000, "iat is the login's")
        let second = rotated.refreshAnswered(.rotated(record), cutoffs: .empty, now: Self.now)
        #expect(second == nil, "answered once")

        // A cutoff after the login: no refresh, whatever the store said.
        var cut = exchange
        let revoked = CutoffSnapshot(users: ["alice": UserCutoffs(apiRevokedBefore: Self.now - 10)])
        let afterCutoff = cut.refreshAnswered(.rotated(record), cutoffs: revoked, now: Self.now)
        #expect(afterCutoff?.reasonCode == "token_page_refresh_revoked")
        var reused = exchange
        let reusedAnswer = reused.refreshAnswered(.reused(record), cutoffs: .empty, now: Self.now)
        let reuse = try #require(reusedAnswer)
        #expect(reuse.status == .badRequest && String(decoding: reuse.body, as: UTF8.self).contains("invalid_grant"))
        var failed = exchange
        let unavailable = failed.refreshAnswered(nil, cutoffs: .empty, now: Self.now)
        #expect(unavailable?.status == .serviceUnavailable)
    }

    @Test func refreshRefusalsWithoutTheStore() throws {
        let page = self.page()
        let device = try #require(DeviceID.random())
        let token = self.signer.refreshTokenKey.issue(device: device, generation: 0)
        let other = try TokenSigner(privateJWKS: Array(try KeyGenerator.generate(algorithm: .hs256, keyID: "x").privateJWKS.utf8))
        let forged = other.refreshTokenKey.issue(device: device, generation: 0)
        for (body, error) in [
            ("grant_type=refresh_token&refresh_token=\(forged)&app=fresh", "invalid_grant"),
            ("grant_type=refresh_token&refresh_token=\(token)&app=ios", "invalid_client"),
            ("grant_type=refresh_token&refresh_token=\(token)&app=nope", "invalid_client"),
            ("grant_type=refresh_token&refresh_token=\(token)&app=fresh&client_id=ios", "invalid_request"),
            ("grant_type=refresh_token&app=fresh", "invalid_request"),
            ("grant_type=refresh_token&refresh_token=\(token)&refresh_token=\(token)&app=fresh", "invalid_request"),
            ("grant_type=password&code=c&code_verifier=\(String(repeating: "v", count: 43))&app=fresh", "unsupported_grant_type"),
        ] {
            let (_, action) = self.post(page, body)
            guard case .answer(let answer) = action else {
                Issue.record("expected a refusal for \(body.prefix(40))")
                continue
            }
            #expect(String(decoding: answer.body, as: UTF8.self).contains("\"error\":\"\(error)\""), "\(body.prefix(60))")
            #expect(!String(decoding: answer.body, as: UTF8.self).contains(token) && !answer.reasonCode.contains(token))
        }
        // A page whose store keeps no devices gives no refresh.
        let (_, action) = self.post(self.page(devices: false), "grant_type=refresh_token&refresh_token=\(token)&app=fresh")
        guard case .answer(let answer) = action else {
            Issue.record("expected a refusal")
            return
        }
        #expect(String(decoding: answer.body, as: UTF8.self).contains("invalid_client"))
    }
}

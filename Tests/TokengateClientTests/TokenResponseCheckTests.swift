//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TokengateClient

@Suite struct TokenResponseCheckTests {
    @Test(arguments: [
        (401, "Bearer realm=\"example\", error=\"invalid_token\", error_description=\"The token has been revoked.\"", TokenResponseOutcome.loginRequired),
        (401, "Bearer realm=\"example\"", .loginRequired),
        (401, "bearer error=invalid_token", .loginRequired),
        (401, "Basic realm=\"x\", Bearer realm=\"y\", error=\"invalid_token\"", .loginRequired),
        (403, "Bearer realm=\"example\", error=\"insufficient_scope\", error_description=\"This kind of token is not accepted here.\"", .wrongKind),
        (400, "Bearer realm=\"example\", error=\"invalid_request\"", .invalidRequest),
        (401, "Bearer realm=\"a, error=\\\"invalid_request\\\"\", error=\"invalid_token\"", .loginRequired),
        (401, "Basic realm=\"x\"", .proceed),
        (403, "", .proceed),
        (200, "Bearer error=\"invalid_token\"", .proceed),
        (500, "", .proceed),
    ])
    func outcomes(status: Int, challenge: String, expected: TokenResponseOutcome) {
        #expect(TokenResponseCheck.outcome(status: status, wwwAuthenticate: challenge.isEmpty ? [] : [challenge]) == expected)
    }

    @Test func challengeParsing() {
        let challenges = AuthenticateChallenge.parse("Basic abc==, Bearer realm=\"r\\\"q\", error = invalid_token ,Foo")
        #expect(challenges.map(\.scheme) == ["Basic", "Bearer", "Foo"])
        #expect(challenges[1].parameters["realm"] == "r\"q")
        #expect(challenges[1].parameters["error"] == "invalid_token")
    }

    @Test func handleDropsTheTokenOnlyWhenALoginIsNeeded() throws {
        let url = URL(string: "https://example.com/api")!
        var token: StoredToken? = StoredToken(value: "abc", expiresAt: nil)
        let forbidden = try #require(HTTPURLResponse(url: url, statusCode: 403, httpVersion: nil, headerFields: ["WWW-Authenticate": "Bearer error=\"insufficient_scope\""]))
        #expect(TokenResponseCheck.handle(forbidden, token: &token) == .wrongKind)
        #expect(token != nil)
        let revoked = try #require(HTTPURLResponse(url: url, statusCode: 401, httpVersion: nil, headerFields: ["WWW-Authenticate": "Bearer error=\"invalid_token\""]))
        #expect(TokenResponseCheck.handle(revoked, token: &token) == .loginRequired)
        #expect(token == nil)
    }
}

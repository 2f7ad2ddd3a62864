//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TokengateClient

@Suite struct TokenAttachmentTests {
    let token = StoredToken(value: TestTokens.jwt(), expiresAt: nil)

    @Test func bearerHeader() throws {
        var request = URLRequest(url: URL(string: "https://example.com/api/items")!)
        try request.attach(self.token)
        #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer \(self.token.value)")
        #expect(request.url?.absoluteString == "https://example.com/api/items")
        #expect(throws: TokengateClientError(.alreadyAttached, "")) { try request.attach(self.token) }
    }

    @Test func formFieldIsAppendedToAFormBody() throws {
        var request = URLRequest(url: URL(string: "https://example.com/api/items")!)
        request.httpMethod = "POST"
        request.httpBody = Data("a=1&b=x+y".utf8)
        try request.attach(self.token, as: .formField())
        #expect(String(decoding: request.httpBody ?? Data(), as: UTF8.self) == "a=1&b=x+y&access_token=\(self.token.value)")
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/x-www-form-urlencoded")
        #expect(request.value(forHTTPHeaderField: "Authorization") == nil)
        #expect(throws: TokengateClientError(.alreadyAttached, "")) { try request.attach(self.token, as: .formField()) }
    }

    @Test func formFieldValueIsPercentEncoded() throws {
        var request = URLRequest(url: URL(string: "https://example.com/api")!)
        request.httpMethod = "PUT"
        try request.attach(StoredToken(value: "ab+/cd==", expiresAt: nil), as: .formField("tok"))
        #expect(String(decoding: request.httpBody ?? Data(), as: UTF8.self) == "tok=ab%2B%2Fcd%3D%3D")
    }

    @Test func formFieldRefusedWhereThereIsNoFormBody() throws {
        var get = URLRequest(url: URL(string: "https://example.com/api")!)
        #expect(throws: TokengateClientError(.cannotAttach, "")) { try get.attach(self.token, as: .formField()) }
        var json = URLRequest(url: URL(string: "https://example.com/api")!)
        json.httpMethod = "POST"
        json.setValue("application/json", forHTTPHeaderField: "Content-Type")
        #expect(throws: TokengateClientError(.cannotAttach, "")) { try json.attach(self.token, as: .formField()) }
    }

    @Test func neverOverPlainHTTPExceptLoopback() throws {
        var request = URLRequest(url: URL(string: "http://example.com/api")!)
        #expect(throws: TokengateClientError(.insecureURL, "")) { try request.attach(self.token) }
        #expect(request.value(forHTTPHeaderField: "Authorization") == nil)
        var local = URLRequest(url: URL(string: "http://127.0.0.1:9000/api")!)
        try local.attach(self.token)
    }

    @Test func aTokenAlreadyInTheURLIsRefused() throws {
        for text in [
            "https://example.com/api?access_token=\(self.token.value)",
            "https://example.com/api/\(self.token.value)",
            "https://example.com/api#\(self.token.value)",
        ] {
            var request = URLRequest(url: URL(string: text)!)
            #expect(throws: TokengateClientError(.tokenInURL, "")) { try request.attach(self.token) }
        }
        let padded = StoredToken(value: "abc+/==", expiresAt: nil)
        var encoded = URLRequest(url: URL(string: "https://example.com/api?t=abc%2B%2F%3D%3D")!)
        #expect(throws: TokengateClientError(.tokenInURL, "")) { try encoded.attach(padded) }
    }

    @Test func expiredTokenIsNotSent() {
        var request = URLRequest(url: URL(string: "https://example.com/api")!)
        let expired = StoredToken(value: self.token.value, expiresAt: TestTokens.now)
        #expect(throws: TokengateClientError(.tokenExpired, "")) { try request.attach(expired, now: TestTokens.now) }
    }
}

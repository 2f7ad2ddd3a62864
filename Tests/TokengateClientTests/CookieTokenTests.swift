//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TokengateClient

/// A token page that mints in the site's format answers `token_type=cookie`: the token is the site's own login
/// cookie, captured with RFC 6265's rules and sent as `Cookie:` with its exact value.
@Suite struct CookieTokenTests {
    let callback = "myapp://token"
    /// A Rails 6.1 cookie as the page mints it: base64 with `%3D` escapes and `--` separators.
    let rails = "b3BhcXVl%3D--aXZpdg%3D%3D--dGFn%3D%3D"
    /// A Django signed_cookies session: `:` separates the payload, timestamp and signature.
    let django = "eyJfYXV0aF91c2VyX2lkIjoiNDIifQ:1kZ3Xy:Yx_pQ"

    private func capture(_ fragment: String) throws -> StoredToken? {
        try TokenCapture.fromCallback(URL(string: "myapp://token#" + fragment)!, callback: self.callback)
    }

    private func request() -> URLRequest { URLRequest(url: URL(string: "https://example.com/api/items")!) }

    @Test func aRailsCookieIsCapturedAndSentWithItsExactValue() throws {
        let token = try #require(
            try self.capture("access_token=\(self.rails.replacingOccurrences(of: "%", with: "%25"))&token_type=cookie&cookie_name=_app_session"))
        #expect(token.value == self.rails, "percent-decoded once from the fragment, never again")
        #expect(token.cookie == StoredToken.CookieDelivery(name: "_app_session"))
        var request = self.request()
        try request.attach(token)
        #expect(request.value(forHTTPHeaderField: "Cookie") == "_app_session=\(self.rails)")
        #expect(request.value(forHTTPHeaderField: "Authorization") == nil)
        #expect(throws: TokengateClientError(.alreadyAttached, "")) { try request.attach(token) }
    }

    @Test func aDjangoValueWithColonsIsACookieNotABearerToken() throws {
        #expect(throws: TokengateClientError(.malformedCallback, "")) {
            try self.capture("access_token=\(self.django)&token_type=bearer")
        }
        let token = try #require(try self.capture("access_token=\(self.django)&token_type=cookie&cookie_name=sessionid"))
        var request = self.request()
        request.setValue("csrftoken=abc", forHTTPHeaderField: "Cookie")
        try request.attach(token)
        #expect(request.value(forHTTPHeaderField: "Cookie") == "csrftoken=abc; sessionid=\(self.django)")
    }

    @Test func anExpressPairGoesTogether() throws {
        let token = try #require(
            try self.capture(
                "access_token=eyJ1IjoiNDIifQ%3D%3D&token_type=cookie&cookie_name=session"
                    + "&cookie_signature_name=session.sig&cookie_signature=n3Q-Yt0aX"))
        var request = self.request()
        try request.attach(token)
        #expect(request.value(forHTTPHeaderField: "Cookie") == "session=eyJ1IjoiNDIifQ==; session.sig=n3Q-Yt0aX")
        #expect(!"\(token)".contains("n3Q-Yt0aX") && !"\(token.cookie!)".contains("n3Q-Yt0aX"), "the signature is redacted")
        // Half a pair is refused: the site would read no login, and the app would not know why.
        #expect(throws: TokengateClientError(.malformedCallback, "")) {
            try self.capture("access_token=abc&token_type=cookie&cookie_name=session&cookie_signature=n3Q")
        }
        #expect(throws: TokengateClientError(.malformedCallback, "")) {
            try self.capture("access_token=abc&token_type=cookie&cookie_name=session&cookie_signature_name=session&cookie_signature=x")
        }
    }

    @Test func whatWouldAddACookieOrAHeaderLineIsRefused() throws {
        // `;` (a second cookie), `,`, space, `"` inside, `\`, controls: none is a cookie-octet.
        for value in ["a%3Bb%3Dc", "a%2Cb", "a%20b", "a%22b", "a%5Cb", "a%0D%0AX-Evil:%201", "a%00b", "%22a"] {
            #expect(throws: TokengateClientError(.malformedCallback, ""), "\(value)") {
                try self.capture("access_token=\(value)&token_type=cookie&cookie_name=s")
            }
        }
        for name in ["", "a%3Db", "a%20b", "a%3Bb", "s%0D%0A"] {
            #expect(throws: TokengateClientError(.malformedCallback, ""), "\(name)") {
                try self.capture("access_token=abc&token_type=cookie&cookie_name=\(name)")
            }
        }
        #expect(throws: TokengateClientError(.malformedCallback, "")) { try self.capture("access_token=abc&token_type=cookie") }
        let long = String(repeating: "a", count: CookieValueSyntax.maximumLength + 1)
        #expect(throws: TokengateClientError(.malformedCallback, "")) {
            try self.capture("access_token=\(long)&token_type=cookie&cookie_name=s")
        }
        #expect(try self.capture("access_token=%22abc%22&token_type=cookie&cookie_name=s")?.value == "\"abc\"", "a quoted value")
        // A bearer token never says which cookie it is.
        #expect(throws: TokengateClientError(.malformedCallback, "")) {
            try self.capture("access_token=abc&token_type=bearer&cookie_name=s")
        }
    }

    @Test func aStoredCookieIsCheckedAgainWhenAttached() throws {
        // Made by hand or decoded from storage: a `;` would add a cookie the site did not set.
        for token in [
            StoredToken(value: "v9;admin=1", expiresAt: nil, cookie: .init(name: "s")),
            StoredToken(value: "v9", expiresAt: nil, cookie: .init(name: "s t")),
            StoredToken(value: "v9", expiresAt: nil, cookie: .init(name: "s", signatureName: "s.sig", signature: "x\r\ny")),
            StoredToken(value: "v9", expiresAt: nil, cookie: .init(name: "s", signatureName: "s.sig", signature: nil)),
        ] {
            var request = self.request()
            #expect(throws: TokengateClientError(.cannotAttach, "")) { try request.attach(token) }
            #expect(request.value(forHTTPHeaderField: "Cookie") == nil)
        }
        let token = StoredToken(value: "v9q", expiresAt: nil, cookie: .init(name: "s"))
        var post = self.request()
        post.httpMethod = "POST"
        #expect(throws: TokengateClientError(.cannotAttach, "")) { try post.attach(token, as: .formField()) }
        var plain = URLRequest(url: URL(string: "http://example.com/api")!)
        #expect(throws: TokengateClientError(.insecureURL, "")) { try plain.attach(token) }
    }

    @Test func aTokenStoredBeforeCookiesDecodesAsBearer() throws {
        let old = Data(#"{"value":"abc.def.ghi"}"#.utf8)
        let decoded = try JSONDecoder().decode(StoredToken.self, from: old)
        #expect(decoded.cookie == nil)
        let cookie = StoredToken(value: "v", expiresAt: nil, cookie: .init(name: "session", signatureName: "session.sig", signature: "sig"))
        #expect(try JSONDecoder().decode(StoredToken.self, from: JSONEncoder().encode(cookie)) == cookie)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//


#if canImport(FoundationNetworking)
import Foundation
import FoundationNetworking
import Testing
#endif

@testable import TokengateClient

@Suite struct TokenCaptureCookieTests {
    let token = TestTokens.jwt()

    @Test func cookieHeaderWithSeveralCookiesSpacesAndQuotes() throws {
        let header = "theme=dark;auth_token=\"\(self.token)\" ;  lang = en"
        let found = try #require(TokenCapture.fromCookieHeader(header))
        #expect(found.value == self.token)
        #expect(found.expiresAt == nil)
        #expect(TokenCapture.fromCookieHeader("  auth_token =   \(self.token)  ")?.value == self.token)
    }

    @Test func valueMayHoldEqualsSignsAndSplitIsOnTheFirstOne() throws {
        let padded = "abc.def.ghi=="
        #expect(TokenCapture.fromCookieHeader("x=1; auth_token=\(padded)")?.value == padded)
    }

    @Test func cookieNamesAreCaseSensitiveAndPrefixesDoNotMatch() {
        #expect(TokenCapture.fromCookieHeader("AUTH_TOKEN=\(self.token)") == nil)
        #expect(TokenCapture.fromCookieHeader("xauth_token=\(self.token); auth_token_old=\(self.token)") == nil)
        #expect(TokenCapture.fromCookieHeader("my_token=\(self.token)", name: "my_token")?.value == self.token)
    }

    @Test func hostileOrEmptyCookieValuesAreNotTokens() {
        for header in [
            "auth_token=", "auth_token", "auth_token=deleted now", "auth_token=<script>", "auth_token=a,b",
            "auth_token=\"unterminated", "auth_token=a\u{0}b", "auth_token==abc", ";;;", "", "=\(self.token)",
            "auth_token=\(String(repeating: "a", count: 9000))",
        ] {
            #expect(TokenCapture.fromCookieHeader(header) == nil, "\(header.prefix(40))")
        }
        #expect(TokenCapture.fromCookieHeader(nil) == nil)
    }

    @Test func firstTokenShapedValueWinsWhenTheNameRepeats() {
        let other = TestTokens.jwt(subject: "bob")
        #expect(TokenCapture.fromCookieHeader("auth_token=deleted now; auth_token=\(self.token); auth_token=\(other)")?.value == self.token)
    }

    @Test func setCookieKeepsMaxAgeAsExpiryAndAttributesAreCaseInsensitive() throws {
        let line = "auth_token=\(self.token); HttpOnly; Secure; SameSite=Strict; Path=/; mAx-AgE=3600"
        let found = try #require(TokenCapture.fromSetCookie([line], now: TestTokens.now))
        #expect(found.value == self.token)
        #expect(found.expiresAt == TestTokens.now.addingTimeInterval(3600))
    }

    @Test func setCookieExpiresInEachHTTPDateFormat() throws {
        let expected = Date(timeIntervalSince1970: 1_893_456_000)  // 2030-01-01 00:00:00 GMT
        for date in ["Tue, 01 Jan 2030 00:00:00 GMT", "Tue, 01-Jan-2030 00:00:00 GMT", "Tuesday, 01-Jan-30 00:00:00 GMT", "Tue Jan  1 00:00:00 2030"] {
            let found = try #require(TokenCapture.fromSetCookie(["auth_token=\(self.token); EXPIRES=\(date); Path=/"], now: TestTokens.now), "\(date)")
            #expect(found.expiresAt == expected, "\(date)")
        }
    }

    @Test func maxAgeWinsOverExpiresAndInvalidMaxAgeIsIgnored() throws {
        let both = "auth_token=\(self.token); Expires=Tue, 01 Jan 2030 00:00:00 GMT; Max-Age=60"
        #expect(TokenCapture.fromSetCookie([both], now: TestTokens.now)?.expiresAt == TestTokens.now.addingTimeInterval(60))
        let bad = "auth_token=\(self.token); Max-Age=1e9; Expires=Tue, 01 Jan 2030 00:00:00 GMT"
        #expect(TokenCapture.fromSetCookie([bad], now: TestTokens.now)?.expiresAt == Date(timeIntervalSince1970: 1_893_456_000))
    }

    @Test func deletionAfterTheTokenLeavesNoToken() {
        let set = "auth_token=\(self.token); Path=/"
        #expect(TokenCapture.fromSetCookie([set, "auth_token=; Max-Age=0; Path=/"], now: TestTokens.now) == nil)
        #expect(TokenCapture.fromSetCookie([set, "auth_token=x; Max-Age=-1"], now: TestTokens.now) == nil)
        #expect(TokenCapture.fromSetCookie([set, "auth_token=gone; Expires=Thu, 01 Jan 1970 00:00:00 GMT"], now: TestTokens.now) == nil)
        #expect(TokenCapture.fromSetCookie(["auth_token=\(self.token); Max-Age=0"], now: TestTokens.now) == nil)
    }

    @Test func foldedSetCookieLinesAreSplitOnlyWhereANewCookieStarts() throws {
        let folded = "a=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Path=/, auth_token=\(self.token); Max-Age=10, b=2"
        let lines = TokenCapture.setCookieLines(folded)
        #expect(lines.count == 3)
        #expect(TokenCapture.fromSetCookie([folded], now: TestTokens.now)?.value == self.token)
    }

    @Test func expiryIsTheEarlierOfDeliveryAndExpClaim() throws {
        let short = TestTokens.jwt(exp: 1_700_000_200)
        let found = try #require(TokenCapture.fromSetCookie(["auth_token=\(short); Max-Age=3600"], now: TestTokens.now))
        #expect(found.expiresAt == Date(timeIntervalSince1970: 1_700_000_200))
        #expect(TokenCapture.fromCookieHeader("auth_token=\(short)")?.expiresAt == Date(timeIntervalSince1970: 1_700_000_200))
    }

    @Test func httpCookiesFromACookieStore() throws {
        let cookie = try #require(HTTPCookie(properties: [
            .name: "auth_token", .value: self.token, .domain: "example.com", .path: "/",
            .expires: Date(timeIntervalSince1970: 1_900_000_000),
        ]))
        let elsewhere = try #require(HTTPCookie(properties: [.name: "auth_token", .value: TestTokens.jwt(subject: "eve"), .domain: "evil.example", .path: "/"]))
        let found = try #require(TokenCapture.fromCookies([elsewhere, cookie], domain: "www.example.com", now: TestTokens.now))
        #expect(found.value == self.token)
        #expect(found.expiresAt == Date(timeIntervalSince1970: 1_900_000_000))
        #expect(TokenCapture.fromCookies([elsewhere], domain: "example.com", now: TestTokens.now) == nil)
        #expect(TokenCapture.fromCookies([cookie], domain: "notexample.com", now: TestTokens.now) == nil)
    }

    @Test func titleCapture() {
        #expect(TokenCapture.fromTitle("tokengate-token:\(self.token)")?.value == self.token)
        #expect(TokenCapture.fromTitle("  tokengate-token:\(self.token)\n")?.value == self.token)
        for title in [
            nil, "", "Log in", "tokengate-token:", "Tokengate-Token:\(self.token)", "x tokengate-token:\(self.token)",
            "tokengate-token: \(self.token)", "tokengate-token:\(self.token) extra", "tokengate-token:<b>\(self.token)",
        ] {
            #expect(TokenCapture.fromTitle(title) == nil, "\(String(describing: title))")
        }
    }

    @Test func storedTokenNeverPrintsItsValue() {
        let stored = StoredToken(value: self.token, expiresAt: nil)
        var dumped = ""
        dump(stored, to: &dumped)
        for text in ["\(stored)", String(describing: stored), String(reflecting: stored), dumped] {
            #expect(!text.contains(self.token), "\(text)")
            #expect(text.contains("redacted"))
        }
    }

    @Test func expiryChecks() {
        let stored = StoredToken(value: self.token, expiresAt: TestTokens.now)
        #expect(stored.isExpired(now: TestTokens.now))
        #expect(!stored.isExpired(now: TestTokens.now.addingTimeInterval(-1)))
        #expect(stored.isExpired(now: TestTokens.now.addingTimeInterval(-10), leeway: 30))
        #expect(!StoredToken(value: self.token, expiresAt: nil).isExpired(now: .distantFuture))
    }
}

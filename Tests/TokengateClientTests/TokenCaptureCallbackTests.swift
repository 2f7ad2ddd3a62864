//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateClient

@Suite struct TokenCaptureCallbackTests {
    let token = TestTokens.jwt()
    let callback = "myapp://token"

    private func capture(_ text: String, state: String? = nil) throws -> StoredToken? {
        let url = try #require(URL(string: text), "\(text)")
        return try TokenCapture.fromCallback(url, callback: self.callback, expectedState: state, now: TestTokens.now)
    }

    private func expectError(_ code: TokengateClientError.Code, _ text: String, state: String? = nil) {
        #expect(throws: TokengateClientError(code, "")) { try self.capture(text, state: state) }
    }

    @Test func tokenInTheFragmentWithExpiresIn() throws {
        let found = try #require(try self.capture("myapp://token#access_token=\(self.token)&token_type=bearer&expires_in=3600"))
        #expect(found.value == self.token)
        #expect(found.expiresAt == TestTokens.now.addingTimeInterval(3600))
    }

    @Test func tokenInTheQueryAsGeniSendsIt() throws {
        let found = try #require(try self.capture("myapp://token?access_token=\(self.token)&expires_in=60"))
        #expect(found.value == self.token)
        #expect(found.expiresAt == TestTokens.now.addingTimeInterval(60))
    }

    @Test func percentEncodedTokenIsDecodedOnce() throws {
        let opaque = "tk_U13Drz+/abc=="
        let encoded = "tk_U13Drz%2B%2Fabc%3D%3D"
        #expect(try self.capture("myapp://token#access_token=\(encoded)")?.value == opaque)
    }

    @Test func expiresAtInOCLCAndOtherForms() throws {
        let expected = Date(timeIntervalSince1970: 1_388_922_246)  // 2014-01-05 11:44:06Z
        for value in ["2014-01-05%2011:44:06Z", "2014-01-05%252011:44:06Z", "2014-01-05T11:44:06Z", "1388922246"] {
            let found = try #require(try self.capture("myapp://token#access_token=abc&expires_at=\(value)"), "\(value)")
            #expect(found.expiresAt == expected, "\(value)")
        }
        self.expectError(.malformedCallback, "myapp://token#access_token=abc&expires_at=tomorrow")
        self.expectError(.malformedCallback, "myapp://token#access_token=abc&expires_in=-5")
        self.expectError(.malformedCallback, "myapp://token#access_token=abc&expires_in=1e3")
    }

    @Test func cancelIsATypedErrorWithTheSitesMessage() throws {
        do {
            _ = try self.capture("myapp://token?status=unauthorized&message=user+canceled")
            Issue.record("expected an error")
        } catch let error as TokengateClientError {
            #expect(error.code == .unauthorized)
            #expect(error.serverMessage == "user canceled")
        }
        self.expectError(.unauthorized, "myapp://token?status=unauthorized&message=user%20canceled")
        self.expectError(.unauthorized, "myapp://token#error=access_denied&error_description=no")
    }

    @Test func serverMessageIsMadePrintableAndShort() throws {
        do {
            _ = try self.capture("myapp://token?status=unauthorized&message=a%0D%0Ab\(String(repeating: "x", count: 500))")
            Issue.record("expected an error")
        } catch let error as TokengateClientError {
            let message = try #require(error.serverMessage)
            #expect(!message.contains("\r") && !message.contains("\n"))
            #expect(message.count == 200)
        }
    }

    @Test func stateIsChecked() throws {
        #expect(try self.capture("myapp://token#access_token=abc&state=s1", state: "s1")?.value == "abc")
        self.expectError(.stateMismatch, "myapp://token#access_token=abc&state=s2", state: "s1")
        self.expectError(.stateMismatch, "myapp://token#access_token=abc", state: "s1")
        // The state check comes first: a cancel someone else started is not reported as this app's cancel.
        self.expectError(.stateMismatch, "myapp://token?status=unauthorized&state=other", state: "s1")
    }

    @Test func otherURLsAreNotForUs() throws {
        for text in [
            "otherapp://token#access_token=abc", "myapp://token2#access_token=abc", "myapp://tok#access_token=abc",
            "https://token#access_token=abc", "myapp://evil/token#access_token=abc",
        ] {
            #expect(try self.capture(text) == nil, "\(text)")
        }
        #expect(try self.capture("MYAPP://token#access_token=abc")?.value == "abc")
    }

    @Test func hostileCallbacksAreRefused() {
        for text in [
            "myapp://token#access_token=abc&access_token=def",  // which one?
            "myapp://token#access_token=%ZZ",  // broken escape
            "myapp://token#access_token=%C3%28",  // not UTF-8
            "myapp://token#access_token=a%20b",  // not a bearer token
            "myapp://token#access_token=%3Cscript%3E",
            "myapp://token#access_token=abc&token_type=mac",
            "myapp://token#access_token=",
            "myapp://token",
            "myapp://token#nothing=here",
        ] {
            self.expectError(.malformedCallback, text)
        }
    }

    @Test func fragmentWinsOverQuery() throws {
        let other = TestTokens.jwt(subject: "mallory")
        #expect(try self.capture("myapp://token?access_token=\(other)#access_token=\(self.token)")?.value == self.token)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import Testing
import TokengateConfig
import TokengateHTTP
import TokengateTokens

@testable import TokengateGateway

/// A click on the confirmation page's "continue", read as plain values: which `POST` is one, its query and body,
/// and the checks made on its head before the body is read.
@Suite struct TokenPageConfirmationRequestTests {
    static let apps = [
        TokenPageApp(name: "ios", callback: "myapp://token", pkce: .required),
        TokenPageApp(name: "old", callback: "myapp://old"),
    ]
    static let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    static let target = "/token?app=ios&state=S1&code_challenge=\(challenge)&code_challenge_method=S256&confirm=1"

    @Test("any confirm in a POST's query makes it a confirmation; a redemption has none")
    func marker() {
        #expect(TokenPageConfirmationRequest.isConfirmation(target: Self.target))
        #expect(TokenPageConfirmationRequest.isConfirmation(target: "/token?confirm=2"))
        #expect(TokenPageConfirmationRequest.isConfirmation(target: "/token?x=1&confirm"))
        #expect(!TokenPageConfirmationRequest.isConfirmation(target: "/token"))
        #expect(!TokenPageConfirmationRequest.isConfirmation(target: "/token?"))
        #expect(!TokenPageConfirmationRequest.isConfirmation(target: "/token?app=ios&confirmation=1"))
        #expect(!TokenPageConfirmationRequest.isConfirmation(target: "/token/confirm"))
    }

    @Test("the page's own target and a one-field body are read")
    func parsed() throws {
        let parsed = try TokenPageConfirmationRequest.parse(
            target: Self.target, body: Array("confirmation=AbC-_1&other=x".utf8), apps: Self.apps
        ).get()
        #expect(parsed.app.name == "ios")
        #expect(parsed.value == "AbC-_1")
        #expect(parsed.request.state == "S1")
        #expect(parsed.request.challenge?.text == Self.challenge)
        #expect(parsed.request.returnAddress == Self.target)
        // What the page builds is what it reads back.
        #expect("/token" + TokenPageConfirmationRequest.target(for: parsed.request) == Self.target)
        let bare = try TokenPageConfirmationRequest.parse(
            target: "/token?app=old&confirm=1", body: Array("confirmation=v".utf8), apps: Self.apps
        ).get()
        #expect(bare.request.state == nil && bare.request.challenge == nil)
        #expect(TokenPageConfirmationRequest.target(for: bare.request) == "?app=old&confirm=1")
    }

    @Test("queries the page does not make are refused", arguments: [
        "/token?confirm=1",  // no app
        "/token?app=ios&code_challenge=\(challenge)&code_challenge_method=S256&confirm=2",
        "/token?app=ios&code_challenge=\(challenge)&code_challenge_method=S256&confirm=1&confirm=1",
        "/token?app=ios&code_challenge=\(challenge)&code_challenge_method=S256&cancel=1&confirm=1",
        "/token?app=nope&confirm=1",
        "/token?app=ios&confirm=1",  // pkce: required, no challenge
        "/token?app=ios&code_challenge=\(challenge)&code_challenge_method=plain&confirm=1",
        "/token?app=old&state=a%20b&confirm=1",
        "/token?app=old&app=ios&confirm=1",
    ])
    func badQueries(_ target: String) {
        let result = TokenPageConfirmationRequest.parse(target: target, body: Array("confirmation=v".utf8), apps: Self.apps)
        guard case .failure(.query) = result else {
            Issue.record("\(target) was read: \(result)")
            return
        }
    }

    @Test("the body holds the value exactly once, URL-encoded")
    func badBodies() {
        func refusal(_ body: String) -> TokenPageConfirmationRequest.Refusal? {
            if case .failure(let refusal) = TokenPageConfirmationRequest.parse(
                target: Self.target, body: Array(body.utf8), apps: Self.apps)
            {
                return refusal
            }
            return nil
        }
        #expect(refusal("") == .body("confirmation is missing"))
        #expect(refusal("confirmation=") == .body("confirmation is missing"))
        #expect(refusal("grant_type=authorization_code") == .body("confirmation is missing"))
        #expect(refusal("confirmation=a&confirmation=b") == .body("confirmation is given twice"))
        #expect(refusal("confirmation=a&confirmation=a") == .body("confirmation is given twice"))
        #expect(refusal("confirmation=%zz") == .body("confirmation is not URL-encoded"))
        #expect(refusal("confirmation=a") == nil)
    }

    @Test("Sec-Fetch-Site and Origin, when a browser sends them, must say the page's own origin")
    func whereTheFormCameFrom() {
        func reason(_ sites: [String], _ origins: [String], host: String? = "www.example.com") -> String? {
            TokenPageResponder.confirmationHeadProblem(
                fetchSites: sites, origins: origins, host: host, contentType: "application/x-www-form-urlencoded",
                contentLength: 60)?.reasonCode
        }
        #expect(reason([], []) == nil, "neither: older browsers and web views; the value still decides")
        #expect(reason(["same-origin"], ["https://www.example.com"]) == nil)
        #expect(reason(["Same-Origin"], ["HTTPS://WWW.Example.com:443"]) == nil)
        #expect(reason([], ["https://www.example.com"], host: "www.example.com:443") == nil)
        for site in ["cross-site", "same-site", "none", ""] {
            #expect(reason([site], []) == "token_page_confirm_cross_site", "\(site)")
        }
        #expect(reason(["same-origin", "same-origin"], []) == "token_page_confirm_cross_site")
        for origin in [
            "https://evil.example", "null", "http://www.example.com", "https://www.example.com:8443",
            "https://www.example.com.evil.example", "https://sub.www.example.com", "",
        ] {
            #expect(reason(["same-origin"], [origin]) == "token_page_confirm_bad_origin", "\(origin)")
        }
        #expect(reason([], ["https://www.example.com", "https://www.example.com"]) == "token_page_confirm_bad_origin")
        #expect(reason([], ["https://www.example.com"], host: nil) == "token_page_confirm_bad_origin")
    }

    @Test("one form body of at most 1 KiB")
    func bodyShape() {
        func answer(_ type: String?, _ length: Int?) -> TokenPageAnswer? {
            TokenPageResponder.confirmationHeadProblem(
                fetchSites: ["same-origin"], origins: [], host: "h", contentType: type, contentLength: length)
        }
        #expect(answer("application/x-www-form-urlencoded", 1024) == nil)
        #expect(answer("application/x-www-form-urlencoded", nil) == nil, "chunked: held to the limit as it is read")
        #expect(answer("application/x-www-form-urlencoded", 1025)?.status == .payloadTooLarge)
        #expect(answer("application/x-www-form-urlencoded", 1025)?.reasonCode == "token_page_confirm_too_large")
        for type in [nil, "application/json", "multipart/form-data", "text/plain"] {
            #expect(answer(type, 10)?.status == .badRequest)
            #expect(answer(type, 10)?.reasonCode == "token_page_confirm_bad_request")
        }
    }

    @Test("the page's forms may go to the page and to the app's callback, nowhere else")
    func formAction() {
        #expect(TokenPageResponder.formActionSource(callback: "myapp://token") == "myapp:")
        #expect(TokenPageResponder.formActionSource(callback: "com.Example.App:/cb") == "com.example.app:")
        #expect(TokenPageResponder.formActionSource(callback: "https://app.example.com/cb?x=1") == "https://app.example.com")
        #expect(TokenPageResponder.formActionSource(callback: "https://app.example.com:8443") == "https://app.example.com:8443")
        #expect(TokenPageResponder.formActionSource(callback: "https://app.example.com;x/cb") == "https:")
        #expect(
            TokenPageResponder.confirmationPolicy(callback: "myapp://token")
                == "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self' myapp:")
    }
}

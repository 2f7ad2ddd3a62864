//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateClient

@Suite struct TokenPageURLTests {
    let site = URL(string: "https://example.com")!

    @Test func buildsThePageURL() throws {
        #expect(try TokenPageURL(site: self.site).url.absoluteString == "https://example.com/token")
        #expect(try TokenPageURL(site: URL(string: "https://example.com:8443/")!, path: "/mobile/token").url.absoluteString == "https://example.com:8443/mobile/token")
        #expect(try TokenPageURL(site: self.site, app: "ios-app", state: "s-1.x~").url.absoluteString == "https://example.com/token?app=ios-app&state=s-1.x~")
        #expect(try TokenPageURL(site: URL(string: "http://localhost:8443")!).url.absoluteString == "http://localhost:8443/token")
    }

    @Test func refusesWhatCouldLeakOrRedirect() {
        #expect(throws: TokengateClientError(.insecureURL, "")) { try TokenPageURL(site: URL(string: "http://example.com")!) }
        for site in ["https://example.com/path", "https://example.com?x=1", "https://user:pw@example.com", "example.com"] {
            #expect(throws: TokengateClientError(.invalidURL, ""), "\(site)") { try TokenPageURL(site: URL(string: site)!) }
        }
        for path in ["token", "//evil/token", "/token?x=1", "/to ken", "/token#x", "/\\evil"] {
            #expect(throws: TokengateClientError(.invalidURL, ""), "\(path)") { try TokenPageURL(site: self.site, path: path) }
        }
        for app in ["", "a&b", "a b", "../x", String(repeating: "a", count: 65)] {
            #expect(throws: TokengateClientError(.invalidURL, ""), "\(app)") { try TokenPageURL(site: self.site, app: app) }
        }
        #expect(throws: TokengateClientError(.invalidURL, "")) { try TokenPageURL(site: self.site, state: "s") }
        #expect(throws: TokengateClientError(.invalidURL, "")) { try TokenPageURL(site: self.site, app: "a", state: "a&b") }
    }

    @Test func randomStateIsUsable() throws {
        let one = TokenPageURL.randomState()
        #expect(one.count == 32)
        #expect(one != TokenPageURL.randomState())
        _ = try TokenPageURL(site: self.site, app: "a", state: one)
    }
}

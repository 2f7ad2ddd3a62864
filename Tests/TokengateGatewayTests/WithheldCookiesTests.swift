//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing
import TokengateConfig

@testable import TokengateGateway

/// Which routes withhold a token page's delivery cookie: those a browser sends it to (the page's host, paths
/// under `cookie_path`), unless the route reads it as its token and keeps it. And the confirmation cookie
/// (`Path=/`): every route of a page's host, always.
@Suite struct WithheldCookiesTests {
    func page(host: String?, cookie: String = "auth_token", path: String = "/") -> RouteConfiguration {
        let page = TokenPageConfiguration(login: .sessionCookie("session"), loginURL: "/login", cookieName: cookie, cookiePath: path)
        return RouteConfiguration(host: host, pathPrefix: "/token", kind: .tokenPage(page), upstream: nil, accept: AcceptPolicy(api: false, session: false))
    }

    func route(host: String?, prefix: String = "/", sources: [TokenSource] = [.authorization], keep: Bool = false) -> RouteConfiguration {
        RouteConfiguration(
            host: host, pathPrefix: prefix, upstream: "api", accept: AcceptPolicy(api: true, session: false), sources: sources,
            forwardToken: keep ? .keep : .strip
        )
    }

    /// The delivery cookies withheld (the confirmation cookie has its own test).
    func withheld(_ pages: [RouteConfiguration], on route: RouteConfiguration) -> [String] {
        self.all(pages, on: route).filter { $0 != TokenPageConfirmationCookie.name }
    }

    func all(_ pages: [RouteConfiguration], on route: RouteConfiguration) -> [String] {
        GatewayRuntime.withheldCookies(GatewayRuntime.tokenPageDeliveryCookies(pages), route: route)
    }

    @Test func theConfirmationCookieOnEveryRouteOfThePagesHost() {
        let confirm = "__Host-tokengate-confirm"
        let pages = [self.page(host: "id.example.com", path: "/m/")]
        // Any path (the cookie has `Path=/`), even a route that reads it and keeps its token.
        for route in [
            self.route(host: "id.example.com"), self.route(host: "ID.example.com", prefix: "/web/"), self.route(host: nil),
            self.route(host: "id.example.com", sources: [.cookie(confirm)], keep: true),
        ] {
            #expect(self.all(pages, on: route).filter { $0 == confirm }.count == 1, "\(route.pathPrefix)")
        }
        #expect(!self.all(pages, on: self.route(host: "shop.example.com")).contains(confirm))
        #expect(self.all([self.page(host: nil)], on: self.route(host: "shop.example.com")).contains(confirm))
        #expect(self.all([], on: self.route(host: nil)).isEmpty, "no token page, no cookie of its own")
    }

    @Test func onThePagesHostOnly() {
        let pages = [self.page(host: "id.example.com")]
        #expect(self.withheld(pages, on: self.route(host: "id.example.com")) == ["auth_token"])
        #expect(self.withheld(pages, on: self.route(host: "ID.Example.com")) == ["auth_token"])
        #expect(self.withheld(pages, on: self.route(host: nil)) == ["auth_token"], "a route for every host serves the page's too")
        #expect(self.withheld(pages, on: self.route(host: "shop.example.com")).isEmpty, "another site's own auth_token")
        #expect(self.withheld([self.page(host: nil)], on: self.route(host: "shop.example.com")) == ["auth_token"])
    }

    @Test func underTheCookiePathOnly() {
        let pages = [self.page(host: nil, path: "/m/")]
        #expect(self.withheld(pages, on: self.route(host: nil, prefix: "/m/api/")) == ["auth_token"])
        #expect(self.withheld(pages, on: self.route(host: nil, prefix: "/")) == ["auth_token"], "`/` serves `/m/` too")
        #expect(self.withheld(pages, on: self.route(host: nil, prefix: "/web/")).isEmpty)
    }

    @Test func keptWhereTheRouteReadsAndKeepsIt() {
        let pages = [self.page(host: nil), self.page(host: nil, cookie: "app_token")]
        #expect(self.withheld(pages, on: self.route(host: nil, sources: [.cookie("auth_token")], keep: true)) == ["app_token"])
        #expect(self.withheld(pages, on: self.route(host: nil, sources: [.cookie("auth_token")])) == ["auth_token", "app_token"])
        #expect(self.withheld(pages, on: self.route(host: nil, keep: true)) == ["auth_token", "app_token"])
        #expect(self.withheld([self.page(host: "a.example"), self.page(host: "b.example")], on: self.route(host: nil)) == ["auth_token"], "once")
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

/// The token page's delivery cookie holds a long-lived api token and goes with every request to the site
/// (`Path=/`): no backend gets it, except on a route that reads it as its token and keeps it.
extension GatewayIntegrationTests {
    static let deliveryCookieRoutes = """
          - path_prefix: /token
            kind: token_page
            cookie_name: app_token
            login: { session_cookie: session, login_url: /login }
          - { path_prefix: /api/, upstream: api, accept: [api], sources: [authorization] }
          - { path_prefix: /keep-cookie/, upstream: api, accept: [api], sources: [authorization, "cookie:app_token"], forward_token: keep }
          - { path_prefix: /keep-header/, upstream: api, accept: [api], sources: [authorization], forward_token: keep }
          - { path_prefix: /account/, upstream: api, accept: [session], sources: ["cookie:session"] }
          - { path_prefix: /, upstream: api, accept: none }
        """

    /// The `cookie` field the backend received, `nil` when it got none.
    private func backendCookie(_ result: Curl.Result) throws -> String? {
        let echo = try #require(try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any], "\(result.body)")
        let headers = (echo["headers"] as? [[String]]) ?? []
        let cookies = headers.filter { $0[0] == "cookie" }.map { $0[1] }
        #expect(cookies.count <= 1, "one cookie field at most: \(cookies)")
        return cookies.first
    }

    @Test func theTokenPagesDeliveryCookieReachesNoBackendThatDoesNotKeepIt() async throws {
        try await self.withGateway(routes: Self.deliveryCookieRoutes, tokens: "signing_key: { jwks: private.jwks }") { gateway in
            let token = try gateway.mint("alice")
            let session = try gateway.mint("alice", apiOnly: false)
            let base = gateway.baseURL
            for version in ["--http1.1", "--http2"] {
                func send(_ arguments: [String]) throws -> Curl.Result {
                    let result = try self.curl(gateway, [version] + arguments)
                    #expect(result.status == 200, "\(version) \(arguments.last ?? ""): \(result.body) \(result.stderr)")
                    return result
                }
                // A public route: the other cookies pass untouched, the delivery cookie does not.
                let open = try send(["-H", "Cookie: theme=dark; app_token=\(token); lang=en", "\(base)/news"])
                #expect(try self.backendCookie(open) == "theme=dark; lang=en", "\(version)")
                #expect(!open.body.contains(token), "\(version): the public backend saw the api token")
                let only = try send(["-H", "Cookie: app_token=\(token)", "\(base)/news"])
                #expect(try self.backendCookie(only) == nil, "\(version): nothing is left to forward")

                // A token route whose token came in the Authorization header.
                let api = try send(["-H", "Authorization: Bearer \(token)", "-H", "Cookie: app_token=\(token); a=1", "\(base)/api/items"])
                #expect(try self.backendCookie(api) == "a=1", "\(version)")
                #expect(!api.body.contains(token), "\(version)")

                // A session route: its own cookie is stripped as before, and the delivery cookie too.
                let account = try send(["-H", "Cookie: session=\(session); app_token=\(token); b=2", "\(base)/account/me"])
                #expect(try self.backendCookie(account) == "b=2", "\(version)")

                // `forward_token: keep` on a route that reads the cookie: the backend asked for it.
                let kept = try send(["-H", "Cookie: app_token=\(token); c=3", "\(base)/keep-cookie/x"])
                #expect(try self.backendCookie(kept) == "app_token=\(token); c=3", "\(version)")
                // `keep` on a route that reads only the header: the cookie is not that route's token.
                let header = try send(["-H", "Authorization: Bearer \(token)", "-H", "Cookie: app_token=\(token)", "\(base)/keep-header/x"])
                #expect(try self.backendCookie(header) == nil, "\(version)")
                #expect(header.body.contains(token), "\(version): the kept Authorization header is forwarded")
            }
        }
    }

    /// `curl -I` on the token page, logged in: the page's fields, a well-formed empty answer, and no token.
    @Test func aHeadRequestOnTheTokenPageMintsNothing() async throws {
        try await self.withGateway(routes: Self.deliveryCookieRoutes, tokens: "signing_key: { jwks: private.jwks }") { gateway in
            let session = try gateway.mint("alice", apiOnly: false)
            for version in ["--http1.1", "--http2"] {
                // Twice on one connection: the second answer is only read right if the first was framed right
                // (`-D` gathers both heads; both must be the page's).
                let url = "\(gateway.baseURL)/token"
                let result = try self.curl(gateway, [version, "-I", "-H", "Cookie: session=\(session)", url, "-o", "/dev/null", url])
                #expect(result.exitCode == 0, "\(version): \(result.stderr)")
                #expect(result.status == 200200, "\(version): two answers (`-w` once per transfer), both 200")
                func all(_ name: String) -> [String] { result.headers.filter { $0.0.lowercased() == name }.map(\.1) }
                #expect(all("set-cookie").isEmpty, "\(version)")
                #expect(all("content-type") == ["text/html; charset=utf-8", "text/html; charset=utf-8"], "\(version)")
                #expect(all("cache-control") == ["no-store", "no-store"], "\(version)")
                #expect(!result.headers.contains { $0.1.contains(".") && $0.1.hasPrefix("ey") }, "\(version): no token anywhere")
                let get = try self.curl(gateway, [version, "-H", "Cookie: session=\(session)", url])
                #expect(get.status == 200, "\(version)")
                #expect(get.headers.filter { $0.0.lowercased() == "set-cookie" }.count == 1, "\(version): GET still delivers")
            }
            #expect(!gateway.logLines.all.contains { $0.contains("token_page_issued") && $0.contains("HEAD") })
        }
    }

    /// Without a token page nothing is withheld: a cookie of that name is the site's own business.
    @Test func withoutATokenPageCookiesPassAsTheyCame() async throws {
        try await self.withGateway { gateway in
            let result = try self.curl(gateway, ["-H", "Cookie: theme=dark; auth_token=x.y.z; lang=en", "\(gateway.baseURL)/news"])
            #expect(result.status == 200)
            #expect(try self.backendCookie(result) == "theme=dark; auth_token=x.y.z; lang=en")
        }
    }
}

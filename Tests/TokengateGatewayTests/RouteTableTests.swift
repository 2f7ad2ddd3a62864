//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateConfig

@testable import TokengateGateway

@Suite("Route table")
struct RouteTableTests {
    func route(_ host: String?, _ prefix: String) -> RouteConfiguration {
        RouteConfiguration(host: host, pathPrefix: prefix, upstream: "u", accept: .none, sources: [])
    }

    var table: RouteTable {
        RouteTable(routes: [
            self.route("api.example.com", "/"),  // 0
            self.route(nil, "/api/"),  // 1
            self.route("api.example.com", "/v1/"),  // 2
            self.route(nil, "/"),  // 3
            self.route(nil, "/api/admin/"),  // 4
            self.route("www.example.com", "/account/"),  // 5
            self.route("::1", "/v6/"),  // 6
        ])
    }

    @Test(
        "matching",
        arguments: [
            ("API.Example.COM:8443", "/v1/users", 2),
            ("api.example.com", "/v1/", 2),
            ("api.example.com.", "/v1/x", 2),
            ("api.example.com", "/v1", 0),
            ("api.example.com", "/other", 0),
            ("api.example.com", "/api/admin/x", 0),
            ("other.com", "/api/admin/x", 4),
            ("other.com", "/api/admin/", 4),
            ("other.com", "/api/x", 1),
            ("other.com", "/api", 3),
            ("other.com", "/", 3),
            ("www.example.com", "/account/settings", 5),
            ("www.example.com", "/api/x", 1),
            ("WWW.EXAMPLE.COM:443", "/account", 3),
            ("[::1]:8443", "/v6/x", 6),
            ("[::1]", "/v6/x", 6),
            ("api.example.com.evil", "/v1/x", 3),
            ("evil-api.example.com", "/v1/x", 3),
            ("", "/v1/x", 3),
        ] as [(String, String, Int)]
    )
    func matching(host: String, path: String, expected: Int) {
        #expect(self.table.match(host: host, path: path) == expected)
    }

    @Test("no host header falls back to host-less routes")
    func noHost() {
        #expect(self.table.match(host: nil, path: "/api/admin/users") == 4)
        #expect(self.table.match(host: nil, path: "/v1/x") == 3)
    }

    @Test("without a catch-all, unmatched requests match nothing")
    func noMatch() {
        let table = RouteTable(routes: [self.route(nil, "/api/"), self.route("a.example", "/b/")])
        #expect(table.match(host: "x.example", path: "/other") == nil)
        #expect(table.match(host: "a.example", path: "/other") == nil)
        #expect(table.match(host: "a.example", path: "/b/c") == 1)
        #expect(table.match(host: "a.example", path: "") == nil)
        #expect(RouteTable(routes: []).match(host: "a", path: "/") == nil)
    }

    @Test("the longest prefix wins whatever the file order")
    func longestPrefixRegardlessOfOrder() {
        let table = RouteTable(routes: [self.route(nil, "/"), self.route(nil, "/a/"), self.route(nil, "/a/b/")])
        #expect(table.match(host: nil, path: "/a/b/c") == 2)
        let reversed = RouteTable(routes: [self.route(nil, "/a/b/"), self.route(nil, "/a/"), self.route(nil, "/")])
        #expect(reversed.match(host: nil, path: "/a/b/c") == 0)
        #expect(reversed.match(host: nil, path: "/a/x") == 1)
    }

    @Test("byte-level matching from raw buffers")
    func bytes() {
        let table = self.table
        let host: [UInt8] = Array("Api.Example.com:8443".utf8)
        let path: [UInt8] = Array("/v1/users".utf8)
        let index = host.withUnsafeBufferPointer { hostBytes in
            path.withUnsafeBufferPointer { pathBytes in
                table.match(hostBytes: hostBytes, pathBytes: pathBytes)
            }
        }
        #expect(index == 2)
    }

    @Test("the configuration's own table matches its routes")
    func fromConfiguration() throws {
        let config = try GatewayConfiguration.load(path: DevCommandTests.shippedConfiguration, checkFiles: false)
        let table = RouteTable(routes: config.routes)
        #expect(table.match(host: "localhost:8443", path: "/api/items") == 0)
        #expect(table.match(host: "localhost:8443", path: "/account/me") == 1)
        #expect(table.match(host: "localhost:8443", path: "/token") == 2)
        #expect(table.match(host: "localhost:8443", path: "/index.html") == 3)
    }
}

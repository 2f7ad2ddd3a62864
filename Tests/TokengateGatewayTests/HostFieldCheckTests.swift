//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import Testing
import TokengateAdmin
import TokengateHTTP

@testable import TokengateGateway

/// The one check of a request's `Host` field lines (``HostFieldCheck``) and the three listeners that use it: the
/// public request path, the admin listener and the plain-HTTP redirect. The value rule itself is
/// `RequestTargetCheckTests.hostValues`.
@Suite struct HostFieldCheckTests {
    @Test func fieldLines() {
        func problem(_ values: [String], required: Bool = true, emptyAllowed: Bool = true) -> HostFieldCheck.Problem? {
            HostFieldCheck.problem(values, required: required, emptyAllowed: emptyAllowed)
        }
        #expect(problem(["a.example:8443"]) == nil)
        #expect(problem(["  a.example\t"]) == nil, "spaces and tabs around a value are not part of it")
        #expect(problem([]) == .notExactlyOne)
        #expect(problem([], required: false) == nil)
        #expect(problem(["a", "a"]) == .notExactlyOne)
        #expect(problem(["a", "a"], required: false) == .notExactlyOne)
        #expect(problem([""]) == nil, "RFC 9112 §3.2 allows an empty Host")
        #expect(problem(["  "], emptyAllowed: false) == .empty)
        #expect(problem(["a@b"]) == .invalid)
        #expect(problem(["::1"]) == .invalid, "an IPv6 literal is bracketed")
        #expect(HostFieldCheck.isRequired(in: .http1_1))
        #expect(!HostFieldCheck.isRequired(in: .http1_0))
        #expect(!HostFieldCheck.isRequired(in: HTTPVersion(major: 2, minor: 0)))
        #expect(HostFieldCheck.Problem.notExactlyOne.description == "a request needs exactly one Host header")
        #expect(HostFieldCheck.Problem.empty.description == "the Host header is empty")
        #expect(HostFieldCheck.Problem.invalid.description == "the Host field is not a valid host and port")
    }

    /// The admin listener judges a `Host` by the public listeners' rule: before, it refused only two or an empty
    /// one, and passed `a@b` or `a b` wherever any name may (with `secret_file`, or over TLS).
    @Test func theAdminListenerRefusesAnInvalidHost() {
        for value in ["a@b", "a b", "host/evil", "::1", "a:1:2"] {
            #expect(
                AdminConnectionHandler.hostProblem(["host": value], version: .http1_1) == "the Host field is not a valid host and port",
                "\(value)"
            )
        }
        for value in ["localhost:9901", "[::1]:9901", "127.0.0.1", "admin.internal"] {
            #expect(AdminConnectionHandler.hostProblem(["host": value], version: .http1_1) == nil, "\(value)")
        }
    }

    /// The redirect names the host in `Location`: exactly one `Host`, valid by the public listeners' rule, not
    /// empty. Before, it had a rule of its own, which let `a[b`, `a:b:c` and a port of letters through (into a
    /// broken `Location`) and refused `_` and `~`, which the public listeners accept.
    @Test func theRedirectHost() {
        let cases: [([String], String?)] = [
            (["www.example.com:8080"], "www.example.com"),
            (["127.0.0.1"], "127.0.0.1"),
            (["[::1]:8080"], "[::1]"),
            (["[2001:db8::1]"], "[2001:db8::1]"),
            (["a_b~c"], "a_b~c"),
            (["host:"], "host"),
            ([], nil), ([""], nil), (["a", "b"], nil), (["a b"], nil),
            (["a[b"], nil), (["a:b:c"], nil), (["host:abc"], nil), (["[::1]x"], nil), ([":80"], nil), (["a@b"], nil),
        ]
        for (hosts, expected) in cases {
            #expect(PlainHTTPHandler.redirectHost(hosts) == expected, "\(hosts)")
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing
import TokengateConfig
import TokengateHTTP
import TokengatePercentEncoding

@testable import TokengateGateway

@Suite struct RequestTargetCheckTests {
    @Test func targetsTakenAsSent() {
        for target in ["/", "/api/a", "/api/a/", "/a.b/c..d/...", "/%20x/%C3%A9", "/a?b=%zz;c#", "/a?x=/../y", "/a%3Bb", "/.well-known/x"] {
            #expect(RequestTargetCheck.check(target) == (target.contains("#") ? .refused("must not contain a fragment ('#')") : .accepted), "\(target)")
        }
    }

    @Test func segmentTailsThatBackendsTrim() {
        let cases: [(String, String?)] = [
            ("/api/a", nil),
            ("/a.b/c..d/x?q=1.", nil),
            ("/", nil),
            ("/api./x", "/api/x"),
            ("/api%20/x", "/api/x"),
            ("/api%09/x", "/api/x"),
            ("/api.%20.%09/x", "/api/x"),
            ("/wiki/U.S.", "/wiki/U.S"),
            ("/a./b%20?q=x.%20", "/a/b?q=x.%20"),
            ("/....", "/"),
            ("/a%2", nil),
            ("/a%320", nil),  // `%32` and `0`: no encoded space ends it
        ]
        for (target, trimmed) in cases {
            #expect(RequestTargetCheck.withSegmentTailsTrimmed(target) == trimmed, "\(target)")
        }
    }

    @Test func encodedUnreservedCharactersAreDecoded() {
        let cases: [(String, String)] = [
            ("/%61pi/a", "/api/a"),
            ("/%61%70%69/a?q=%61", "/api/a?q=%61"),
            ("/a%2Eb", "/a.b"),
            ("/x%7e%7E%2d%5F", "/x~~-_"),
            ("/%41%5a%30%39/%20%41", "/AZ09/%20A"),
            // The sub-delims, `:` and `@`, which a route prefix may hold; `;`, `%`, `?`, `#` and the rest stay encoded.
            ("/v1/users/%40me/x", "/v1/users/@me/x"),
            ("/jobs%3Arun%3a", "/jobs:run:"),
            ("/%21%24%26%27%28%29%2A%2B%2C%3D", "/!$&'()*+,="),
            ("/%40%3B%25%3F%23%7B%22%3C%5B%5D%5E%60%7C%7D%20", "/@%3B%25%3F%23%7B%22%3C%5B%5D%5E%60%7C%7D%20"),
        ]
        for (target, normalized) in cases {
            #expect(RequestTargetCheck.check(target) == .normalized(normalized), "\(target)")
        }
    }

    @Test func refusedTargets() {
        let cases: [(String, String)] = [
            ("/a#b", "fragment"), ("/a?b#c", "fragment"),
            ("/a;b", "path parameters"), ("/open/..;/api", "path parameters"), ("/a/b;jsessionid=1", "path parameters"),
            ("/%zz", "malformed percent-escape"), ("/a%", "malformed percent-escape"), ("/a%4", "malformed percent-escape"),
            ("/a%4?x", "malformed percent-escape"), ("/a%?41", "malformed percent-escape"),
            ("/a%2fb", "encoded '/'"), ("/a%2F", "encoded '/'"), ("/a%5cb", "encoded '/'"),
            ("/a\\b", "backslash"),
            ("/a b", "visible ASCII"), ("/\u{E9}", "visible ASCII"), ("/a\tb", "visible ASCII"), ("/a?x=\u{7F}", "visible ASCII"),
            ("/..", "dot segments"), ("/.", "dot segments"), ("/a/./b", "dot segments"), ("/a/../b", "dot segments"),
            ("//a", "empty segments"), ("/a//b", "empty segments"), ("/a/.?x", "dot segments"),
            ("/%2e%2e/api", "dot segments"), ("/a/%2E", "dot segments"), ("/a/.%2e/b", "dot segments"), ("/%2E/", "dot segments"),
        ]
        for (target, why) in cases {
            guard case .refused(let message) = RequestTargetCheck.check(target) else {
                Issue.record("\(target) was not refused")
                continue
            }
            #expect(message.contains(why), "\(target): \(message)")
        }
    }

    @Test func hostValues() {
        func valid(_ value: String) -> Bool {
            Array(value.utf8).withUnsafeBytes { HostFieldCheck.isValid($0) }
        }
        for good in ["", "localhost", "localhost:8443", "127.0.0.1", "127.0.0.1:0", "[::1]", "[::1]:443", "[2001:db8::1]",
                     "api.example.com:65535", "xn--bcher-kva.example", "a-b_c~d", "host:", "[::1]:"]
        {
            #expect(valid(good), "\(good)")
        }
        for bad in ["a@b", "user:pw@host", "local host", "host/evil", "host:65536", "host:99999", "host:123456", "host:8x",
                    "a\"b", "<x>", ":443", "[::1", "[]", "[::1]x", "[g::1]", "host\\x", "a:1:2", "host?x", "host#x",
                    "a%41b", "x%zz", "a'onmouseover='x", "a,b", "a(b)", "a;b", "a!b", "é.example"]
        {
            #expect(!valid(bad), "\(bad)")
        }
    }

    @Test func theAccessLogPathHasNoQueryAndNoToken() {
        let token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl"
        #expect(AccessLogPath.text(for: "/api/items?access_token=\(token)") == "/api/items")
        #expect(AccessLogPath.text(for: "/api/\(token)") == "/api/[token]")
        #expect(AccessLogPath.text(for: "/v/\(token)/x/\(token)") == "/v/[token]/x/[token]")
        #expect(AccessLogPath.text(for: "/v/x=\(token);y") == "/v/x=[token];y")
        #expect(AccessLogPath.text(for: "/eyJ/eyJa.b/c") == "/eyJ/eyJa.b/c", "one dot, or none, is not a token")
        #expect(AccessLogPath.text(for: "/open;%65\(token.dropFirst())") == AccessLogPath.withheld, "an encoded token")
        #expect(AccessLogPath.text(for: "/x/%2565\(token.dropFirst())") == AccessLogPath.withheld, "a twice-encoded one")
        #expect(AccessLogPath.text(for: "/x/\(token)/%65\(token.dropFirst())") == AccessLogPath.withheld)
        #expect(AccessLogPath.text(for: "/x/%41%zz%") == "/x/%41%zz%", "escapes without a token stay as sent")
        let long = "/" + String(repeating: "a", count: 9000)
        let cut = AccessLogPath.text(for: long)
        #expect(cut.utf8.count == AccessLogPath.maxBytes + "…".utf8.count && cut.hasSuffix("…"))
        let accents = "/" + String(repeating: "é", count: 600)
        #expect(AccessLogPath.text(for: accents).hasSuffix("é…"), "cut on a character boundary")
    }

    @Test func tokensInTheURLAreFound() {
        let token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl"
        #expect(TokenExtractor.pathCarriesToken("/api/\(token)"))
        #expect(TokenExtractor.pathCarriesToken("/api/x=\(token)"))
        #expect(!TokenExtractor.pathCarriesToken("/api/x?t=\(token)"), "the query is another check")
        #expect(TokenExtractor.targetCarriesJWT("/token?return_to=/x?access_token%3D\(token)"))
        #expect(TokenExtractor.targetCarriesJWT("/token?a=%65yJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"), "an escaped token")
        #expect(!TokenExtractor.targetCarriesJWT("/token?app=ios&state=Zm9vYmFy"))
        let extractor = TokenExtractor(sources: [.authorization], realm: "r")
        #expect(extractor.queryCarriesToken("/a?x=1;access_token=\(token)"))
        #expect(extractor.queryCarriesToken("/a?x=Bearer%20\(token)"))
        #expect(!extractor.queryCarriesToken("/a?x=1&y=eyJ.only"))
        #expect(extractor.queryCarriesToken("/a?\(token)"), "a token as a name")
        #expect(extractor.queryCarriesToken("/a?x&\(token)=1"))
        #expect(extractor.queryCarriesToken("/a?x=%65\(token.dropFirst())"), "encoded")
        #expect(TokenExtractor.targetCarriesJWT("/token?x=%2565\(token.dropFirst())"), "encoded twice")
        #expect(TokenExtractor.targetCarriesJWT("/token?%65\(token.dropFirst())"), "an encoded name")
        #expect(TokenExtractor.pathCarriesToken("/api/x=%65\(token.dropFirst())"))
        #expect(!TokenExtractor.targetCarriesJWT("/token?app=ios&state=%41%42%zz"))
    }

    @Test func absoluteFormTargets() {
        #expect(AbsoluteFormTarget.originForm(of: "https://a.example/x?y=1", host: "a.example") == .path("/x?y=1"))
        #expect(AbsoluteFormTarget.originForm(of: "http://A.example:8443", host: "a.EXAMPLE:8443") == .path("/"))
        #expect(AbsoluteFormTarget.originForm(of: "https://a.example?q", host: "a.example") == .path("/?q"))
        #expect(AbsoluteFormTarget.originForm(of: "https://a.example/x", host: "b.example") == .authorityDiffersFromHost)
        #expect(AbsoluteFormTarget.originForm(of: "https://a.example/x", host: nil) == .authorityDiffersFromHost)
        #expect(AbsoluteFormTarget.originForm(of: "https://a.example/x", host: "a.example:443") == .authorityDiffersFromHost)
        for target in ["*", "https:///x", "ftp://a/x", "a.example/x", "https:/a/x", "//a/x"] {
            #expect(AbsoluteFormTarget.originForm(of: target, host: "a") == .notAbsoluteForm, "\(target)")
        }
    }

    /// The decoder the URL token checks look through: a broken escape refuses a value, but is kept as it is
    /// when only looking (so `%zz` in front cannot hide an encoded token).
    @Test func brokenEscapesAreKeptOnlyWhenAsked() {
        for (input, kept) in [("a%zz%41", "a%zzA"), ("%", "%"), ("%4", "%4"), ("%41%", "A%"), ("x%2", "x%2"), ("%%41", "%A")] {
            #expect(PercentEncoding.decodedBytes(Array(input.utf8), plusIsSpace: false) == nil, "\(input)")
            #expect(PercentEncoding.decodedBytes(Array(input.utf8), plusIsSpace: false, keepingBrokenEscapes: true) == Array(kept.utf8), "\(input)")
        }
        #expect(PercentEncoding.decodedBytes(Array("a+%41".utf8), plusIsSpace: true) == Array("a A".utf8))
        let token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl"
        #expect(TokenExtractor.pathCarriesToken("/x%zz/%65\(token.dropFirst())"))
    }

    @Test func aTokenFieldHiddenBehindASemicolon() {
        func hides(_ body: String) -> Bool { FormURLEncoded.hasSemicolonField(named: "access_token", in: Array(body.utf8)) }
        #expect(hides("x=1;access_token=t&access_token=u"))
        #expect(hides("x=1;a=2;access_token"))
        #expect(hides("x=1;%61ccess_token=t"), "the name is decoded as a splitting parser would")
        #expect(!hides("access_token=t;x"), "a ';' inside the token field's own value is the value's")
        #expect(!hides("x=1;y=2&access_token=t"))
        #expect(!hides("x=a;access_tokens=t"))
    }
}

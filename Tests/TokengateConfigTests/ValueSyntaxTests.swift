//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing

@testable import TokengateConfig

@Suite("Value grammars")
struct ValueSyntaxTests {
    @Test(
        "durations",
        arguments: [
            ("500ms", Duration.milliseconds(500)),
            ("2s", .seconds(2)),
            ("5m", .seconds(300)),
            ("14d", .seconds(14 * 86_400)),
            ("1h30m", .seconds(5400)),
            ("1d2h3m4s5ms", .milliseconds(93_784_005)),
            ("0s", .zero),
            ("0ms", .zero),
            ("90s", .seconds(90)),
        ] as [(String, Duration)]
    )
    func validDurations(text: String, expected: Duration) throws {
        #expect(try ValueSyntax.duration(text) == expected)
    }

    @Test(
        "invalid durations",
        arguments: [
            ("", "expected a duration such as 500ms, 2s, 5m, 1h30m or 14d, got an empty value"),
            ("5", "duration 5 needs a unit (ms, s, m, h or d), for example 5s"),
            ("5 s", "unknown duration unit ' s' in 5 s (use ms, s, m, h or d)"),
            ("-5s", "expected a duration such as 500ms, 2s, 5m, 1h30m or 14d, got -5s"),
            ("1.5s", "unknown duration unit '.' in 1.5s (use ms, s, m, h or d)"),
            ("30m1h", "units in duration 30m1h must go from largest to smallest, each once"),
            ("1h1h", "units in duration 1h1h must go from largest to smallest, each once"),
            ("5sec", "unknown duration unit 'sec' in 5sec (use ms, s, m, h or d)"),
            ("ms", "expected a duration such as 500ms, 2s, 5m, 1h30m or 14d, got ms"),
            ("5S", "unknown duration unit 'S' in 5S (use ms, s, m, h or d)"),
            ("999999999999d", "duration 999999999999d is too large"),
            ("1234567890123s", "duration 1234567890123s is too large"),
            ("１s", "expected a duration such as 500ms, 2s, 5m, 1h30m or 14d, got １s"),
        ] as [(String, String)]
    )
    func invalidDurations(text: String, message: String) {
        #expect(throws: ValueSyntaxError(message)) {
            try ValueSyntax.duration(text)
        }
    }

    @Test("durations format back the way they are written")
    func durationFormat() {
        #expect(ValueSyntax.format(.seconds(5400)) == "1h30m")
        #expect(ValueSyntax.format(.milliseconds(500)) == "500ms")
        #expect(ValueSyntax.format(.seconds(14 * 86_400)) == "14d")
        #expect(ValueSyntax.format(.zero) == "0s")
    }

    @Test(
        "sizes",
        arguments: [
            ("8KiB", 8192), ("1MiB", 1_048_576), ("100MB", 100_000_000), ("1024", 1024), ("0", 0), ("5B", 5),
            ("2GiB", 2_147_483_648), ("3KB", 3000), ("1GB", 1_000_000_000),
        ] as [(String, Int)]
    )
    func validSizes(text: String, expected: Int) throws {
        #expect(try ValueSyntax.size(text) == expected)
    }

    @Test(
        "invalid sizes",
        arguments: [
            ("", "expected a size such as 8KiB, 1MiB, 100MB or a number of bytes, got "),
            ("KiB", "expected a size such as 8KiB, 1MiB, 100MB or a number of bytes, got KiB"),
            ("1.5MiB", "unknown size unit '.5MiB' in 1.5MiB (use B, KB, MB, GB, KiB, MiB or GiB)"),
            ("8kib", "unknown size unit 'kib' in 8kib (use B, KB, MB, GB, KiB, MiB or GiB)"),
            ("-1", "expected a size such as 8KiB, 1MiB, 100MB or a number of bytes, got -1"),
            ("8 KiB", "unknown size unit ' KiB' in 8 KiB (use B, KB, MB, GB, KiB, MiB or GiB)"),
            ("9999999999999GiB", "size 9999999999999GiB is too large"),
            ("1234567890123456", "size 1234567890123456 is too large"),
        ] as [(String, String)]
    )
    func invalidSizes(text: String, message: String) {
        #expect(throws: ValueSyntaxError(message)) {
            try ValueSyntax.size(text)
        }
    }

    @Test(
        "socket addresses",
        arguments: [
            ("0.0.0.0:8443", SocketAddressSpec(host: "0.0.0.0", port: 8443)),
            ("[::1]:8443", SocketAddressSpec(host: "::1", port: 8443)),
            ("[::]:0", SocketAddressSpec(host: "::", port: 0)),
            ("localhost:80", SocketAddressSpec(host: "localhost", port: 80)),
            ("Gate.Example.com:65535", SocketAddressSpec(host: "gate.example.com", port: 65535)),
            ("[2001:db8::1]:443", SocketAddressSpec(host: "2001:db8::1", port: 443)),
        ] as [(String, SocketAddressSpec)]
    )
    func validAddresses(text: String, expected: SocketAddressSpec) throws {
        #expect(try ValueSyntax.socketAddress(text) == expected)
    }

    @Test(
        "invalid socket addresses",
        arguments: [
            ("::1:8443", "IPv6 addresses need brackets, as in [::1]:8443"),
            (
                "127.0.0.1",
                "expected host:port or [ipv6]:port, such as 0.0.0.0:8443 or [::1]:8443, got 127.0.0.1 (missing :port)"
            ),
            ("127.0.0.1:65536", "port in 127.0.0.1:65536 must be a number from 0 to 65535"),
            ("127.0.0.1:-1", "port in 127.0.0.1:-1 must be a number from 0 to 65535"),
            ("127.0.0.1:", "port in 127.0.0.1: must be a number from 0 to 65535"),
            (
                "[::1]8443",
                "expected host:port or [ipv6]:port, such as 0.0.0.0:8443 or [::1]:8443, got [::1]8443 (missing :port)"
            ),
            ("[zz]:1", "'zz' is not an IPv6 address"),
            ("[127.0.0.1]:1", "'127.0.0.1' is not an IPv6 address"),
            ("256.0.0.1:80", "'256.0.0.1' is neither an IPv4 address nor a host name"),
            ("010.0.0.1:80", "'010.0.0.1' is neither an IPv4 address nor a host name"),
            ("exa_mple.com:80", "'exa_mple.com' is neither an IPv4 address nor a host name"),
            (":8443", "'' is neither an IPv4 address nor a host name"),
            ("-bad.example:1", "'-bad.example' is neither an IPv4 address nor a host name"),
        ] as [(String, String)]
    )
    func invalidAddresses(text: String, message: String) {
        #expect(throws: ValueSyntaxError(message)) {
            try ValueSyntax.socketAddress(text)
        }
    }

    @Test("loopback, wildcard and conflicts")
    func addressProperties() {
        #expect(SocketAddressSpec(host: "127.0.0.2", port: 1).isLoopback)
        #expect(SocketAddressSpec(host: "::1", port: 1).isLoopback)
        #expect(SocketAddressSpec(host: "localhost", port: 1).isLoopback)
        #expect(!SocketAddressSpec(host: "0.0.0.0", port: 1).isLoopback)
        #expect(!SocketAddressSpec(host: "::", port: 1).isLoopback)
        #expect(!SocketAddressSpec(host: "10.0.0.1", port: 1).isLoopback)
        #expect(!SocketAddressSpec(host: "127.example.com", port: 1).isLoopback)
        let wildcard = SocketAddressSpec(host: "0.0.0.0", port: 8443)
        #expect(wildcard.conflicts(with: SocketAddressSpec(host: "127.0.0.1", port: 8443)))
        #expect(!wildcard.conflicts(with: SocketAddressSpec(host: "127.0.0.1", port: 8444)))
        #expect(!wildcard.conflicts(with: SocketAddressSpec(host: "::1", port: 8443)))
        #expect(
            SocketAddressSpec(host: "::", port: 8443).conflicts(with: SocketAddressSpec(host: "10.0.0.1", port: 8443))
        )
        #expect(
            !SocketAddressSpec(host: "127.0.0.1", port: 0).conflicts(
                with: SocketAddressSpec(host: "127.0.0.1", port: 0)
            )
        )
        #expect(SocketAddressSpec(host: "::1", port: 443).description == "[::1]:443")
    }

    @Test(
        "upstream targets",
        arguments: [
            ("http://127.0.0.1:9000", UpstreamTarget(scheme: .http, host: "127.0.0.1", port: 9000)),
            ("http://127.0.0.1:9000/", UpstreamTarget(scheme: .http, host: "127.0.0.1", port: 9000)),
            ("https://API.internal", UpstreamTarget(scheme: .https, host: "api.internal", port: 443)),
            ("http://backend", UpstreamTarget(scheme: .http, host: "backend", port: 80)),
            ("http://[::1]:9000", UpstreamTarget(scheme: .http, host: "::1", port: 9000)),
        ] as [(String, UpstreamTarget)]
    )
    func validTargets(text: String, expected: UpstreamTarget) throws {
        #expect(try ValueSyntax.upstreamTarget(text) == expected)
    }

    @Test(
        "invalid upstream targets",
        arguments: [
            "ftp://x:1", "http://u:p@h:1", "http://h:1/path", "http://h:0", "http://", "http://h:1?x", "HTTP://h:1",
            "http://h:1#f", "http://[::1:9000", "127.0.0.1:9000", "http://h:99999",
        ]
    )
    func invalidTargets(text: String) {
        #expect(throws: ValueSyntaxError.self) {
            try ValueSyntax.upstreamTarget(text)
        }
    }

    @Test("token sources")
    func tokenSources() throws {
        #expect(try ConfigurationDecoder.tokenSource("authorization") == .authorization)
        #expect(try ConfigurationDecoder.tokenSource("header:X-Token") == .header("X-Token"))
        #expect(try ConfigurationDecoder.tokenSource("cookie:auth_token") == .cookie("auth_token"))
        #expect(try ConfigurationDecoder.tokenSource("form:access_token") == .form("access_token"))
        #expect(try ConfigurationDecoder.tokenSource("json:token") == .json("token"))
        for bad in [
            "Authorization", "bearer", "header:", "header:Authorization", "header:Cookie", "header:Host",
            "header:x-tokengate-user", "cookie:a b", "cookie:a;b", "form:a&b", "form:a=b", "json:\u{1}", "query:t",
        ] {
            #expect(throws: ValueSyntaxError.self, "\(bad)") {
                try ConfigurationDecoder.tokenSource(bad)
            }
        }
    }

    @Test("PostgreSQL URLs")
    func postgresURLs() throws {
        let store = try ConfigurationDecoder.parsePostgresURL("postgresql://gate@db.example.com:6432/cutoffs")
        #expect(store.host == "db.example.com")
        #expect(store.port == 6432)
        #expect(store.user == "gate")
        #expect(store.database == "cutoffs")
        #expect(store.tlsMode == .require)
        #expect(try ConfigurationDecoder.parsePostgresURL("postgres://g@[::1]/d").tlsMode == .disable)
        #expect(
            try ConfigurationDecoder.parsePostgresURL("postgres://g@h/d?sslmode=verify-full").tlsMode == .verifyFull
        )
        for bad in [
            "mysql://g@h/d", "postgres://h/d", "postgres://g@h", "postgres://g@h/", "postgres://g:pw@h/d",
            "postgres://g@h/d?sslmode=allow", "postgres://g@h/d?user=x", "postgres://g@h:0/d",
        ] {
            #expect(throws: ValueSyntaxError.self, "\(bad)") {
                try ConfigurationDecoder.parsePostgresURL(bad)
            }
        }
    }

    @Test("callbacks: custom schemes and https, nothing a browser would run")
    func callbacks() throws {
        try ConfigurationDecoder.checkCallback("myapp://token")
        try ConfigurationDecoder.checkCallback("com.example.app:/oauth")
        try ConfigurationDecoder.checkCallback("https://app.example.com/callback")
        try ConfigurationDecoder.checkCallback("myapp://token?flow=login&v=2")
        for bad in [
            "javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,x", "http://app.example.com/cb",
            "myapp://token#x", "myapp:", "1app://x", "my app://x", "noscheme",
            // Schemes that show or wrap another URL's content (a review found view-source: accepted).
            "view-source:https://app.example.com/cb", "filesystem:https://x/temporary/a", "jar:https://x/a.jar!/",
            // Parameters the page sets itself would be there twice.
            "myapp://token?state=fixed", "myapp://token?v=1&access_token=x", "https://app.example.com/cb?STATE=1",
            "myapp://token?code", "myapp://token?expires_in=1", "myapp://token?st%61te=x", "myapp://token?a%zz=1",
        ] {
            #expect(throws: ValueSyntaxError.self, "\(bad)") {
                try ConfigurationDecoder.checkCallback(bad)
            }
        }
    }

    @Test("host names")
    func hostNames() {
        #expect(ValueSyntax.isHostName("api.example.com"))
        #expect(ValueSyntax.isHostName("localhost"))
        #expect(ValueSyntax.isHostName("a-b.c"))
        #expect(!ValueSyntax.isHostName("a..b"))
        #expect(!ValueSyntax.isHostName("a-.b"))
        #expect(!ValueSyntax.isHostName(String(repeating: "a", count: 64)))
        #expect(!ValueSyntax.isHostName("1.2.3.4"))
        #expect(!ValueSyntax.isHostName("exämple.com"))
    }

    @Test("suggestions for typos")
    func suggestions() {
        #expect(ValueSyntax.suggestion(for: "acept", among: ["accept", "sources"]) == "accept")
        #expect(ValueSyntax.suggestion(for: "path_prefx", among: ["path_prefix", "host"]) == "path_prefix")
        #expect(ValueSyntax.suggestion(for: "Upstream", among: ["upstream"]) == "upstream")
        #expect(ValueSyntax.suggestion(for: "souces", among: ["sources"]) == "sources")
        #expect(ValueSyntax.suggestion(for: "xyz", among: ["accept", "sources"]) == nil)
        #expect(ValueSyntax.editDistance("ab", "ba") == 1)
        #expect(ValueSyntax.editDistance("", "abc") == 3)
        #expect(ValueSyntax.editDistance("kitten", "sitting") == 3)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig

/// Each kind of mistake yields the exact `file:line:column: key.path: message` line.
@Suite("Configuration errors")
struct ConfigurationErrorTests {
    /// `minimalYAML` with line `number` (1-based) replaced by `replacement` (which may hold several lines).
    func replacing(line number: Int, with replacement: String) -> String {
        var lines = minimalYAML.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines[number - 1] = replacement
        return lines.joined(separator: "\n")
    }

    func expectError(
        _ yaml: String,
        _ expected: String,
        code: ConfigurationError.Code? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let error = parseError(yaml)
        #expect(error?.description == expected, sourceLocation: sourceLocation)
        if let code {
            #expect(error?.code == code, sourceLocation: sourceLocation)
        }
    }

    @Test("the minimal configuration parses")
    func minimalParses() throws {
        let config = try parse(minimalYAML)
        #expect(config.routes.map(\.pathPrefix) == ["/api/", "/"])
        #expect(config.routes[0].sources == [.authorization])
        #expect(config.listeners[0].tls?.certificates[0].cert.path.hasSuffix("/cert.pem") == true)
    }

    @Test("the brief's example: a bad accept list")
    func badAccept() {
        self.expectError(
            self.replacing(line: 10, with: "  - { path_prefix: /, upstream: api, accept: [admin] }"),
            "test.yaml:10:46: routes[1].accept: expected [api], [session], [api, session] or none, got [admin]",
            code: .invalidValue
        )
    }

    @Test("accept spelled as a bare word, an empty list or a repeated kind")
    func otherBadAccepts() {
        for (value, shown) in [
            ("api", "api"), ("[]", "[]"), ("[api, api]", "[api, api]"), ("{ api: true }", "a mapping"),
        ] {
            self.expectError(
                self.replacing(line: 10, with: "  - { path_prefix: /, upstream: api, accept: \(value) }"),
                "test.yaml:10:46: routes[1].accept: expected [api], [session], [api, session] or none, got \(shown)"
            )
        }
    }

    @Test("accept in either order")
    func acceptOrder() throws {
        let config = try parse(
            self.replacing(line: 9, with: "  - { path_prefix: /api/, upstream: api, accept: [session, api] }")
        )
        #expect(config.routes[0].accept == .apiAndSession)
    }

    @Test("an unknown key gets a suggestion")
    func unknownKeyWithSuggestion() {
        self.expectError(
            self.replacing(line: 9, with: "  - { path_prefix: /api/, upstream: api, acept: [api] }"),
            "test.yaml:9:42: routes[0].acept: unknown key, did you mean 'accept'?",
            code: .unknownKey
        )
    }

    @Test("an unknown key far from any lists the expected keys")
    func unknownKeyWithoutSuggestion() {
        self.expectError(
            minimalYAML + "frobnicate: 1\n",
            "test.yaml:11:1: frobnicate: unknown key; expected one of: listen, admin, keys, signing_key, tokens, "
                + "cutoffs, upstreams, routes, limits, realm, trusted_proxies, log, http2, hsts, event_loops, issuers, rate_limits",
            code: .unknownKey
        )
    }

    @Test("a route naming an unknown upstream")
    func unknownUpstream() {
        self.expectError(
            self.replacing(line: 9, with: "  - { path_prefix: /api/, upstream: apii, accept: [api] }"),
            "test.yaml:9:37: routes[0].upstream: unknown upstream 'apii', did you mean 'api'?",
            code: .unknownReference
        )
        self.expectError(
            self.replacing(line: 9, with: "  - { path_prefix: /api/, upstream: backend, accept: [api] }"),
            "test.yaml:9:37: routes[0].upstream: unknown upstream 'backend' (defined: api)"
        )
    }

    @Test("a missing required key is reported at its mapping")
    func missingKey() {
        self.expectError(
            self.replacing(line: 9, with: "  - { upstream: api, accept: [api] }"),
            "test.yaml:9:5: routes[0]: missing required key 'path_prefix'",
            code: .missingKey
        )
        self.expectError(
            self.replacing(line: 9, with: "  - { path_prefix: /api/, upstream: api }"),
            "test.yaml:9:5: routes[0]: missing required key 'accept'"
        )
    }

    @Test("two routes with the same host and prefix")
    func duplicateRoute() {
        self.expectError(
            self.replacing(line: 10, with: "  - { path_prefix: /api/, upstream: api, accept: none }"),
            "test.yaml:10:7: routes[1].path_prefix: same host and path_prefix as routes[0]",
            code: .duplicate
        )
        // Same prefix on different hosts is fine.
        #expect(
            parseError(
                self.replacing(
                    line: 10,
                    with: "  - { host: a.example, path_prefix: /api/, upstream: api, accept: none }"
                )
            ) == nil
        )
    }

    @Test("path prefixes must start with / and mean exactly their bytes")
    func badPathPrefix() {
        self.expectError(
            self.replacing(line: 9, with: "  - { path_prefix: api/, upstream: api, accept: [api] }"),
            "test.yaml:9:20: routes[0].path_prefix: must start with /, got api/"
        )
        self.expectError(
            self.replacing(line: 9, with: "  - { path_prefix: /a/../api/, upstream: api, accept: [api] }"),
            "test.yaml:9:20: routes[0].path_prefix: must not contain . or .. segments"
        )
        self.expectError(
            self.replacing(line: 9, with: "  - { path_prefix: /api%2F, upstream: api, accept: [api] }"),
            "test.yaml:9:20: routes[0].path_prefix: must not contain '%': a path prefix holds letters, digits, '/' and - . _ ~ ! $ & ' ( ) * + , = : @"
        )
        // `;` never matches (path parameters are refused) and `{` is left encoded by the gateway: either would
        // make a prefix that some spelling of the path misses.
        for bad in [";", "{", "\"", "[", "|"] {
            self.expectError(
                self.replacing(line: 9, with: "  - { path_prefix: '/api\(bad)x', upstream: api, accept: [api] }"),
                "test.yaml:9:20: routes[0].path_prefix: must not contain '\(bad)': a path prefix holds letters, digits, '/' and - . _ ~ ! $ & ' ( ) * + , = : @"
            )
        }
    }

    @Test("route hosts are names without ports")
    func routeHost() throws {
        self.expectError(
            self.replacing(
                line: 9,
                with: "  - { host: api.example.com:8443, path_prefix: /api/, upstream: api, accept: [api] }"
            ),
            "test.yaml:9:13: routes[0].host: host without a port: routes match the host name whatever the port"
        )
        let config = try parse(
            self.replacing(
                line: 9,
                with: "  - { host: API.Example.COM., path_prefix: /api/, upstream: api, accept: [api] }"
            )
        )
        #expect(config.routes[0].host == "api.example.com")
    }

    @Test("TLS is required")
    func noTLSListener() {
        let yaml = self.replacing(line: 2, with: "  - address: 127.0.0.1:8080\n    plain_http: reject")
            .replacingOccurrences(of: "    tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }\n", with: "")
        self.expectError(
            yaml,
            "test.yaml:2:3: listen: no TLS listener: tokengate only serves over TLS (a plain_http listener only "
                + "rejects or redirects)",
            code: .insecure
        )
    }

    @Test("a listener is tls or plain_http, exactly one")
    func listenerMode() {
        self.expectError(
            self.replacing(line: 3, with: "    port: 1"),
            "test.yaml:3:5: listen[0].port: unknown key; expected one of: address, tls, plain_http, redirect_port, proxy_protocol, ip_rules, forward_auth"
        )
        self.expectError(
            self.replacing(line: 3, with: "    tls: { certificates: [ { cert: c, key: k } ] }\n    plain_http: reject"),
            "test.yaml:4:5: listen[0].plain_http: a listener has one of tls, plain_http and forward_auth, not tls and plain_http",
            code: .conflict
        )
        self.expectError(
            minimalYAML.replacingOccurrences(
                of: "\n    tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }",
                with: ""
            ),
            "test.yaml:2:5: listen[0]: a listener needs tls (tokengate serves over TLS), plain_http: reject|redirect, or forward_auth"
        )
        self.expectError(
            self.replacing(
                line: 3,
                with:
                    "    tls: { certificates: [ { cert: c, key: k } ] }\n"
                    + "  - { address: 127.0.0.1:80, plain_http: rejct }"
            ),
            "test.yaml:4:42: listen[1].plain_http: expected one of reject, redirect, got rejct (did you mean 'reject'?)"
        )
        self.expectError(
            self.replacing(
                line: 3,
                with:
                    "    tls: { certificates: [ { cert: c, key: k } ] }\n"
                    + "  - { address: 127.0.0.1:80, plain_http: reject, redirect_port: 443 }"
            ),
            "test.yaml:4:50: listen[1].redirect_port: only for plain_http: redirect"
        )
    }

    @Test("a redirecting plain listener points at the TLS port by default")
    func redirectPort() throws {
        let config = try parse(
            self.replacing(
                line: 3,
                with:
                    "    tls: { certificates: [ { cert: c, key: k } ] }\n"
                    + "  - { address: 127.0.0.1:80, plain_http: redirect }"
            )
        )
        #expect(config.listeners[1].mode == .plain(.redirect))
        #expect(config.listeners[1].redirectPort == 8443)
    }

    @Test("a TLS listener without certificates")
    func tlsWithoutCertificates() {
        self.expectError(
            self.replacing(line: 3, with: "    tls: { handshake_timeout: 5s }"),
            "test.yaml:3:10: listen[0].tls: a TLS listener needs certificates: [ { cert: FILE, key: FILE } ]",
            code: .missingKey
        )
        self.expectError(
            self.replacing(line: 3, with: "    tls: { certificates: [] }"),
            "test.yaml:3:26: listen[0].tls.certificates: a TLS listener needs at least one certificate"
        )
        self.expectError(
            self.replacing(line: 3, with: "    tls: { certificates: [ { cert: cert.pem } ] }"),
            "test.yaml:3:28: listen[0].tls.certificates[0]: missing required key 'key'"
        )
    }

    @Test("listen[].tls.misdirected_requests: refuse by default, allow, nothing else, and not on admin.tls")
    func misdirectedRequests() throws {
        #expect(try parse(minimalYAML).listeners[0].tls?.misdirectedRequests == .refuse)
        for word in ["refuse", "allow"] {
            let yaml = self.replacing(
                line: 3, with: "    tls: { certificates: [ { cert: cert.pem, key: key.pem } ], misdirected_requests: \(word) }")
            #expect(try parse(yaml).listeners[0].tls?.misdirectedRequests == MisdirectedRequests(rawValue: word))
        }
        self.expectError(
            self.replacing(line: 3, with: "    tls: { certificates: [ { cert: cert.pem, key: key.pem } ], misdirected_requests: deny }"),
            "test.yaml:3:86: listen[0].tls.misdirected_requests: expected one of refuse, allow, got deny",
            code: .invalidValue
        )
        self.expectError(
            self.replacing(line: 3, with: "    tls: { certificates: [ { cert: cert.pem, key: key.pem } ], misdirected_requests: [ allow ] }"),
            "test.yaml:3:86: listen[0].tls.misdirected_requests: expected one of refuse, allow, got a list",
            code: .wrongType
        )
        // The admin listener routes nothing, so the key would do nothing there: refused, not ignored.
        let admin = minimalYAML
            + "admin: { address: 127.0.0.1:9901, tls: { certificates: [ { cert: cert.pem, key: key.pem } ], misdirected_requests: allow } }\n"
        self.expectError(
            admin,
            "test.yaml:11:94: admin.tls.misdirected_requests: unknown key; expected one of: certificates, handshake_timeout, "
                + "min_version"
        )
    }

    @Test("a server_names wildcard over a top-level domain alone")
    func wildcardOverATopLevelDomain() {
        self.expectError(
            self.replacing(line: 3, with: "    tls: { certificates: [ { cert: cert.pem, key: key.pem, server_names: [ \"*.com\" ] } ] }"),
            "test.yaml:3:76: listen[0].tls.certificates[0].server_names[0]: a wildcard needs a domain of two or more "
                + "labels (*.example.com), got *.com",
            code: .invalidValue
        )
    }

    @Test("duplicate listeners, including wildcard overlaps")
    func duplicateListeners() {
        self.expectError(
            self.replacing(
                line: 3,
                with:
                    "    tls: { certificates: [ { cert: c, key: k } ] }\n"
                    + "  - address: 0.0.0.0:8443\n    plain_http: reject"
            ),
            "test.yaml:4:14: listen[1].address: 0.0.0.0:8443 is already used by listen[0]",
            code: .duplicate
        )
        self.expectError(
            minimalYAML + "admin: { address: 127.0.0.1:8443 }\n",
            "test.yaml:11:19: admin.address: 127.0.0.1:8443 is already used by listen[0]"
        )
    }

    @Test("a non-loopback admin listener needs a secret, TLS or not")
    func adminExposure() throws {
        let message =
            "test.yaml:11:19: admin.address: the admin listener on 0.0.0.0:9901 is reachable from other machines: "
            + "it needs secret_file (and tls where the network is not trusted)"
        self.expectError(minimalYAML + "admin: { address: 0.0.0.0:9901 }\n", message, code: .insecure)
        // TLS only encrypts: it does not say who may move cutoffs.
        self.expectError(
            minimalYAML + "admin: { address: 0.0.0.0:9901, tls: { certificates: [ { cert: cert.pem, key: key.pem } ] } }\n",
            message,
            code: .insecure
        )
        let withSecret = try parse(minimalYAML + "admin: { address: 0.0.0.0:9901, secret_file: admin.secret }\n")
        #expect(withSecret.admin?.secretFile?.original == "admin.secret")
        let loopback = try parse(minimalYAML + "admin: { address: '[::1]:9901' }\n")
        #expect(loopback.admin?.address == SocketAddressSpec(host: "::1", port: 9901))
    }

    @Test("durations need units")
    func durationErrors() {
        self.expectError(
            minimalYAML + "tokens: { session_max_age: 14 }\n",
            "test.yaml:11:28: tokens.session_max_age: duration 14 needs a unit (ms, s, m, h or d), for example 14s"
        )
        self.expectError(
            minimalYAML + "tokens: { clock_skew: 1h }\n",
            "test.yaml:11:23: tokens.clock_skew: must be from 0s to 10m, got 1h"
        )
    }

    @Test("sizes need known units")
    func sizeErrors() {
        self.expectError(
            minimalYAML + "limits: { max_body_bytes: 10mb }\n",
            "test.yaml:11:27: limits.max_body_bytes: unknown size unit 'mb' in 10mb "
                + "(use B, KB, MB, GB, KiB, MiB or GiB)"
        )
        self.expectError(
            minimalYAML + "limits: { max_header_bytes: 4KiB, max_uri_bytes: 8KiB }\n",
            "test.yaml:11:50: limits.max_uri_bytes: max_uri_bytes (8192) cannot exceed max_header_bytes (4096): "
                + "the request line is part of the head",
            code: .conflict
        )
        self.expectError(
            minimalYAML + "limits: { max_token_body_bytes: 1MiB, token_body_memory: 512KiB }\n",
            "test.yaml:11:58: limits.token_body_memory: token_body_memory (524288) cannot be less than "
                + "max_token_body_bytes (1048576): no token body could be read whole",
            code: .conflict
        )
        self.expectError(
            minimalYAML + "limits: { request_body_timeout: 0s }\n",
            "test.yaml:11:33: limits.request_body_timeout: must be from 1s to 1h, got 0s"
        )
    }

    @Test("upstream targets are scheme://host:port only")
    func upstreamTargets() {
        self.expectError(
            self.replacing(line: 7, with: "  api: { targets: [ \"http://127.0.0.1:9000/api\" ] }"),
            "test.yaml:7:21: upstreams.api.targets[0]: upstream targets are host:port only (no path, query or "
                + "fragment): the request path is forwarded as is"
        )
        self.expectError(
            self.replacing(line: 7, with: "  api: { targets: [ \"ftp://127.0.0.1:9000\" ] }"),
            "test.yaml:7:21: upstreams.api.targets[0]: expected http://host:port or https://host:port, got "
                + "ftp://127.0.0.1:9000"
        )
        self.expectError(
            self.replacing(line: 7, with: "  api: { targets: [ \"http://a:1\", \"https://b:2\" ] }"),
            "test.yaml:7:35: upstreams.api.targets[1]: all targets of an upstream use the same scheme (http)"
        )
        self.expectError(
            self.replacing(line: 7, with: "  api: { targets: [ \"http://a:1\" ], tls: { verify: false } }"),
            "test.yaml:7:37: upstreams.api.tls: tls settings need https:// targets"
        )
    }

    @Test("keep_alive is true or false, and true unless set")
    func upstreamKeepAlive() throws {
        let byDefault = try parse(minimalYAML)
        #expect(try #require(byDefault.upstreams["api"]).keepAlive)
        for (value, expected) in [("true", true), ("false", false)] {
            let config = try parse(self.replacing(line: 7, with: "  api: { targets: [ \"http://127.0.0.1:9000\" ], keep_alive: \(value) }"))
            #expect(try #require(config.upstreams["api"]).keepAlive == expected)
        }
        self.expectError(
            self.replacing(line: 7, with: "  api: { targets: [ \"http://127.0.0.1:9000\" ], keep_alive: yes }"),
            "test.yaml:7:60: upstreams.api.keep_alive: expected true or false, got yes",
            code: .wrongType
        )
        self.expectError(
            self.replacing(line: 7, with: "  api: { targets: [ \"http://127.0.0.1:9000\" ], keep_alive: 0 }"),
            "test.yaml:7:60: upstreams.api.keep_alive: expected true or false, got 0",
            code: .wrongType
        )
    }

    @Test("https upstreams get verifying TLS by default")
    func httpsUpstreamDefaults() throws {
        let config = try parse(self.replacing(line: 7, with: "  api: { targets: [ \"https://Backend.internal\" ] }"))
        let upstream = try #require(config.upstreams["api"])
        #expect(upstream.targets == [UpstreamTarget(scheme: .https, host: "backend.internal", port: 443)])
        #expect(upstream.tls == UpstreamTLSConfiguration(caFile: nil, verify: true, serverName: nil))
        #expect(upstream.connectTimeout == .seconds(2))
        #expect(upstream.maxConnectionsPerTarget == 512)
    }

    @Test("token sources: grammar, duplicates and public routes")
    func sources() throws {
        self.expectError(
            self.replacing(
                line: 10,
                with: "  - { path_prefix: /, upstream: api, accept: none, sources: [authorization] }"
            ),
            "test.yaml:10:52: routes[1].sources: a route with accept: none takes no token, so it has no sources",
            code: .conflict
        )
        self.expectError(
            self.replacing(
                line: 9,
                with:
                    "  - { path_prefix: /api/, upstream: api, accept: [api], sources: [authorization, authorization] }"
            ),
            "test.yaml:9:82: routes[0].sources[1]: authorization is listed twice",
            code: .duplicate
        )
        self.expectError(
            self.replacing(
                line: 9,
                with: "  - { path_prefix: /api/, upstream: api, accept: [api], sources: [\"query:t\"] }"
            ),
            "test.yaml:9:67: routes[0].sources[0]: expected authorization, header:NAME, cookie:NAME, form:FIELD or "
                + "json:FIELD, got query:t"
        )
        self.expectError(
            self.replacing(
                line: 9,
                with: "  - { path_prefix: /api/, upstream: api, accept: [api], sources: [\"header:X Token\"] }"
            ),
            "test.yaml:9:67: routes[0].sources[0]: 'X Token' is not a valid header name"
        )
        self.expectError(
            self.replacing(
                line: 9,
                with: "  - { path_prefix: /api/, upstream: api, accept: [api], sources: [\"header:X-Tokengate-User\"] }"
            ),
            "test.yaml:9:67: routes[0].sources[0]: header X-Tokengate-User cannot carry a token (the gateway owns or "
                + "needs it)"
        )
        let config = try parse(
            self.replacing(
                line: 9,
                with: "  - { path_prefix: /api/, upstream: api, accept: [api], sources: [\"header:X-Api-Token\", "
                    + "\"cookie:auth_token\", \"form:access_token\", \"json:token\"], forward_token: keep }"
            )
        )
        #expect(
            config.routes[0].sources == [
                .header("X-Api-Token"), .cookie("auth_token"), .form("access_token"), .json("token"),
            ]
        )
        #expect(config.routes[0].forwardToken == .keep)
        // `keep` for a header the gateway removes before forwarding would forward nothing (a review found it
        // accepted); `strip` reads it and removes it, which works.
        for header in ["X-Real-IP", "X_Token", "Expect", "Proxy-Authorization"] {
            self.expectError(
                self.replacing(
                    line: 9,
                    with: "  - { path_prefix: /api/, upstream: api, accept: [api], sources: [\"header:\(header)\"], "
                        + "forward_token: keep }"
                ),
                "test.yaml:9:\(79 + header.count): routes[0].forward_token: keep cannot forward the token of header:\(header): the "
                    + "gateway removes that header before forwarding on every route; carry the token in another header, "
                    + "or strip it",
                code: .conflict
            )
        }
        _ = try parse(
            self.replacing(
                line: 9, with: "  - { path_prefix: /api/, upstream: api, accept: [api], sources: [\"header:X-Real-IP\"] }")
        )
    }

    @Test("the cutoff store is exactly one of file, sqlite or postgres")
    func cutoffStores() throws {
        self.expectError(
            self.replacing(line: 5, with: "cutoffs: { sqlite: cutoffs.db, file: cutoffs.json }"),
            "test.yaml:5:32: cutoffs.file: cutoffs has exactly one store: file, sqlite or postgres",
            code: .conflict
        )
        self.expectError(
            self.replacing(line: 5, with: "cutoffs: { sqlite: cutoffs.db, table: t }"),
            "test.yaml:5:32: cutoffs.table: only for the postgres store"
        )
        self.expectError(
            self.replacing(line: 5, with: "cutoffs: {}"),
            "test.yaml:5:10: cutoffs: cutoffs needs exactly one store: file, sqlite or postgres"
        )
        let config = try parse(
            self.replacing(
                line: 5,
                with: "cutoffs: { postgres: \"postgres://gate@127.0.0.1/cutoffs\", rp_table: { table: app.users, "
                    + "user_column: id, password_changed_column: pw_changed_at } }"
            )
        )
        guard case .postgres(let store) = config.cutoffs else {
            Issue.record("expected postgres")
            return
        }
        #expect(store.port == 5432)
        #expect(store.tlsMode == .disable)
        #expect(store.table == "tokengate_cutoffs")
        #expect(store.resyncInterval == .seconds(60))
        #expect(store.staleAfter == .seconds(300))
        #expect(store.rpTable?.apiDisabledColumn == nil)
        #expect(store.rpTable?.changeColumn == nil)
        let withFeed = try parse(
            self.replacing(
                line: 5,
                with: "cutoffs: { postgres: \"postgres://gate@127.0.0.1/cutoffs\", rp_table: { table: app.users, "
                    + "user_column: id, password_changed_column: pw_changed_at, change_column: tokengate_change } }"
            )
        )
        guard case .postgres(let fed) = withFeed.cutoffs else {
            Issue.record("expected postgres")
            return
        }
        #expect(fed.rpTable?.changeColumn == "tokengate_change")
        let badName = parseError(
            self.replacing(
                line: 5,
                with: "cutoffs: { postgres: \"postgres://gate@127.0.0.1/cutoffs\", rp_table: { table: app.users, "
                    + "user_column: id, password_changed_column: pw, change_column: \"a;b\" } }"
            )
        )
        #expect(badName?.description.contains("cutoffs.rp_table.change_column: expected an SQL name") == true, "\(String(describing: badName))")
    }

    @Test("a password in the PostgreSQL URL is refused and never echoed")
    func postgresPassword() {
        let error = parseError(
            self.replacing(line: 5, with: "cutoffs: { postgres: \"postgres://gate:hunter2@db.example.com/cutoffs\" }")
        )
        #expect(
            error?.description
                == "test.yaml:5:22: cutoffs.postgres: the URL must not contain a password (it would end up in logs "
                + "and process lists): use password_file"
        )
        #expect(error?.description.contains("hunter2") == false)
    }

    @Test("values that may be secrets are not echoed")
    func secretsNotEchoed() {
        let pasted = parseError(self.replacing(line: 4, with: "keys: [ { hmac_env: \"c2VjcmV0+/=\", alg: HS256 } ]"))
        #expect(
            pasted?.description
                == "test.yaml:4:21: keys[0].hmac_env: expected the name of an environment variable (letters, digits, "
                + "_), not its value"
        )
        let credentials = parseError(self.replacing(line: 7, with: "  api: { targets: [ \"ftp://u:pw@h:1\" ] }"))
        #expect(
            credentials?.description
                == "test.yaml:7:21: upstreams.api.targets[0]: expected http://host:port or https://host:port, got a "
                + "URL with credentials"
        )
    }

    @Test("SQL names are identifiers, so the store can never be injected into")
    func sqlIdentifiers() {
        self.expectError(
            self.replacing(
                line: 5,
                with: "cutoffs: { postgres: \"postgres://g@h/d\", table: \"cutoffs; DROP TABLE users\" }"
            ),
            "test.yaml:5:49: cutoffs.table: expected an SQL name such as users or app.users (letters, digits, _), "
                + "got cutoffs; DROP TABLE users"
        )
    }

    @Test("keys: exactly one source and an algorithm bound to it")
    func keys() {
        self.expectError(
            self.replacing(line: 4, with: "keys: [ { pem: key.pem } ]"),
            "test.yaml:4:9: keys[0]: a pem key needs alg (the algorithm is bound to the key)",
            code: .missingKey
        )
        self.expectError(
            self.replacing(line: 4, with: "keys: [ { hmac_env: SECRET, alg: RS256 } ]"),
            "test.yaml:4:29: keys[0].alg: an hmac key needs alg: HS256, HS384 or HS512"
        )
        self.expectError(
            self.replacing(line: 4, with: "keys: [ { jwks: a.jwks, pem: b.pem } ]"),
            "test.yaml:4:25: keys[0].pem: a key has exactly one of jwks, pem, hmac_file or hmac_env (one entry per key)"
        )
        self.expectError(
            self.replacing(line: 4, with: "keys: [ { jwks: a.jwks }, { pem: b.pem, alg: ES256 } ]"),
            "test.yaml:4:27: keys[1]: with several keys, each pem or hmac key needs a kid"
        )
        self.expectError(
            self.replacing(
                line: 4,
                with: "keys: [ { pem: a.pem, alg: ES256, kid: k }, { pem: b.pem, alg: ES256, kid: k } ]"
            ),
            "test.yaml:4:71: keys[1].kid: kid k is already used by keys[0]"
        )
        self.expectError(
            self.replacing(line: 4, with: "keys: [ { pem: a.pem, alg: none } ]"),
            "test.yaml:4:28: keys[0].alg: expected one of HS256, HS384, HS512, EdDSA, ES256, RS256, PS256, got none"
        )
        self.expectError(
            self.replacing(line: 4, with: "keys: [ { pem: a.pem, alg: RS256 } ]") + "tokens: { algorithms: [EdDSA] }\n",
            "test.yaml:4:28: keys[0].alg: RS256 is not in tokens.algorithms (EdDSA)"
        )
    }

    @Test("routes that accept tokens need keys")
    func routesNeedKeys() {
        self.expectError(
            self.replacing(line: 4, with: "keys: []"),
            "test.yaml:9:50: routes[0].accept: this route accepts tokens but no keys are configured"
        )
    }

    @Test("token pages need a signing key and a login mode")
    func tokenPage() throws {
        let page = "  - { path_prefix: /token, kind: token_page, login: { session_cookie: s, login_url: /login } }"
        self.expectError(
            self.replacing(line: 10, with: page),
            "test.yaml:10:28: routes[1].kind: a token_page route needs signing_key to mint tokens"
        )
        let signed = minimalYAML + "signing_key: { jwks: private.jwks }\n"
        let withPage = signed.replacingOccurrences(
            of: "  - { path_prefix: /, upstream: api, accept: none }",
            with: page
        )
        let config = try parse(withPage)
        guard case .tokenPage(let settings) = config.routes[1].kind else {
            Issue.record("expected a token page")
            return
        }
        #expect(settings == TokenPageConfiguration(login: .sessionCookie("s"), loginURL: "/login"))
        self.expectError(
            withPage.replacingOccurrences(of: "login_url: /login", with: "login_url: //evil.example"),
            "test.yaml:10:85: routes[1].login.login_url: expected a path on this site (/login) or an https:// URL"
        )
        self.expectError(
            withPage.replacingOccurrences(of: "kind: token_page,", with: "kind: token_page, upstream: api,"),
            "test.yaml:10:46: routes[1].upstream: not used by kind: token_page (it never forwards)"
        )
        self.expectError(
            withPage.replacingOccurrences(of: "kind: token_page,", with: "kind: tokenpage,"),
            "test.yaml:10:34: routes[1].kind: expected proxy or token_page, got tokenpage (did you mean 'token_page'?)"
        )
        self.expectError(
            withPage.replacingOccurrences(
                of: "login_url: /login }",
                with: "login_url: /login }, apps: [ { name: evil, callback: \"javascript:alert(1)\" } ]"
            ),
            "test.yaml:10:127: routes[1].apps[0].callback: callback scheme javascript is not allowed (use a custom "
                + "scheme or https)"
        )
        // The api token must not be delivered in the login's own cookie (a review found it accepted).
        self.expectError(
            withPage.replacingOccurrences(of: "login_url: /login }", with: "login_url: /login }, cookie_name: s"),
            "test.yaml:10:108: routes[1].cookie_name: 's' is login.session_cookie too: the api token would overwrite "
                + "the browser's login; choose another cookie_name (the default is auth_token)"
        )
        // Also when the login cookie is the default delivery cookie and cookie_name is left out.
        self.expectError(
            withPage.replacingOccurrences(of: "session_cookie: s,", with: "session_cookie: auth_token,"),
            "test.yaml:10:71: routes[1].login.session_cookie: 'auth_token' is also the cookie the token is delivered "
                + "in (cookie_name, default auth_token): the api token would overwrite the browser's login; set another "
                + "cookie_name"
        )
        let whoami = try parse(
            withPage.replacingOccurrences(
                of: "session_cookie: s",
                with: "whoami: { url: \"http://127.0.0.1:9000/whoami\", user_header: X-User }"
            ).replacingOccurrences(
                of: "login_url: /login }",
                with: "login_url: /login }, apps: [ { name: ios, callback: \"myapp://token\" } ]"
            )
        )
        guard case .tokenPage(let whoamiPage) = whoami.routes[1].kind else {
            Issue.record("expected a token page")
            return
        }
        #expect(
            whoamiPage.login == .whoami(WhoamiConfiguration(url: "http://127.0.0.1:9000/whoami", userHeader: "X-User"))
        )
        #expect(whoamiPage.apps == [TokenPageApp(name: "ios", callback: "myapp://token")])
    }

    @Test("connected_apps: a path under the token page's prefix, over a store that keeps devices")
    func connectedApps() throws {
        let page = "  - { path_prefix: /token, kind: token_page, login: { session_cookie: s, login_url: /login }, connected_apps: PATH }"
        let signed = minimalYAML + "signing_key: { jwks: private.jwks }\n"
        func yaml(_ path: String) -> String {
            signed.replacingOccurrences(
                of: "  - { path_prefix: /, upstream: api, accept: none }", with: page.replacingOccurrences(of: "PATH", with: path))
        }
        guard case .tokenPage(let settings) = try parse(yaml("/token/apps")).routes[1].kind else {
            Issue.record("expected a token page")
            return
        }
        #expect(settings.connectedAppsPath == "/token/apps")
        #expect(parseError(yaml("/apps"))?.description.contains("must be a path under the route's path_prefix /token") == true)
        #expect(parseError(yaml("/token"))?.description.contains("must be a path under") == true)
        #expect(parseError(yaml("\"/token/apps?x=1\""))?.description.contains("no spaces, ?, #, % or ;") == true)
        #expect(parseError(yaml("/token/%61pps"))?.description.contains("no spaces, ?, #, % or ;") == true)
        #expect(parseError(yaml("/token/../admin"))?.description.contains(". or .. segments") == true)
        let file = yaml("/token/apps").replacingOccurrences(of: "cutoffs: { sqlite: cutoffs.db }", with: "cutoffs: { file: cutoffs.json }")
        #expect(parseError(file)?.description.contains("needs a sqlite or postgres cutoff store") == true)
        let proxy = minimalYAML.replacingOccurrences(
            of: "accept: [api] }", with: "accept: [api], connected_apps: /api/apps }")
        #expect(parseError(proxy)?.description.contains("only for kind: token_page") == true)
    }

    @Test("mint: a flask, rails or cookie_session issuer with an api-only field, and no app with refresh tokens")
    func mintInTheSiteFormat() throws {
        let page = "  - { path_prefix: /token, kind: token_page, login: { session_cookie: s, login_url: /login }, mint: site APPS}"
        func yaml(_ issuer: String, apps: String = "") -> String {
            (minimalYAML + "signing_key: { jwks: private.jwks }\nissuers:\n  - { name: site, kind: session_cookie, secret_env: SITE_SECRET, \(issuer) }\n")
                .replacingOccurrences(
                    of: "  - { path_prefix: /, upstream: api, accept: none }", with: page.replacingOccurrences(of: "APPS", with: apps))
        }
        let flask = "format: flask, fields: { user_id: /_user_id, login_time: /login_at, api_only: /api_only }"
        guard case .tokenPage(let settings) = try parse(yaml(flask)).routes[1].kind else {
            Issue.record("expected a token page")
            return
        }
        #expect(settings.mintIssuer == "site")
        #expect(parseError(yaml(flask).replacingOccurrences(of: "mint: site", with: "mint: other"))?.description
            .contains("'other' is not an issuers: item of kind session_cookie") == true)
        #expect(parseError(yaml("format: flask, fields: { user_id: /_user_id, login_time: /login_at }"))?.description
            .contains("needs fields.api_only") == true)
        #expect(parseError(yaml("format: django, fields: { user_id: /_auth_user_id, login_time: /login_at, api_only: /api }"))?
            .description.contains("needs the user's session auth hash") == true)
        for format in ["cookie_session", "rails, version: \"7.1\""] {
            let issuer = "format: \(format), cookie: c, fields: { user_id: /u, login_time: /t, api_only: /a }"
            guard case .tokenPage(let page) = try parse(yaml(issuer)).routes[1].kind else {
                Issue.record("expected a token page for \(format)")
                continue
            }
            #expect(page.mintIssuer == "site")
        }
        let refresh = ", apps: [ { name: ios, callback: \"myapp://t\", pkce: required, refresh_tokens: {} } ] "
        #expect(parseError(yaml(flask, apps: refresh))?.description.contains("refresh_tokens") == true)

        // Django: the session auth hash from the whoami answer, the backend as a constant, both required.
        let whoami = "login: { whoami: { url: \"http://127.0.0.1:8000/whoami\", user_header: X-User-Id }, login_url: /login }"
        func django(_ extra: String, login: String? = nil) -> String {
            yaml("format: django, fields: { user_id: /_auth_user_id, login_time: /login_at, api_only: /api }")
                .replacingOccurrences(of: "login: { session_cookie: s, login_url: /login }", with: login ?? whoami)
                .replacingOccurrences(of: "mint: site", with: "mint: site" + extra)
        }
        let both = ", mint_whoami: { /_auth_user_hash: X-Session-Auth-Hash }, mint_set: { /_auth_user_backend: b.M }"
        guard case .tokenPage(let page) = try parse(django(both)).routes[1].kind else {
            Issue.record("expected a token page")
            return
        }
        #expect(page.mintWhoamiHeaders == [.init(pointer: "/_auth_user_hash", value: "x-session-auth-hash")])
        #expect(page.mintConstants == [.init(pointer: "/_auth_user_backend", value: "b.M")])
        #expect(parseError(django(", mint_set: { /_auth_user_backend: b.M }"))?.description.contains("mint_whoami") == true)
        #expect(parseError(django(", mint_whoami: { /_auth_user_hash: X-H }"))?.description.contains("mint_set") == true)
        #expect(parseError(django(both, login: "login: { session_cookie: s, login_url: /login }"))?.description
            .contains("needs login.whoami") == true)
        #expect(parseError(django(", mint_whoami: { _auth_user_hash: X-H }, mint_set: { /b: c }"))?.description
            .contains("JSON pointer") == true)
        #expect(parseError(django(", mint_whoami: { /_auth_user_hash: \"X H\" }, mint_set: { /b: c }"))?.description
            .contains("not a header name") == true)
        #expect(parseError(yaml(flask).replacingOccurrences(of: "mint: site", with: "mint_set: { /a: b }"))?.description
            .contains("is for a token page with mint") == true)
    }

    /// The minimal configuration with a token page (route 1) whose `apps` list is `list`.
    private func tokenPageApps(_ list: String) -> String {
        let page = "  - { path_prefix: /token, kind: token_page, login: { session_cookie: s, login_url: /login } }"
        let withPage = (minimalYAML + "signing_key: { jwks: private.jwks }\n").replacingOccurrences(
            of: "  - { path_prefix: /, upstream: api, accept: none }",
            with: page
        )
        return withPage.replacingOccurrences(of: "login_url: /login }", with: "login_url: /login }, apps: [ \(list) ]")
    }

    @Test("an app's pkce is optional (the default) or required; anything else is refused at load, naming the key")
    func tokenPagePKCE() throws {
        let parsed = try parse(
            self.tokenPageApps(
                "{ name: ios, callback: \"myapp://token\" }, { name: android, callback: \"myapp://a\", pkce: required }, "
                    + "{ name: old, callback: \"myapp://o\", pkce: optional }"
            )
        )
        guard case .tokenPage(let settings) = parsed.routes[1].kind else {
            Issue.record("expected a token page")
            return
        }
        #expect(settings.apps.map(\.pkce) == [.optional, .required, .optional])
        self.expectError(
            self.tokenPageApps("{ name: ios, callback: \"myapp://token\", pkce: plain }"),
            "test.yaml:10:149: routes[1].apps[0].pkce: pkce is optional or required, got 'plain'"
        )
        self.expectError(
            self.tokenPageApps("{ name: ios, callback: \"myapp://token\", pkce: Required }"),
            "test.yaml:10:149: routes[1].apps[0].pkce: pkce is optional or required, got 'Required'"
        )
    }

    @Test("refresh_tokens: opt-in per app, with the code flow only, lifetimes within bounds")
    func tokenPageRefreshTokens() throws {
        let parsed = try parse(
            self.tokenPageApps(
                "{ name: old, callback: \"myapp://old\", pkce: required }, "
                    + "{ name: new, callback: \"myapp://new\", pkce: required, refresh_tokens: {} }, "
                    + "{ name: short, callback: \"myapp://s\", pkce: required, "
                    + "refresh_tokens: { access_token_lifetime: 2m, refresh_token_lifetime: 7d } }"
            )
        )
        guard case .tokenPage(let settings) = parsed.routes[1].kind else {
            Issue.record("expected a token page")
            return
        }
        #expect(settings.apps[0].refreshTokens == nil, "apps already shipped get what they got")
        #expect(settings.apps[1].refreshTokens == TokenPageRefreshTokens())
        #expect(settings.apps[1].refreshTokens?.accessTokenLifetime == .seconds(600))
        #expect(settings.apps[2].refreshTokens == TokenPageRefreshTokens(accessTokenLifetime: .seconds(120), refreshTokenLifetime: .seconds(7 * 86_400)))
        for (app, message) in [
            ("{ name: ios, callback: \"myapp://token\", refresh_tokens: {} }", "refresh_tokens needs pkce: required (the code flow)"),
            ("{ name: ios, callback: \"myapp://token\", pkce: required, refresh_tokens: { access_token_lifetime: 2d } }", "must be from 1m to 1d, got 2d"),
            ("{ name: ios, callback: \"myapp://token\", pkce: required, refresh_tokens: { lifetime: 2m } }", "unknown key"),
        ] {
            let problem = try #require(parseError(self.tokenPageApps(app))?.description)
            #expect(problem.contains("refresh_tokens") && problem.contains(message), "\(problem)")
        }
    }

    @Test("an app's confirm defaults to on for a custom scheme and off for https; it must be a boolean")
    func tokenPageConfirm() throws {
        let parsed = try parse(
            self.tokenPageApps(
                "{ name: ios, callback: \"myapp://token\" }, { name: web, callback: \"https://app.example.com/cb\" }, "
                    + "{ name: mdm, callback: \"myapp://m\", confirm: false }, "
                    + "{ name: asked, callback: \"https://app.example.com/cb\", confirm: true, display_name: \"Example <Web>\" }"
            )
        )
        guard case .tokenPage(let settings) = parsed.routes[1].kind else {
            Issue.record("expected a token page")
            return
        }
        #expect(settings.apps.map(\.confirm) == [true, false, false, true])
        #expect(settings.apps.map(\.hasCustomScheme) == [true, false, true, false])
        #expect(settings.apps.map(\.displayName) == [nil, nil, nil, "Example <Web>"])
        self.expectError(
            self.tokenPageApps("{ name: ios, callback: \"myapp://token\", confirm: yes }"),
            "test.yaml:10:152: routes[1].apps[0].confirm: expected true or false, got yes",
            code: .wrongType
        )
        self.expectError(
            self.tokenPageApps("{ name: ios, callback: \"myapp://token\", confirm: [true] }"),
            "test.yaml:10:152: routes[1].apps[0].confirm: expected true or false, got a list",
            code: .wrongType
        )
        self.expectError(
            self.tokenPageApps("{ name: ios, callback: \"myapp://token\", display_name: \" Example\" }"),
            "test.yaml:10:157: routes[1].apps[0].display_name: display_name must be one line of text without spaces at its ends"
        )
        // One line: no line or paragraph separator (U+2028, U+2029; control characters the YAML reader refuses).
        for separator in ["\\u2028", "\\u2029", "\\u0085"] {
            self.expectError(
                self.tokenPageApps("{ name: ios, callback: \"myapp://token\", display_name: \"Exa\(separator)mple\" }"),
                "test.yaml:10:157: routes[1].apps[0].display_name: display_name must be one line of text without spaces at its ends"
            )
        }
        // Bidirectional controls, which reorder what the user reads.
        for (escape, shown) in [
            ("\\u200E", "200E"), ("\\u200F", "200F"), ("\\u202A", "202A"), ("\\u202B", "202B"), ("\\u202C", "202C"),
            ("\\u202D", "202D"), ("\\u202E", "202E"), ("\\u2066", "2066"), ("\\u2067", "2067"), ("\\u2068", "2068"),
            ("\\u2069", "2069"),
        ] {
            self.expectError(
                self.tokenPageApps("{ name: ios, callback: \"myapp://token\", display_name: \"Example\(escape) for iOS\" }"),
                "test.yaml:10:157: routes[1].apps[0].display_name: display_name must not hold bidirectional controls (it holds U+\(shown))"
            )
        }
        self.expectError(
            self.tokenPageApps("{ name: ios, callback: \"myapp://token\", confirmation: false }"),
            "test.yaml:10:143: routes[1].apps[0].confirmation: unknown key; expected one of: name, callback, pkce, "
                + "confirm, display_name, refresh_tokens"
        )
    }

    @Test("YAML-level problems: syntax, duplicate keys, wrong types, emptiness")
    func yamlProblems() {
        let syntax = parseError("listen: [\n")
        #expect(syntax?.code == .syntax)
        #expect(syntax?.file == "test.yaml")
        #expect(syntax?.line == 2)
        self.expectError(
            self.replacing(line: 5, with: "cutoffs: { sqlite: a.db, sqlite: b.db }"),
            "test.yaml:5:12: duplicate key 'sqlite' in a mapping",
            code: .duplicate
        )
        self.expectError("listen: 8443\n", "test.yaml:1:9: listen: expected a list, got a scalar", code: .wrongType)
        self.expectError("- a\n- b\n", "test.yaml:1:1: expected a mapping, got a list")
        self.expectError("   \n\n", "test.yaml: the configuration is empty", code: .empty)
        self.expectError("# only a comment\n", "test.yaml: the configuration is empty", code: .empty)
        self.expectError(
            minimalYAML + "log: { access_log: yes }\n",
            "test.yaml:11:20: log.access_log: expected true or false, got yes"
        )
        self.expectError(
            minimalYAML + "log: { format: consol }\n",
            "test.yaml:11:16: log.format: expected one of json, console, auto, got consol (did you mean 'console'?)"
        )
        self.expectError(
            minimalYAML + "realm: 'a \"quoted\" realm'\n",
            "test.yaml:11:8: realm: the realm must be printable ASCII without \" or \\"
        )
        self.expectError(
            minimalYAML + "trusted_proxies: [ 10.0.0.1/8 ]\n",
            "test.yaml:11:20: trusted_proxies[0]: expected an IP address or a network such as 10.0.0.0/8 (host bits "
                + "zero), got 10.0.0.1/8"
        )
        self.expectError(
            minimalYAML + "hsts: { preload: true }\n",
            "test.yaml:11:9: hsts.preload: preload requires include_subdomains: true and max_age of at least 365d"
        )
    }

    @Test("the description omits what is unknown")
    func descriptionShapes() {
        #expect(
            ConfigurationError(code: .io, file: "x.yaml", message: "cannot open the configuration: no such file")
                .description == "x.yaml: cannot open the configuration: no such file"
        )
        #expect(
            ConfigurationError(code: .syntax, file: "x.yaml", line: 3, message: "bad").description == "x.yaml:3: bad"
        )
        #expect(
            ConfigurationError(code: .invalidValue, file: "x.yaml", line: 3, column: 4, keyPath: "a.b", message: "bad")
                .description == "x.yaml:3:4: a.b: bad"
        )
    }
}

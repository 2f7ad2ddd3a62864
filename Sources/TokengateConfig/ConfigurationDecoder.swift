//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Turns the YAML tree into a ``GatewayConfiguration``, section by section, then checks what spans sections.
///
/// Sections are decoded in dependency order (tokens before keys, upstreams before routes) so each check can
/// point at the node that is wrong, rather than at the thing it refers to.
struct ConfigurationDecoder {
    static let topLevelKeys = [
        "listen", "admin", "keys", "signing_key", "tokens", "cutoffs", "upstreams", "routes", "limits", "realm",
        "trusted_proxies", "log", "http2", "hsts", "event_loops", "issuers", "rate_limits",
    ]

    /// The first problem, as ``decode(_:problems:)`` finds them: what `serve`, a reload and the tests are told.
    func decode(_ root: ConfigNode) throws(ConfigurationError) -> GatewayConfiguration {
        var problems: [ConfigurationError] = []
        let configuration = self.decode(root, problems: &problems)
        if let first = problems.first {
            throw first
        }
        guard let configuration else {
            preconditionFailure("a configuration that failed to decode reported no problem")
        }
        return configuration
    }

    /// Decodes every part that does not depend on another, and appends one problem per part that fails (the
    /// part's first: within a section, a later check often only repeats an earlier one), so that `check-config`
    /// shows every mistake of a file in one run. Returns the configuration only when there was no problem.
    ///
    /// Independent parts: each top-level section, each unknown top-level key, each route and each upstream. A part
    /// that depends on a section that failed is skipped, not reported against a stand-in, so no problem is ever a
    /// consequence of another: keys, signing_key and routes need tokens; routes take a failed upstream's name as
    /// defined and assume keys and a signing key when those sections failed. The first problem is the one
    /// ``decode(_:)`` throws, the same one that stopping at the first error would give.
    func decode(_ root: ConfigNode, problems: inout [ConfigurationError]) -> GatewayConfiguration? {
        let problemsBefore = problems.count
        let top: ConfigMapping
        do {
            top = try root.anyMapping()
        } catch {
            problems.append(error)
            return nil
        }
        problems += top.unknownKeys(allowed: Self.topLevelKeys)
        let tokens = Self.part(&problems) { () throws(ConfigurationError) in
            try top["tokens"].map { node throws(ConfigurationError) in try self.tokens(node) } ?? TokenSettings()
        }
        let listeners = Self.part(&problems) { () throws(ConfigurationError) in
            try self.listeners(try top.required("listen"))
        }
        let admin = Self.part(&problems) { () throws(ConfigurationError) in
            try top["admin"].map { node throws(ConfigurationError) in
                try self.admin(node, listeners: listeners ?? [])
            }
        }
        let keys = tokens.flatMap { tokens in
            Self.part(&problems) { () throws(ConfigurationError) in
                try top["keys"].map { node throws(ConfigurationError) in try self.keys(node, tokens: tokens) } ?? []
            }
        }
        let signingKey = tokens.flatMap { tokens in
            Self.part(&problems) { () throws(ConfigurationError) in
                try top["signing_key"].map { node throws(ConfigurationError) in
                    try self.signingKey(node, tokens: tokens)
                }
            }
        }
        let cutoffs = Self.part(&problems) { () throws(ConfigurationError) in
            try self.cutoffs(try top.required("cutoffs"))
        }
        // Each upstream and each route is a part of its own: their problems are appended after their section's.
        var upstreamProblems: [ConfigurationError] = []
        var invalidUpstreams: Set<String> = []
        let upstreams = Self.part(&problems) { () throws(ConfigurationError) in
            try top["upstreams"].map { node throws(ConfigurationError) in
                try self.upstreams(node, problems: &upstreamProblems, invalid: &invalidUpstreams)
            } ?? [:]
        }
        problems += upstreamProblems
        let limits = Self.part(&problems) { () throws(ConfigurationError) in
            try top["limits"].map { node throws(ConfigurationError) in try self.limits(node) } ?? LimitsConfiguration()
        }
        let issuers = Self.part(&problems) { () throws(ConfigurationError) in
            try top["issuers"].map { node throws(ConfigurationError) in try self.issuers(node) } ?? IssuerSection()
        }
        if let issuers {
            problems += self.jwtIssuerProblems(issuers, topLevel: tokens, topLevelKeys: keys.map { !$0.isEmpty })
        }
        var routeProblems: [ConfigurationError] = []
        let routes = tokens.flatMap { tokens in
            Self.part(&problems) { () throws(ConfigurationError) in
                try self.routes(
                    try top.required("routes"),
                    environment: RouteEnvironment(
                        tokens: tokens,
                        upstreams: upstreams ?? [:],
                        invalidUpstreams: invalidUpstreams,
                        upstreamsFailed: upstreams == nil,
                        hasKeys: keys.map { !$0.isEmpty } ?? true,
                        hasSigningKey: signingKey.map { $0 != nil } ?? true,
                        sessionCookieIssuers: issuers?.sessionCookie,
                        jwtIssuers: issuers?.jwt,
                        keepsDevices: cutoffs.map { store in
                            if case .file = store { return false }
                            return true
                        } ?? true
                    ),
                    problems: &routeProblems
                )
            }
        }
        problems += routeProblems
        let realm = Self.part(&problems) { () throws(ConfigurationError) in
            try top["realm"].map { node throws(ConfigurationError) in try self.realm(node) } ?? "tokengate"
        }
        let trustedProxies = Self.part(&problems) { () throws(ConfigurationError) in
            try top["trusted_proxies"].map { node throws(ConfigurationError) in try self.trustedProxies(node) } ?? []
        }
        let log = Self.part(&problems) { () throws(ConfigurationError) in
            try top["log"].map { node throws(ConfigurationError) in try self.log(node) } ?? LogConfiguration()
        }
        let http2 = Self.part(&problems) { () throws(ConfigurationError) in
            try top["http2"].map { node throws(ConfigurationError) in try self.http2(node) } ?? HTTP2Configuration()
        }
        let hsts = Self.part(&problems) { () throws(ConfigurationError) in
            try top["hsts"].map { node throws(ConfigurationError) in try self.hsts(node) } ?? HSTSConfiguration()
        }
        let eventLoops = Self.part(&problems) { () throws(ConfigurationError) in
            try top["event_loops"].map { node throws(ConfigurationError) in try node.int(in: 1...256) }
        }
        let rateLimits = Self.part(&problems) { () throws(ConfigurationError) in
            try top["rate_limits"].map { node throws(ConfigurationError) in try self.rateLimitSettings(node) }
                ?? RateLimitSettings()
        }
        guard problems.count == problemsBefore, let tokens, let listeners, let admin, let keys, let signingKey,
            let cutoffs, let upstreams, let limits, let routes, let realm, let trustedProxies, let log, let http2,
            let hsts, let eventLoops, let issuers, let rateLimits
        else {
            return nil
        }
        var configuration = GatewayConfiguration(
            listeners: listeners,
            admin: admin,
            keys: keys,
            signingKey: signingKey,
            tokens: tokens,
            cutoffs: cutoffs,
            upstreams: upstreams,
            routes: routes,
            limits: limits,
            realm: realm,
            trustedProxies: trustedProxies,
            log: log,
            http2: http2,
            hsts: hsts,
            eventLoops: eventLoops,
            sessionCookieIssuers: issuers.sessionCookie,
            sourcePath: root.context.file
        )
        configuration.jwtIssuers = issuers.jwt
        configuration.rateLimits = rateLimits
        return configuration
    }

    /// Runs one independent part of the decoding: its value, or `nil` with its problem appended.
    static func part<Value>(
        _ problems: inout [ConfigurationError],
        _ body: () throws(ConfigurationError) -> Value
    ) -> Value? {
        do {
            return try body()
        } catch {
            problems.append(error)
            return nil
        }
    }

    // MARK: Listeners

    func listeners(_ node: ConfigNode) throws(ConfigurationError) -> [ListenerConfiguration] {
        let items = try node.sequence(maximumCount: 64)
        var listeners: [ListenerConfiguration] = []
        var addressNodes: [ConfigNode] = []
        var redirectPorts: [Int?] = []
        for item in items {
            let map = try item.mapping(allowed: ["address", "tls", "plain_http", "redirect_port", "proxy_protocol", "ip_rules", "forward_auth"])
            let addressNode = try map.required("address")
            let address = try self.socketAddress(addressNode)
            let mode: ListenerMode
            let kinds = ["tls", "plain_http", "forward_auth"].filter { map[$0] != nil }
            if kinds.count > 1 {
                throw map.keyNode(kinds[1]).error(
                    .conflict,
                    "a listener has one of tls, plain_http and forward_auth, not \(kinds.joined(separator: " and "))"
                )
            }
            if let tls = map["tls"] {
                mode = .tls(try self.tls(tls, isPublic: true))
            } else if let plain = map["plain_http"] {
                mode = .plain(try plain.choice(PlainHTTPMode.self))
            } else if let check = map["forward_auth"] {
                mode = .forwardAuth(try self.forwardAuth(check, address: address))
            } else {
                throw item.error(
                    .missingKey,
                    "a listener needs tls (tokengate serves over TLS), plain_http: reject|redirect, or forward_auth"
                )
            }
            var redirectPort: Int?
            if let portNode = map["redirect_port"] {
                guard case .plain(.redirect) = mode else {
                    throw map.keyNode("redirect_port").error(.conflict, "only for plain_http: redirect")
                }
                redirectPort = try portNode.int(in: 1...65_535)
            }
            for (index, previous) in listeners.enumerated() where previous.address.conflicts(with: address) {
                throw addressNode.error(.duplicate, "\(address) is already used by listen[\(index)]")
            }
            var proxyProtocolFrom: [CIDR]?
            if let proxyNode = map["proxy_protocol"] {
                guard case .tls = mode else {
                    throw map.keyNode("proxy_protocol").error(
                        .conflict,
                        "proxy_protocol is read on TLS listeners only (a plain_http listener only rejects or redirects)"
                    )
                }
                proxyProtocolFrom = try self.proxyProtocol(proxyNode)
            }
            let ipRules = try map["ip_rules"].map { node throws(ConfigurationError) in try self.ipRules(node) } ?? IPRules()
            listeners.append(
                ListenerConfiguration(address: address, mode: mode, proxyProtocolFrom: proxyProtocolFrom, ipRules: ipRules)
            )
            addressNodes.append(addressNode)
            redirectPorts.append(redirectPort)
        }
        // A gateway that only answers a front proxy's checks has no public listener to need TLS on.
        let onlyChecks = listeners.contains { $0.forwardAuth != nil } && !listeners.contains { $0.forwardAuth == nil }
        if onlyChecks {
            return listeners
        }
        guard let firstTLS = listeners.first(where: { $0.tls != nil }) else {
            throw node.error(
                .insecure,
                "no TLS listener: tokengate only serves over TLS (a plain_http listener only rejects or redirects)"
            )
        }
        for index in listeners.indices {
            if case .plain(.redirect) = listeners[index].mode {
                listeners[index].redirectPort = redirectPorts[index] ?? firstTLS.address.port
            }
        }
        return listeners
    }

    func socketAddress(_ node: ConfigNode) throws(ConfigurationError) -> SocketAddressSpec {
        let text = try node.scalar(expected: "host:port")
        do {
            return try ValueSyntax.socketAddress(text)
        } catch {
            throw node.error(error)
        }
    }

    /// A listener's `tls:` section. `isPublic`: a public listener's, which also takes `misdirected_requests`
    /// (the admin listener has no routes for a request to be misdirected to).
    func tls(_ node: ConfigNode, isPublic: Bool = false) throws(ConfigurationError) -> TLSListenerConfiguration {
        let map = try node.mapping(
            allowed: ["certificates", "handshake_timeout", "min_version"] + (isPublic ? ["misdirected_requests"] : [])
        )
        guard let certificatesNode = map["certificates"] else {
            throw node.error(.missingKey, "a TLS listener needs certificates: [ { cert: FILE, key: FILE } ]")
        }
        let items = try certificatesNode.sequence(maximumCount: 256)
        guard !items.isEmpty else {
            throw certificatesNode.error(.missingKey, "a TLS listener needs at least one certificate")
        }
        var certificates: [CertificateConfiguration] = []
        var seenNames: [String: Int] = [:]
        for (index, item) in items.enumerated() {
            let certificate = try item.mapping(allowed: ["cert", "key", "server_names"])
            var serverNames: [String] = []
            if let namesNode = certificate["server_names"] {
                for nameNode in try namesNode.sequence(maximumCount: 1000) {
                    let name = try nameNode.string(maximumLength: 255).lowercased()
                    let bare = name.hasPrefix("*.") ? String(name.dropFirst(2)) : name
                    guard ValueSyntax.isHostName(bare) else {
                        throw nameNode.error(.invalidValue, "expected a host name or *.domain, got \(nameNode.summary)")
                    }
                    // SNI matching never lets a wildcard cover a top-level domain alone: refuse it here rather
                    // than accept a name that would never select the certificate.
                    guard !name.hasPrefix("*.") || bare.contains(".") else {
                        throw nameNode.error(
                            .invalidValue,
                            "a wildcard needs a domain of two or more labels (*.example.com), got \(nameNode.summary)"
                        )
                    }
                    if let other = seenNames[name] {
                        throw nameNode.error(.duplicate, "\(name) is already served by certificates[\(other)]")
                    }
                    seenNames[name] = index
                    serverNames.append(name)
                }
            }
            certificates.append(
                CertificateConfiguration(
                    cert: try certificate.required("cert").path(mustExist: true),
                    key: try certificate.required("key").path(mustExist: true),
                    serverNames: serverNames
                )
            )
        }
        return TLSListenerConfiguration(
            certificates: certificates,
            handshakeTimeout: try map["handshake_timeout"]?.duration(in: .milliseconds(100)...(.seconds(300)))
                ?? .seconds(10),
            minimumVersion: try map["min_version"]?.choice(TLSProtocolVersion.self) ?? .tls12,
            misdirectedRequests: try map["misdirected_requests"]?.choice(MisdirectedRequests.self) ?? .refuse,
            misdirectedRequestsIsSet: map["misdirected_requests"] != nil
        )
    }

    // MARK: Admin

    func admin(_ node: ConfigNode, listeners: [ListenerConfiguration]) throws(ConfigurationError)
        -> AdminConfiguration
    {
        let map = try node.mapping(allowed: ["address", "secret_file", "tls"])
        let addressNode = try map.required("address")
        let address = try self.socketAddress(addressNode)
        for (index, listener) in listeners.enumerated() where listener.address.conflicts(with: address) {
            throw addressNode.error(.duplicate, "\(address) is already used by listen[\(index)]")
        }
        let secretFile = try map["secret_file"]?.path(mustExist: true)
        let tls = try map["tls"].map { node throws(ConfigurationError) in try self.tls(node) }
        // TLS only encrypts: without a secret anyone who reaches the port could move cutoffs back. Off
        // loopback the secret is required, with TLS on top where the network is not trusted.
        if !address.isLoopback, secretFile == nil {
            throw addressNode.error(
                .insecure,
                "the admin listener on \(address) is reachable from other machines: it needs secret_file (and tls where the network is not trusted)"
            )
        }
        return AdminConfiguration(address: address, secretFile: secretFile, tls: tls)
    }

    // MARK: Tokens

    func tokens(_ node: ConfigNode) throws(ConfigurationError) -> TokenSettings {
        let map = try node.mapping(allowed: [
            "claims", "session_max_age", "clock_skew", "issuer", "audience", "algorithms", "verified_cache",
        ])
        var claims = ClaimNames()
        if let claimsNode = map["claims"] {
            let claimsMap = try claimsNode.mapping(allowed: ["user", "issued_at", "api_only"])
            claims.user = try claimsMap["user"]?.string(maximumLength: 128) ?? claims.user
            claims.issuedAt = try claimsMap["issued_at"]?.string(maximumLength: 128) ?? claims.issuedAt
            claims.apiOnly = try claimsMap["api_only"]?.string(maximumLength: 128) ?? claims.apiOnly
            let names = [claims.user, claims.issuedAt, claims.apiOnly]
            guard Set(names).count == names.count else {
                throw claimsNode.error(.duplicate, "user, issued_at and api_only must name different claims")
            }
        }
        var audience: [String] = []
        if let audienceNode = map["audience"] {
            if audienceNode.isSequence {
                audience = try audienceNode.sequence(maximumCount: 64).map { item throws(ConfigurationError) in
                    try item.string()
                }
            } else {
                audience = [try audienceNode.string()]
            }
        }
        var algorithms = TokenAlgorithm.allCases
        if let algorithmsNode = map["algorithms"] {
            algorithms = try self.algorithmList(algorithmsNode)
        }
        var cacheEntries = TokenSettings.defaultVerifiedCacheEntries
        if let cacheNode = map["verified_cache"] {
            let cacheMap = try cacheNode.mapping(allowed: ["entries"])
            cacheEntries = try cacheMap["entries"]?.int(in: 0...262_144) ?? cacheEntries
        }
        return TokenSettings(
            claims: claims,
            sessionMaxAge: try map["session_max_age"]?.duration(in: .seconds(60)...(.seconds(366 * 86_400)))
                ?? .seconds(14 * 86_400),
            clockSkew: try map["clock_skew"]?.duration(in: .zero...(.seconds(600))) ?? .seconds(60),
            issuer: try map["issuer"]?.string(),
            audience: audience,
            algorithms: algorithms,
            verifiedCacheEntries: cacheEntries
        )
    }

    func algorithmList(_ node: ConfigNode) throws(ConfigurationError) -> [TokenAlgorithm] {
        var algorithms: [TokenAlgorithm] = []
        for item in try node.sequence(maximumCount: 16) {
            let algorithm = try item.choice(TokenAlgorithm.self)
            guard !algorithms.contains(algorithm) else {
                throw item.error(.duplicate, "\(algorithm.rawValue) is listed twice")
            }
            algorithms.append(algorithm)
        }
        guard !algorithms.isEmpty else {
            throw node.error(.invalidValue, "must list at least one algorithm")
        }
        return algorithms
    }

    // MARK: Keys

    static let keyFields = ["jwks", "pem", "hmac_file", "hmac_env", "alg", "kid"]
    /// A fetched key set's own settings (``RemoteKeySetConfiguration``), allowed beside `jwks_url` or `discovery`.
    static let remoteKeyFields = [
        "jwks_url", "discovery", "alg", "ca_file", "cache_min", "cache_max", "refetch_interval", "max_stale",
        "timeout", "max_bytes",
    ]

    func keys(_ node: ConfigNode, tokens: TokenSettings) throws(ConfigurationError) -> [KeySourceConfiguration] {
        let items = try node.sequence(maximumCount: 100)
        var keys: [KeySourceConfiguration] = []
        var kids: [String: Int] = [:]
        for (index, item) in items.enumerated() {
            if let probe = try? item.anyMapping(),
                !probe.present(among: ["jwks_url", "discovery"]).isEmpty
            {
                let map = try item.mapping(allowed: Self.remoteKeyFields)
                keys.append(try self.remoteKey(map, item: item, tokens: tokens))
                continue
            }
            let map = try item.mapping(allowed: Self.keyFields)
            let (source, algorithm, kid) = try self.keyMaterial(map, item: item, tokens: tokens)
            if let kid {
                if let other = kids[kid] {
                    throw map.keyNode("kid").error(.duplicate, "kid \(kid) is already used by keys[\(other)]")
                }
                kids[kid] = index
            } else if items.count > 1, !self.isJWKS(source) {
                throw item.error(.missingKey, "with several keys, each pem or hmac key needs a kid")
            }
            keys.append(KeySourceConfiguration(source: source, algorithm: algorithm, keyID: kid))
        }
        return keys
    }

    func signingKey(_ node: ConfigNode, tokens: TokenSettings) throws(ConfigurationError) -> SigningKeyConfiguration {
        let map = try node.mapping(allowed: Self.keyFields)
        let (source, algorithm, kid) = try self.keyMaterial(map, item: node, tokens: tokens)
        return SigningKeyConfiguration(source: source, algorithm: algorithm, keyID: kid)
    }

    private func isJWKS(_ source: KeyMaterialSource) -> Bool {
        switch source {
        case .jwks, .remote: return true
        case .pem, .hmacFile, .hmacEnvironment: return false
        }
    }

    /// A `jwks_url` or `discovery` entry. Only the URL's shape is checked here: nothing is fetched while a
    /// configuration loads (`check-config --connect` fetches).
    private func remoteKey(
        _ map: ConfigMapping,
        item: ConfigNode,
        tokens: TokenSettings
    ) throws(ConfigurationError) -> KeySourceConfiguration {
        let sources = map.present(among: ["jwks_url", "discovery"])
        guard sources.count == 1, let sourceKey = sources.first, let urlNode = map[sourceKey] else {
            throw map.keyNode("discovery").error(.conflict, "a key has exactly one of jwks_url or discovery")
        }
        let url = try urlNode.string(maximumLength: 2048)
        do {
            try ValueSyntax.httpURL(url, requireHTTPS: true)
        } catch {
            throw urlNode.error(error)
        }
        let kind: RemoteKeySetConfiguration.Kind = sourceKey == "discovery" ? .discovery : .jwks
        if kind == .discovery {
            guard !url.contains("?") else {
                throw urlNode.error(.invalidValue, "an issuer URL has no query (OpenID Connect Discovery §4)")
            }
            if let issuer = tokens.issuer, issuer != url {
                throw urlNode.error(
                    .conflict,
                    "tokens.issuer is \(issuer), but discovery names \(url): a provider's tokens carry its own issuer"
                )
            }
        }
        let algorithmNode = map["alg"]
        let algorithm = try algorithmNode?.choice(TokenAlgorithm.self)
        if let algorithm, let algorithmNode {
            guard !algorithm.isHMAC else {
                throw algorithmNode.error(.conflict, "a fetched key set holds public keys; \(algorithm.rawValue) is HMAC")
            }
            guard tokens.algorithms.contains(algorithm) else {
                let allowed = tokens.algorithms.map(\.rawValue).joined(separator: ", ")
                throw algorithmNode.error(.conflict, "\(algorithm.rawValue) is not in tokens.algorithms (\(allowed))")
            }
        }
        var remote = RemoteKeySetConfiguration(kind: kind, url: url)
        remote.caFile = try map["ca_file"]?.path(mustExist: true)
        let hour: Duration = .seconds(3600)
        if let node = map["cache_min"] { remote.cacheMinimum = try node.duration(in: .seconds(1)...(hour * 24)) }
        if let node = map["cache_max"] { remote.cacheMaximum = try node.duration(in: .seconds(1)...(hour * 24 * 7)) }
        guard remote.cacheMinimum <= remote.cacheMaximum else {
            throw map.keyNode(map["cache_max"] == nil ? "cache_min" : "cache_max").error(
                .conflict, "cache_min must not be longer than cache_max")
        }
        if let node = map["refetch_interval"] { remote.refetchInterval = try node.duration(in: .seconds(1)...hour) }
        if let node = map["max_stale"] { remote.maxStale = try node.duration(in: .seconds(0)...(hour * 24 * 30)) }
        if let node = map["timeout"] { remote.timeout = try node.duration(in: .milliseconds(100)...(.seconds(60))) }
        if let node = map["max_bytes"] { remote.maxBytes = try node.size(in: 1024...(8 << 20)) }
        return KeySourceConfiguration(source: .remote(remote), algorithm: algorithm)
    }

    /// The shared shape of verification and signing keys: exactly one source, and an algorithm bound to it.
    private func keyMaterial(
        _ map: ConfigMapping,
        item: ConfigNode,
        tokens: TokenSettings
    ) throws(ConfigurationError) -> (KeyMaterialSource, TokenAlgorithm?, String?) {
        let sourceKeys = map.present(among: ["jwks", "pem", "hmac_file", "hmac_env"])
        guard sourceKeys.count == 1, let sourceKey = sourceKeys.first, let sourceNode = map[sourceKey] else {
            if sourceKeys.isEmpty {
                throw item.error(.missingKey, "a key needs one of jwks, pem, hmac_file or hmac_env")
            }
            throw map.keyNode(sourceKeys[1]).error(
                .conflict,
                "a key has exactly one of jwks, pem, hmac_file or hmac_env (one entry per key)"
            )
        }
        let algorithmNode = map["alg"]
        let algorithm = try algorithmNode?.choice(TokenAlgorithm.self)
        let kid = try map["kid"]?.string(maximumLength: 256)
        if let kid, !ValueSyntax.isPrintableASCII(kid, allowSpace: false) {
            throw map.keyNode("kid").error(.invalidValue, "kid must be printable ASCII without spaces")
        }
        let source: KeyMaterialSource
        switch sourceKey {
        case "jwks":
            source = .jwks(try sourceNode.path(mustExist: true))
        case "pem":
            source = .pem(try sourceNode.path(mustExist: true))
            guard let algorithm else {
                throw item.error(.missingKey, "a pem key needs alg (the algorithm is bound to the key)")
            }
            guard !algorithm.isHMAC else {
                throw map.keyNode("alg").error(.conflict, "\(algorithm.rawValue) is an HMAC algorithm; use hmac_file")
            }
        case "hmac_file", "hmac_env":
            if sourceKey == "hmac_file" {
                source = .hmacFile(try sourceNode.path(mustExist: true))
            } else {
                let name = try sourceNode.string(maximumLength: 128)
                // Neither message repeats the value: someone who pasted the secret itself here must not find it
                // in a log.
                guard ValueSyntax.isEnvironmentName(name) else {
                    throw sourceNode.error(
                        .invalidValue,
                        "expected the name of an environment variable (letters, digits, _), not its value"
                    )
                }
                if sourceNode.context.checkFiles, getenv(name) == nil {
                    throw sourceNode.error(.fileNotFound, "the environment variable named here is not set")
                }
                source = .hmacEnvironment(name)
            }
            guard let algorithm else {
                throw item.error(.missingKey, "an hmac key needs alg: HS256, HS384 or HS512")
            }
            guard algorithm.isHMAC else {
                throw map.keyNode("alg").error(.conflict, "an hmac key needs alg: HS256, HS384 or HS512")
            }
        default:
            preconditionFailure("unhandled key source \(sourceKey)")
        }
        if let algorithm, let algorithmNode, !tokens.algorithms.contains(algorithm) {
            let allowed = tokens.algorithms.map(\.rawValue).joined(separator: ", ")
            throw algorithmNode.error(.conflict, "\(algorithm.rawValue) is not in tokens.algorithms (\(allowed))")
        }
        return (source, algorithm, kid)
    }
}

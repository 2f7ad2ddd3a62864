//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateHTTP
import TokengatePercentEncoding
import TokengateTokens

/// What route decoding needs to know about the other sections.
struct RouteEnvironment {
    var tokens: TokenSettings
    var upstreams: [String: UpstreamConfiguration]
    /// Upstreams whose own definition has a problem (reported there): a route may name them.
    var invalidUpstreams: Set<String> = []
    /// The upstreams section itself failed: no route's upstream can be judged.
    var upstreamsFailed = false
    var hasKeys: Bool
    var hasSigningKey: Bool
    /// The `issuers:` section's session-cookie issuers; nil when that section has a problem of its own.
    var sessionCookieIssuers: [String: SessionCookieIssuerConfiguration]? = [:]
    /// The `issuers:` section's JWT issuers; nil when that section has a problem of its own.
    var jwtIssuers: [String: JWTIssuerConfiguration]? = [:]
    /// Whether the cutoff store keeps device records (not the JSON file); true when `cutoffs` has a problem of its
    /// own.
    var keepsDevices = true
}

// MARK: Routes

extension ConfigurationDecoder {
    /// The Unicode bidirectional formatting characters a `display_name` may not hold: LRM, RLM, the embeddings
    /// and overrides (U+202A–U+202E) and the isolates (U+2066–U+2069).
    static let bidiControls: Set<UInt32> = [0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069]

    static let proxyRouteKeys = [
        "upstream", "accept", "sources", "forward_token", "body_limit", "algorithms", "require_claims",
        "session_cookie", "issuers",
        "response_min_rate", "cors", "require_scopes", "forward_claims", "websocket",
    ]
    /// Keys every kind of route takes: the traffic policy (``TrafficPolicyDecoding``).
    static let commonRouteKeys = ["ip_rules", "rate_limits"]
    static let tokenPageRouteKeys = [
        "login", "cookie_name", "cookie_path", "token_lifetime", "apps", "connected_apps", "mint", "mint_whoami", "mint_set",
    ]

    /// The routes that decode; each one that does not adds its problem to `problems` (a route is judged on its
    /// own: a broken one does not hide the next one's mistake).
    func routes(
        _ node: ConfigNode,
        environment: RouteEnvironment,
        problems: inout [ConfigurationError]
    ) throws(ConfigurationError) -> [RouteConfiguration] {
        let items = try node.sequence(maximumCount: 1000)
        guard !items.isEmpty else {
            throw node.error(.missingKey, "at least one route is needed")
        }
        var routes: [RouteConfiguration] = []
        var seen: [String: Int] = [:]
        for (index, item) in items.enumerated() {
            do throws(ConfigurationError) {
                let map = try item.mapping(
                    allowed: ["host", "path_prefix", "kind"] + Self.commonRouteKeys + Self.proxyRouteKeys
                        + Self.tokenPageRouteKeys
                )
                var route = try self.route(map, item: item, environment: environment)
                try self.trafficPolicy(map, into: &route)
                let identity = (route.host ?? "*") + " " + route.pathPrefix
                if let other = seen[identity] {
                    throw map.keyNode("path_prefix").error(
                        .duplicate,
                        "same host and path_prefix as routes[\(other)]"
                    )
                }
                seen[identity] = index
                routes.append(route)
            } catch {
                problems.append(error)
            }
        }
        return routes
    }

    private func route(_ map: ConfigMapping, item: ConfigNode, environment: RouteEnvironment) throws(ConfigurationError)
        -> RouteConfiguration
    {
        let host = try map["host"].map { node throws(ConfigurationError) in try self.routeHost(node) }
        let prefixNode = try map.required("path_prefix")
        let pathPrefix = try self.pathPrefix(prefixNode)
        let kindName = try map["kind"]?.scalar(expected: "proxy or token_page") ?? "proxy"
        switch kindName {
        case "proxy":
            if let extra = Self.tokenPageRouteKeys.first(where: { map.has($0) }) {
                throw map.keyNode(extra).error(.conflict, "only for kind: token_page")
            }
            return try self.proxyRoute(map, item: item, host: host, pathPrefix: pathPrefix, environment: environment)
        case "token_page":
            if let extra = Self.proxyRouteKeys.first(where: { map.has($0) }) {
                throw map.keyNode(extra).error(.conflict, "not used by kind: token_page (it never forwards)")
            }
            guard environment.hasSigningKey else {
                throw map.keyNode("kind").error(.missingKey, "a token_page route needs signing_key to mint tokens")
            }
            var page = try self.tokenPage(map, item: item, environment: environment)
            if let node = map["connected_apps"] {
                page.connectedAppsPath = try self.connectedAppsPath(node, prefix: pathPrefix, environment: environment)
            }
            for key in ["mint_whoami", "mint_set"] where map[key] != nil && map["mint"] == nil {
                throw map.keyNode(key).error(.conflict, "\(key) is for a token page with mint")
            }
            if let node = map["mint_whoami"] {
                guard case .whoami = page.login else {
                    throw node.error(.conflict, "mint_whoami takes values from the whoami answer: it needs login.whoami")
                }
                page.mintWhoamiHeaders = try self.siteValues(node, headers: true)
            }
            if let node = map["mint_set"] { page.mintConstants = try self.siteValues(node, headers: false) }
            if let node = map["mint"] {
                page.mintIssuer = try self.mintIssuer(node, page: page, environment: environment)
            }
            return RouteConfiguration(
                host: host,
                pathPrefix: pathPrefix,
                kind: .tokenPage(page),
                upstream: nil,
                accept: .none,
                sources: []
            )
        default:
            let kindNode = map["kind"]!
            var message = "expected proxy or token_page, got \(kindNode.summary)"
            if let suggestion = ValueSyntax.suggestion(for: kindName, among: ["proxy", "token_page"]) {
                message += " (did you mean '\(suggestion)'?)"
            }
            throw kindNode.error(.invalidValue, message)
        }
    }

    private func proxyRoute(
        _ map: ConfigMapping,
        item: ConfigNode,
        host: String?,
        pathPrefix: String,
        environment: RouteEnvironment
    ) throws(ConfigurationError) -> RouteConfiguration {
        let upstreamNode = try map.required("upstream")
        let upstream = try upstreamNode.string(maximumLength: 64)
        guard environment.upstreams[upstream] != nil || environment.invalidUpstreams.contains(upstream)
            || environment.upstreamsFailed
        else {
            let names = Set(environment.upstreams.keys).union(environment.invalidUpstreams).sorted()
            var message = "unknown upstream '\(upstream)'"
            if let suggestion = ValueSyntax.suggestion(for: upstream, among: names) {
                message += ", did you mean '\(suggestion)'?"
            } else if names.isEmpty {
                message += " (no upstreams are defined)"
            } else {
                message += " (defined: \(names.joined(separator: ", ")))"
            }
            throw upstreamNode.error(.unknownReference, message)
        }
        let acceptNode = try map.required("accept")
        let accept = try self.accept(acceptNode)
        var sources: [TokenSource] = []
        var forwardToken = ForwardTokenMode.strip
        var algorithms: [TokenAlgorithm]?
        var requiredClaims: [RequiredClaim] = []
        var sessionCookie: RouteSessionCookie?
        var requiredScopes: [String] = []
        var forwardClaims: [ForwardedClaim] = []
        var issuers: [String]?
        if accept.acceptsTokens {
            sessionCookie = try map["session_cookie"].map { node throws(ConfigurationError) in
                try self.routeSessionCookie(node, issuers: environment.sessionCookieIssuers)
            }
            // A route that names a site's cookie and no `sources` reads only that cookie: no JWT, no keys needed.
            sources =
                try map["sources"].map { node throws(ConfigurationError) in try self.sources(node) }
                ?? (sessionCookie == nil ? [.authorization] : [])
            if !sources.isEmpty, !environment.hasKeys, environment.jwtIssuers?.isEmpty ?? false {
                throw acceptNode.error(.missingKey, "this route accepts tokens but no keys are configured")
            }
            if let issuersNode = map["issuers"] {
                guard !sources.isEmpty else {
                    throw issuersNode.error(
                        .conflict, "issuers names the JWT issuers this route accepts, and it reads no JWT (no sources)")
                }
                issuers = try self.routeIssuers(issuersNode, environment: environment)
            }
            if let sessionCookie, let shared = sessionCookie.sources.first(where: { sources.contains($0) }) {
                throw map.keyNode("session_cookie").error(
                    .duplicate, "\(shared) is both a JWT source and the session cookie's: list it in one of them")
            }
            forwardToken = try map["forward_token"]?.choice(ForwardTokenMode.self) ?? .strip
            if forwardToken == .keep {
                // `keep` would silently forward nothing: the gateway removes these headers on every route.
                for case .header(let name) in sources + (sessionCookie?.sources ?? [])
                where Self.isRemovedBeforeForwarding(header: name)
                {
                    throw map.keyNode("forward_token").error(
                        .conflict,
                        "keep cannot forward the token of header:\(name): the gateway removes that header before "
                            + "forwarding on every route; carry the token in another header, or strip it")
                }
            }
            if let algorithmsNode = map["algorithms"] {
                let list = try self.algorithmList(algorithmsNode)
                if let outside = list.first(where: { !environment.tokens.algorithms.contains($0) }) {
                    throw algorithmsNode.error(.conflict, "\(outside.rawValue) is not in tokens.algorithms")
                }
                algorithms = list
            }
            if let claimsNode = map["require_claims"] {
                for claimNode in try claimsNode.sequence(maximumCount: 8) {
                    let claim = try claimNode.choice(RequiredClaim.self)
                    guard !requiredClaims.contains(claim) else {
                        throw claimNode.error(.duplicate, "\(claim.rawValue) is listed twice")
                    }
                    if claim == .iss, environment.tokens.issuer == nil {
                        throw claimNode.error(.conflict, "requiring iss needs tokens.issuer")
                    }
                    if claim == .aud, environment.tokens.audience.isEmpty {
                        throw claimNode.error(.conflict, "requiring aud needs tokens.audience")
                    }
                    requiredClaims.append(claim)
                }
            }
            if let scopesNode = map["require_scopes"] {
                requiredScopes = try self.requiredScopes(scopesNode)
            }
            if let claimsNode = map["forward_claims"] {
                forwardClaims = try self.forwardClaims(claimsNode, claimNames: environment.tokens.claims)
            }
            if sessionCookie != nil {
                // Scopes and claims are read from a JWT's payload; a site's login cookie carries neither, so a
                // cookie would pass a scope check it never faced.
                for key in ["require_scopes", "forward_claims"] where map.has(key) {
                    throw map.keyNode(key).error(
                        .conflict,
                        "\(key) reads a JWT's claims, and this route also accepts a session cookie, which has none: "
                            + "serve the cookie on a route of its own")
                }
            }
        } else {
            for key in [
                "sources", "forward_token", "algorithms", "require_claims", "session_cookie", "require_scopes",
                "forward_claims", "issuers",
            ] where map.has(key) {
                throw map.keyNode(key).error(.conflict, "a route with accept: none takes no token, so it has no \(key)")
            }
        }
        return RouteConfiguration(
            host: host,
            pathPrefix: pathPrefix,
            kind: .proxy,
            upstream: upstream,
            accept: accept,
            sources: sources,
            forwardToken: forwardToken,
            bodyLimit: try map["body_limit"]?.size(in: 0...(64 * 1024 * 1024 * 1024)),
            algorithms: algorithms,
            requiredClaims: requiredClaims,
            sessionCookie: sessionCookie,
            responseMinRate: try map["response_min_rate"]?.size(in: 0...(64 * 1024 * 1024)),
            requiredScopes: requiredScopes,
            forwardClaims: forwardClaims,
            webSocket: try map["websocket"].map { node throws(ConfigurationError) in try self.webSocket(node) } ?? nil,
            issuers: issuers
        )
    }

    /// `websocket: true`, or `websocket: { allowed_origins: […], idle_timeout: 5m, max_lifetime: 24h,
    /// max_tunnels: 10000 }`; `false` is the same as leaving it out.
    func webSocket(_ node: ConfigNode) throws(ConfigurationError) -> WebSocketRouteConfiguration? {
        if let enabled = try? node.bool() {
            return enabled ? WebSocketRouteConfiguration() : nil
        }
        let map = try node.mapping(allowed: ["allowed_origins", "idle_timeout", "max_lifetime", "max_tunnels"])
        var configuration = WebSocketRouteConfiguration()
        if let originsNode = map["allowed_origins"] {
            for item in try originsNode.sequence(maximumCount: 256) {
                let origin = try item.string(maximumLength: 512).lowercased()
                guard Self.isSerializedOrigin(origin) else {
                    throw item.error(
                        .invalidValue,
                        "expected an origin such as https://app.example (scheme and host, no path), got \(item.summary)")
                }
                guard !configuration.allowedOrigins.contains(origin) else {
                    throw item.error(.duplicate, "\(origin) is listed twice")
                }
                configuration.allowedOrigins.append(origin)
            }
        }
        if let idle = map["idle_timeout"] {
            configuration.idleTimeout = try idle.duration(in: .seconds(1)...(.seconds(86_400)))
        }
        if let lifetime = map["max_lifetime"] {
            configuration.maxLifetime = try lifetime.duration(in: .seconds(1)...(.seconds(30 * 86_400)))
        }
        if let tunnels = map["max_tunnels"] {
            configuration.maxTunnels = try tunnels.int(in: 1...1_000_000)
        }
        return configuration
    }

    /// A route's `issuers:`: the JWT issuers whose tokens it accepts, by name (`tokens` for the one of the
    /// top-level `keys`), each once.
    func routeIssuers(_ node: ConfigNode, environment: RouteEnvironment) throws(ConfigurationError) -> [String] {
        let items = try node.sequence(maximumCount: 65)
        guard !items.isEmpty else {
            throw node.error(.missingKey, "name at least one issuer, or leave issuers out for the default")
        }
        var names: [String] = []
        for item in items {
            let name = try item.string(maximumLength: 64)
            guard !names.contains(name) else { throw item.error(.duplicate, "\(name) is listed twice") }
            names.append(name)
            if name == JWTIssuerConfiguration.topLevelName {
                guard environment.hasKeys else {
                    throw item.error(.missingKey, "\(name) is the issuer of the top-level keys, and there are none")
                }
                continue
            }
            // Nil when `issuers:` has a problem of its own: the name cannot be judged then.
            guard let jwtIssuers = environment.jwtIssuers else { continue }
            if jwtIssuers[name] != nil { continue }
            if environment.sessionCookieIssuers?[name] != nil {
                throw item.error(
                    .conflict, "\(name) is a session_cookie issuer: a route names it in session_cookie, not issuers")
            }
            let known = (environment.hasKeys ? [JWTIssuerConfiguration.topLevelName] : []) + jwtIssuers.keys.sorted()
            var message = "unknown issuer '\(name)'"
            if let suggestion = ValueSyntax.suggestion(for: name, among: known) {
                message += ", did you mean '\(suggestion)'?"
            } else {
                message += known.isEmpty ? " (no JWT issuers are defined)" : " (JWT issuers: \(known.joined(separator: ", ")))"
            }
            throw item.error(.unknownReference, message)
        }
        return names
    }

    /// The most scopes one route may require, and the most claims it may forward.
    static let maxRouteScopes = 16
    static let maxRouteForwardedClaims = 16

    /// `require_scopes: [read, write]`: scope names as RFC 6749 §3.3 spells them (so each fits a `scope="…"`
    /// challenge attribute), no name twice.
    func requiredScopes(_ node: ConfigNode) throws(ConfigurationError) -> [String] {
        var scopes: [String] = []
        for item in try node.sequence(maximumCount: Self.maxRouteScopes) {
            let scope = try item.string(maximumLength: 128)
            guard ClaimSelection.isScopeToken(scope) else {
                throw item.error(
                    .invalidValue, "'\(scope)' is not a scope name (printable ASCII without spaces, quotes or backslashes)")
            }
            guard !scopes.contains(scope) else { throw item.error(.duplicate, "\(scope) is listed twice") }
            scopes.append(scope)
        }
        guard !scopes.isEmpty else { throw node.error(.empty, "list at least one scope, or leave require_scopes out") }
        return scopes
    }

    /// `forward_claims: { email: X-Tokengate-Email }`: a claim per header. A header may not be one the gateway
    /// owns or removes (the identity headers, hop-by-hop and forwarding fields, the framing), nor hold `_` (a
    /// CGI-style backend would read it as the `-` spelling a client can send); a claim may not be one the
    /// verifier reads for its own checks (``ClaimSelection/isReservedClaim(_:claimNames:)``).
    func forwardClaims(_ node: ConfigNode, claimNames: ClaimNames) throws(ConfigurationError) -> [ForwardedClaim] {
        let mapping = try node.anyMapping()
        guard mapping.entries.count <= Self.maxRouteForwardedClaims else {
            throw node.error(.tooLarge, "at most \(Self.maxRouteForwardedClaims) claims, got \(mapping.entries.count)")
        }
        guard !mapping.entries.isEmpty else {
            throw node.error(.empty, "name at least one claim, or leave forward_claims out")
        }
        var claims: [ForwardedClaim] = []
        for entry in mapping.entries {
            let claim = entry.key
            guard claim.utf8.count <= 256 else { throw entry.keyNode.error(.tooLarge, "a claim name is at most 256 bytes") }
            if ClaimSelection.isReservedClaim(claim, claimNames: claimNames) {
                throw entry.keyNode.error(
                    .conflict,
                    "\(claim) is checked by the gateway itself and cannot be forwarded (the user, the issue time and "
                        + "the kind already reach the backend in X-Tokengate-User, -Issued-At and -Token-Kind)")
            }
            let header = try entry.value.string(maximumLength: 64)
            let lowered = header.lowercased()
            guard ValueSyntax.isToken(header), !header.contains("_") else {
                throw entry.value.error(.invalidValue, "'\(header)' is not a header name the gateway can send (letters, digits and -)")
            }
            guard !Self.identityHeaders.contains(lowered), !Self.reservedHeaders.contains(lowered),
                !Self.headersRemovedBeforeForwarding.contains(lowered), !Self.ownedRequestHeaders.contains(lowered)
            else {
                throw entry.value.error(.conflict, "\(header) is a header the gateway owns or removes; choose another name")
            }
            guard !claims.contains(where: { $0.header.lowercased() == lowered }) else {
                throw entry.value.error(.duplicate, "\(header) carries two claims")
            }
            claims.append(ForwardedClaim(claim: claim, header: header))
        }
        return claims
    }

    /// The identity headers the gateway writes for every verified token.
    static let identityHeaders: Set<String> = [
        "x-tokengate-user", "x-tokengate-token-kind", "x-tokengate-issued-at", "x-tokengate-key-id",
    ]

    /// Request headers whose meaning a claim must not take over: the client's own request metadata.
    private static let ownedRequestHeaders: Set<String> = [
        "expect", "origin", "referer", "user-agent", "accept", "accept-encoding", "content-encoding", "range",
        "if-match", "if-none-match", "if-modified-since", "if-unmodified-since", "if-range", "via", "trailer",
        "proxy-authorization", "proxy-connection", "keep-alive",
    ]

    /// `[api]`, `[session]`, `[api, session]` (either order) or `none`.
    func accept(_ node: ConfigNode) throws(ConfigurationError) -> AcceptPolicy {
        let failure = node.error(
            .invalidValue,
            "expected [api], [session], [api, session] or none, got \(node.summary)"
        )
        if node.isScalar {
            guard try node.scalar(expected: "[api], [session], [api, session] or none") == "none" else {
                throw failure
            }
            return .none
        }
        guard node.isSequence else {
            throw failure
        }
        var policy = AcceptPolicy.none
        let items = try node.sequence(maximumCount: 2)
        for item in items {
            guard item.isScalar else {
                throw failure
            }
            switch try item.scalar() {
            case "api" where !policy.api:
                policy.api = true
            case "session" where !policy.session:
                policy.session = true
            default:
                throw failure
            }
        }
        guard policy.acceptsTokens else {
            throw failure
        }
        return policy
    }

    func sources(_ node: ConfigNode) throws(ConfigurationError) -> [TokenSource] {
        let items = try node.sequence(maximumCount: 16)
        guard !items.isEmpty else {
            throw node.error(.invalidValue, "list at least one source (the default is [authorization])")
        }
        var sources: [TokenSource] = []
        for item in items {
            let text = try item.string(maximumLength: 300)
            let source: TokenSource
            do {
                source = try Self.tokenSource(text)
            } catch {
                throw item.error(error)
            }
            guard !sources.contains(source) else {
                throw item.error(.duplicate, "\(source) is listed twice")
            }
            sources.append(source)
        }
        return sources
    }

    /// Headers a token may not be read from: they carry something else, or the gateway owns them.
    private static let reservedHeaders: Set<String> = [
        "authorization", "cookie", "host", "content-length", "transfer-encoding", "connection", "upgrade", "te",
        "content-type", "forwarded", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-request-id",
    ]

    /// Request headers the gateway removes before forwarding, whatever the route (operations.md, "What the
    /// backend receives"): hop-by-hop fields, `Expect`, and the fields that say where a request came from — the
    /// request rewriter's own list (``ProxyFieldRules/removedBeforeForwarding``). Besides these, every
    /// `X-Tokengate-*` field and every name holding `_` is removed.
    static let headersRemovedBeforeForwarding: Set<String> = ProxyFieldRules.removedBeforeForwarding

    /// Whether the gateway removes a request header of this name before forwarding.
    static func isRemovedBeforeForwarding(header name: String) -> Bool {
        let lowered = name.lowercased()
        return Self.headersRemovedBeforeForwarding.contains(lowered) || lowered.hasPrefix("x-tokengate-")
            || lowered.contains("_")
    }

    static func tokenSource(_ text: String) throws(ValueSyntaxError) -> TokenSource {
        if text == "authorization" {
            return .authorization
        }
        let form = "expected authorization, header:NAME, cookie:NAME, form:FIELD or json:FIELD, got \(text)"
        guard let colon = text.firstIndex(of: ":") else {
            throw ValueSyntaxError(form)
        }
        let kind = text[..<colon]
        let name = String(text[text.index(after: colon)...])
        guard !name.isEmpty else {
            throw ValueSyntaxError("\(kind): needs a name, as in \(kind):auth_token")
        }
        switch kind {
        case "header":
            guard ValueSyntax.isToken(name) else {
                throw ValueSyntaxError("'\(name)' is not a valid header name")
            }
            let lowered = name.lowercased()
            if lowered == "authorization" {
                throw ValueSyntaxError("use the authorization source for the Authorization header")
            }
            if lowered == "cookie" {
                throw ValueSyntaxError("use cookie:NAME for a cookie")
            }
            guard !self.reservedHeaders.contains(lowered), !lowered.hasPrefix("x-tokengate-") else {
                throw ValueSyntaxError("header \(name) cannot carry a token (the gateway owns or needs it)")
            }
            return .header(name)
        case "cookie":
            guard ValueSyntax.isToken(name) else {
                throw ValueSyntaxError("'\(name)' is not a valid cookie name")
            }
            return .cookie(name)
        case "form":
            guard name.utf8.count <= 128, ValueSyntax.isPrintableASCII(name, allowSpace: false),
                !name.contains(where: { "&=+%#;".contains($0) })
            else {
                throw ValueSyntaxError("'\(name)' is not a usable form field name")
            }
            return .form(name)
        case "json":
            guard name.utf8.count <= 128, !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else {
                throw ValueSyntaxError("'\(name)' is not a usable JSON field name")
            }
            return .json(name)
        default:
            throw ValueSyntaxError(form)
        }
    }

    /// A host name (lower-cased) or IP literal; no port (matching ignores the request's port).
    private func routeHost(_ node: ConfigNode) throws(ConfigurationError) -> String {
        var host = try node.string(maximumLength: 255).lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            guard IPAddressParser.ipv6(host) != nil else {
                throw node.error(.invalidValue, "'\(host)' is not an IPv6 address")
            }
            return host
        }
        if host.hasSuffix(".") {
            host.removeLast()
        }
        guard ValueSyntax.isHostName(host) || IPAddressParser.ipv4(host) != nil else {
            if host.contains(":") {
                throw node.error(.invalidValue, "host without a port: routes match the host name whatever the port")
            }
            throw node.error(.invalidValue, "expected a host name such as api.example.com, got \(node.summary)")
        }
        return host
    }

    /// Starts with `/`; printable ASCII without `?`, `#`, `%`, `\` or dot segments, so the prefix means
    /// exactly the bytes it shows.
    private func pathPrefix(_ node: ConfigNode) throws(ConfigurationError) -> String {
        let prefix = try node.string(maximumLength: 1024)
        guard prefix.hasPrefix("/") else {
            throw node.error(.invalidValue, "must start with /, got \(node.summary)")
        }
        guard ValueSyntax.isPrintableASCII(prefix, allowSpace: false) else {
            throw node.error(.invalidValue, "must be printable ASCII without spaces")
        }
        // Only what a path segment carries as it is (RFC 3986 pchar without `;`): the gateway decodes the
        // escapes of exactly these before routing, so no other spelling of the prefix can miss the route. A
        // `;` never matches (path parameters are refused), `?`, `#` and `%` are not part of a decoded path,
        // and `"<>[]^`{|}` are escaped by clients and left escaped by the gateway.
        if let bad = prefix.utf8.first(where: { $0 != UInt8(ascii: "/") && !PercentEncoding.isPathCharacter($0) }) {
            throw node.error(
                .invalidValue,
                "must not contain '\(Character(Unicode.Scalar(bad)))': a path prefix holds letters, digits, "
                    + "'/' and - . _ ~ ! $ & ' ( ) * + , = : @"
            )
        }
        let segments = prefix.split(separator: "/", omittingEmptySubsequences: false)
        guard !segments.contains(where: { $0 == "." || $0 == ".." }) else {
            throw node.error(.invalidValue, "must not contain . or .. segments")
        }
        return prefix
    }

    // MARK: Token page

    private func tokenPage(_ map: ConfigMapping, item: ConfigNode, environment: RouteEnvironment)
        throws(ConfigurationError) -> TokenPageConfiguration
    {
        let loginNode = try map.required("login")
        let loginMap = try loginNode.mapping(allowed: ["session_cookie", "whoami", "login_url", "return_parameter"])
        let login: TokenPageLogin
        switch (loginMap["session_cookie"], loginMap["whoami"]) {
        case (.some, .some):
            throw loginMap.keyNode("whoami").error(.conflict, "login uses either session_cookie or whoami, not both")
        case (nil, nil):
            throw loginNode.error(.missingKey, "login needs session_cookie: NAME or whoami: { url, user_header }")
        case (.some(let cookieNode), nil):
            let name = try cookieNode.string(maximumLength: 256)
            guard ValueSyntax.isToken(name) else {
                throw cookieNode.error(.invalidValue, "'\(name)' is not a valid cookie name")
            }
            guard environment.hasKeys else {
                throw cookieNode.error(.missingKey, "checking a session cookie needs keys")
            }
            login = .sessionCookie(name)
        case (nil, .some(let whoamiNode)):
            let whoami = try whoamiNode.mapping(allowed: ["url", "user_header", "timeout", "max_in_flight"])
            let urlNode = try whoami.required("url")
            let url = try urlNode.string(maximumLength: 2048)
            do {
                try ValueSyntax.httpURL(url)
            } catch {
                throw urlNode.error(error)
            }
            let headerNode = try whoami.required("user_header")
            let header = try headerNode.string(maximumLength: 256)
            guard ValueSyntax.isToken(header) else {
                throw headerNode.error(.invalidValue, "'\(header)' is not a valid header name")
            }
            login = .whoami(
                WhoamiConfiguration(
                    url: url,
                    userHeader: header,
                    timeout: try whoami["timeout"]?.duration(in: .milliseconds(100)...(.seconds(60))) ?? .seconds(5),
                    maxInFlight: try whoami["max_in_flight"]?.int(in: 1...10_000) ?? 64
                )
            )
        }
        let loginURLNode = try loginMap.required("login_url")
        let loginURL = try loginURLNode.string(maximumLength: 2048)
        if loginURL.hasPrefix("/") {
            guard !loginURL.hasPrefix("//"), !loginURL.hasPrefix("/\\"),
                ValueSyntax.isPrintableASCII(loginURL, allowSpace: false)
            else {
                throw loginURLNode.error(.invalidValue, "expected a path on this site (/login) or an https:// URL")
            }
        } else {
            do {
                try ValueSyntax.httpURL(loginURL, requireHTTPS: true)
            } catch {
                throw loginURLNode.error(.invalidValue, "expected a path on this site (/login) or an https:// URL")
            }
        }
        var page = TokenPageConfiguration(login: login, loginURL: loginURL)
        if let parameterNode = loginMap["return_parameter"] {
            let parameter = try parameterNode.string(maximumLength: 64)
            guard ValueSyntax.isSimpleName(parameter) else {
                throw parameterNode.error(.invalidValue, "may hold letters, digits, _ and - only")
            }
            page.returnParameter = parameter
        }
        if let cookieNode = map["cookie_name"] {
            let name = try cookieNode.string(maximumLength: 256)
            guard ValueSyntax.isToken(name) else {
                throw cookieNode.error(.invalidValue, "'\(name)' is not a valid cookie name")
            }
            page.cookieName = name
        }
        // The api token would be delivered over the browser's login: the next visit of the page would find no
        // session (an api token is not one) and send the user to log in again, and the session cookie would be
        // withheld from every backend under the page's path. Checked after the default (`auth_token`) applies:
        // a site whose login cookie is `auth_token` meets it without writing `cookie_name` at all.
        if case .sessionCookie(let session) = login, session == page.cookieName {
            if let cookieNode = map["cookie_name"] {
                throw cookieNode.error(
                    .invalidValue,
                    "'\(session)' is login.session_cookie too: the api token would overwrite the browser's login; "
                        + "choose another cookie_name (the default is auth_token)")
            }
            throw (loginMap["session_cookie"] ?? loginNode).error(
                .invalidValue,
                "'\(session)' is also the cookie the token is delivered in (cookie_name, default auth_token): the api "
                    + "token would overwrite the browser's login; set another cookie_name")
        }
        if let pathNode = map["cookie_path"] {
            let path = try pathNode.string(maximumLength: 1024)
            guard path.hasPrefix("/"), ValueSyntax.isPrintableASCII(path, allowSpace: false), !path.contains(";") else {
                throw pathNode.error(.invalidValue, "expected a path starting with / (no spaces or ;)")
            }
            page.cookiePath = path
        }
        page.tokenLifetime = try map["token_lifetime"]?.duration(in: .seconds(60)...(.seconds(3650 * 86_400)))
        if let appsNode = map["apps"] {
            for appNode in try appsNode.sequence(maximumCount: 100) {
                let app = try appNode.mapping(
                    allowed: ["name", "callback", "pkce", "confirm", "display_name", "refresh_tokens"])
                let nameNode = try app.required("name")
                let name = try nameNode.string(maximumLength: 64)
                guard ValueSyntax.isSimpleName(name) else {
                    throw nameNode.error(.invalidValue, "app names may hold letters, digits, _ and - only")
                }
                guard !page.apps.contains(where: { $0.name == name }) else {
                    throw nameNode.error(.duplicate, "app \(name) is listed twice")
                }
                let callbackNode = try app.required("callback")
                let callback = try callbackNode.string(maximumLength: 2048)
                do {
                    try Self.checkCallback(callback)
                } catch {
                    throw callbackNode.error(error)
                }
                var pkce = TokenPagePKCE.optional
                if let pkceNode = app["pkce"] {
                    let value = try pkceNode.string(maximumLength: 64)
                    guard let parsed = TokenPagePKCE(rawValue: value) else {
                        throw pkceNode.error(.invalidValue, "pkce is optional or required, got '\(value)'")
                    }
                    pkce = parsed
                }
                var displayName: String?
                if let displayNode = app["display_name"] {
                    let text = try displayNode.string(maximumLength: 100)
                    // Shown on the confirmation page (HTML-escaped there): one line of visible text. Line and
                    // paragraph separators break the line as a control character does.
                    guard text.first?.isWhitespace == false, text.last?.isWhitespace == false,
                        !text.unicodeScalars.contains(where: {
                            $0.properties.generalCategory == .control || $0.value == 0x2028 || $0.value == 0x2029
                        })
                    else {
                        throw displayNode.error(
                            .invalidValue, "display_name must be one line of text without spaces at its ends")
                    }
                    // Bidirectional controls reorder what the user reads: "Example" + U+202E could show the
                    // name of another app, or carry the page's text around it.
                    if let bidi = text.unicodeScalars.first(where: { Self.bidiControls.contains($0.value) }) {
                        throw displayNode.error(
                            .invalidValue,
                            "display_name must not hold bidirectional controls (it holds U+"
                                + String(bidi.value, radix: 16, uppercase: true) + ")")
                    }
                    displayName = text
                }
                var refreshTokens: TokenPageRefreshTokens?
                if let refreshNode = app["refresh_tokens"] {
                    // Only for the code flow: a token in the callback's fragment has no redemption to answer a
                    // refresh token in, and a refresh token there would be readable by any app claiming the scheme.
                    guard pkce == .required else {
                        throw refreshNode.error(.invalidValue, "refresh_tokens needs pkce: required (the code flow)")
                    }
                    let refresh = try refreshNode.mapping(allowed: ["access_token_lifetime", "refresh_token_lifetime"])
                    var settings = TokenPageRefreshTokens()
                    if let node = refresh["access_token_lifetime"] {
                        settings.accessTokenLifetime = try node.duration(in: .seconds(60)...(.seconds(86_400)))
                    }
                    if let node = refresh["refresh_token_lifetime"] {
                        settings.refreshTokenLifetime = try node.duration(in: .seconds(300)...(.seconds(3650 * 86_400)))
                    }
                    refreshTokens = settings
                }
                page.apps.append(
                    TokenPageApp(
                        name: name, callback: callback, pkce: pkce, confirm: try app["confirm"]?.bool(),
                        displayName: displayName, refreshTokens: refreshTokens)
                )
            }
        }
        return page
    }

    /// `connected_apps: PATH`: a path the route serves (under its `path_prefix`), without query or fragment, and a
    /// store that keeps devices (the page lists them).
    private func connectedAppsPath(_ node: ConfigNode, prefix: String, environment: RouteEnvironment)
        throws(ConfigurationError) -> String
    {
        let path = try node.string(maximumLength: 1024)
        guard path.hasPrefix("/"), !path.hasPrefix("//"), ValueSyntax.isPrintableASCII(path, allowSpace: false),
            !path.contains("?"), !path.contains("#"), !path.contains("%"), !path.contains(";")
        else {
            throw node.error(.invalidValue, "expected a path starting with / (no spaces, ?, #, % or ;)")
        }
        guard path.hasPrefix(prefix), path != prefix else {
            throw node.error(.invalidValue, "'\(path)' must be a path under the route's path_prefix \(prefix)")
        }
        guard !path.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else {
            throw node.error(.invalidValue, "must not contain . or .. segments")
        }
        guard environment.keepsDevices else {
            throw node.error(
                .conflict, "the connected-apps page lists devices: it needs a sqlite or postgres cutoff store (a JSON file keeps none)")
        }
        return path
    }

    /// `mint: ISSUER`: a `kind: session_cookie` issuer whose cookies carry the api-only flag (the page mints api
    /// tokens: without the flag its cookie would be a full browser login), in a format whose login check needs
    /// nothing but the fields (not Django's, which checks the session auth hash), and no app with refresh tokens
    /// (their access tokens are JWTs with a device).
    private func mintIssuer(_ node: ConfigNode, page: TokenPageConfiguration, environment: RouteEnvironment)
        throws(ConfigurationError) -> String
    {
        let name = try node.string(maximumLength: 64)
        guard let issuers = environment.sessionCookieIssuers else { return name }  // reported with `issuers:`
        guard let issuer = issuers[name] else {
            throw node.error(.invalidValue, "'\(name)' is not an issuers: item of kind session_cookie")
        }
        guard issuer.fields.apiOnly != nil else {
            throw node.error(
                .invalidValue,
                "the token page mints api tokens: issuer \(name) needs fields.api_only, or its cookies would be browser logins")
        }
        switch issuer.format {
        case .flask, .rails, .cookieSession:
            // The page's answer names the cookie (`token_type=cookie`) and, for cookie_session, its `.sig`.
            break
        case .django:
            // Django's login check compares `_auth_user_hash` with the user's session auth hash, which derives
            // from the password hash: a value only the site knows, so its whoami answer must hand it over.
            guard page.mintWhoamiHeaders.contains(where: { $0.pointer == "/_auth_user_hash" }) else {
                throw node.error(
                    .invalidValue,
                    "Django's login check needs the user's session auth hash: set mint_whoami: { /_auth_user_hash: HEADER }")
            }
            guard page.mintConstants.contains(where: { $0.pointer == "/_auth_user_backend" }) else {
                throw node.error(
                    .invalidValue,
                    "Django reads a login only with its backend: set mint_set: { /_auth_user_backend: BACKEND_PATH }")
            }
        }
        if let app = page.apps.first(where: { $0.refreshTokens != nil }) {
            throw node.error(
                .conflict, "app \(app.name) has refresh_tokens, whose access tokens are the gateway's JWTs: not with mint")
        }
        return name
    }

    /// `mint_whoami` or `mint_set`: JSON pointer (`/a/b`, at most 16 of them) → a header name, or a string.
    private func siteValues(_ node: ConfigNode, headers: Bool) throws(ConfigurationError) -> [TokenPageConfiguration.SiteValue] {
        let mapping = try node.anyMapping()
        guard mapping.entries.count <= 16 else { throw node.error(.tooLarge, "at most 16 members") }
        var values: [TokenPageConfiguration.SiteValue] = []
        for entry in mapping.entries {
            guard entry.key.hasPrefix("/"), entry.key.utf8.count <= 256 else {
                throw entry.keyNode.error(.invalidValue, "a member is a JSON pointer such as /_auth_user_hash")
            }
            let value = try entry.value.string(maximumLength: headers ? 64 : 1024)
            if headers {
                guard !value.isEmpty, value.utf8.allSatisfy({
                    (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2D
                }) else {
                    throw entry.value.error(.invalidValue, "'\(value)' is not a header name")
                }
            }
            values.append(.init(pointer: entry.key, value: headers ? value.lowercased() : value))
        }
        return values
    }

    /// The parameters the token page puts into a callback, in its fragment or its query.
    static let callbackParameters = [
        "access_token", "token_type", "expires_in", "expires_at", "state", "status", "message", "code", "error",
        "cookie_name", "cookie_signature_name", "cookie_signature",
    ]

    /// A callback is a custom-scheme URL (`myapp://token`) or an https URL (a claimed link); never a scheme a
    /// browser would run or render (`javascript:`, `data:`), never plain http, and without a fragment, since the
    /// token is delivered in the fragment.
    static func checkCallback(_ url: String) throws(ValueSyntaxError) {
        guard let colon = url.firstIndex(of: ":") else {
            throw ValueSyntaxError("expected a callback URL such as myapp://token, got \(url)")
        }
        let scheme = url[..<colon].lowercased()
        let validScheme =
            scheme.first.map({ $0.isASCII && $0.isLetter }) == true
            && scheme.utf8.allSatisfy { byte in
                (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == UInt8(ascii: "+")
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            }
        guard validScheme else {
            throw ValueSyntaxError("'\(scheme)' is not a URL scheme")
        }
        guard
            ![
                "javascript", "data", "vbscript", "file", "blob", "about", "http", "ws", "wss", "ftp", "view-source",
                "filesystem", "mhtml", "jar",
            ].contains(scheme)
        else {
            throw ValueSyntaxError("callback scheme \(scheme) is not allowed (use a custom scheme or https)")
        }
        guard url.count > scheme.count + 1, ValueSyntax.isPrintableASCII(url, allowSpace: false) else {
            throw ValueSyntaxError("callbacks must be printable ASCII without spaces")
        }
        guard !url.contains("#") else {
            throw ValueSyntaxError("callbacks must not have a fragment (the token is delivered in it)")
        }
        // The page adds its own parameters to the callback; one already in it would be there twice (`state` from
        // the configuration and the app's own), which the client library refuses and other parsers read either way.
        if let question = url.firstIndex(of: "?") {
            for pair in url[url.index(after: question)...].split(separator: "&") {
                let raw = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
                // Compared as a parser reads it: `st%61te` is `state`. A name that does not decode is refused too.
                guard let name = PercentEncoding.decode(raw.utf8)?.lowercased() else {
                    throw ValueSyntaxError("the callback's query holds a malformed escape in \(raw)")
                }
                if Self.callbackParameters.contains(name) {
                    let all = Self.callbackParameters.joined(separator: ", ")
                    throw ValueSyntaxError("the callback's query must not hold \(name): the token page sets it (\(all))")
                }
            }
        }
        if scheme == "https" {
            try ValueSyntax.httpURL(url, requireHTTPS: true)
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// MARK: Traffic policy: IP rules, CORS, rate limits and the PROXY protocol.

extension ConfigurationDecoder {
    /// A route's `ip_rules`, `rate_limits` and (proxy routes) `cors`, set on the route decoded from `map`.
    func trafficPolicy(_ map: ConfigMapping, into route: inout RouteConfiguration) throws(ConfigurationError) {
        if let node = map["ip_rules"] {
            route.ipRules = try self.ipRules(node)
        }
        if let node = map["rate_limits"] {
            var limits: [RateLimit] = []
            for item in try node.sequence(maximumCount: 3) {
                let limit = try self.rateLimit(item, defaultKey: nil)
                guard !limits.contains(where: { $0.key == limit.key }) else {
                    throw item.error(.duplicate, "a second limit keyed by \(limit.key.rawValue)")
                }
                limits.append(limit)
            }
            route.rateLimits = limits
        }
        if let node = map["cors"] {
            route.cors = try self.cors(node)
        }
    }

    /// `{ allow: [CIDR…], deny: [CIDR…] }`, at least one of them.
    func ipRules(_ node: ConfigNode) throws(ConfigurationError) -> IPRules {
        let map = try node.mapping(allowed: ["allow", "deny"])
        guard map.has("allow") || map.has("deny") else {
            throw node.error(.missingKey, "ip_rules needs allow, deny or both (lists of addresses or networks)")
        }
        return IPRules(
            allow: try map["allow"].map { node throws(ConfigurationError) in try self.networks(node) } ?? [],
            deny: try map["deny"].map { node throws(ConfigurationError) in try self.networks(node) } ?? []
        )
    }

    /// A listener's `proxy_protocol: { from: [CIDR…] }`: the load balancers allowed to send the header.
    func proxyProtocol(_ node: ConfigNode) throws(ConfigurationError) -> [CIDR] {
        let map = try node.mapping(allowed: ["from"])
        guard let from = map["from"] else {
            throw node.error(
                .missingKey,
                "proxy_protocol needs from: the addresses of the load balancers that send the PROXY header"
            )
        }
        let networks = try self.networks(from)
        guard !networks.isEmpty else {
            throw from.error(.missingKey, "proxy_protocol.from needs at least one address or network")
        }
        return networks
    }

    /// A list of addresses or networks, as `trusted_proxies` takes them.
    func networks(_ node: ConfigNode) throws(ConfigurationError) -> [CIDR] {
        try self.trustedProxies(node)
    }

    /// `{ origins: […], methods: […], headers: […], expose_headers: […], credentials: bool, max_age: duration }`.
    func cors(_ node: ConfigNode) throws(ConfigurationError) -> CORSConfiguration {
        let map = try node.mapping(allowed: ["origins", "methods", "headers", "expose_headers", "credentials", "max_age"])
        let originsNode = try map.required("origins")
        var origins: [String] = []
        for item in try originsNode.sequence(maximumCount: 256) {
            let text = try item.string(maximumLength: 512)
            let origin = text.lowercased()
            guard origin == "*" || Self.isSerializedOrigin(origin) else {
                throw item.error(
                    .invalidValue,
                    "expected an origin such as https://app.example or https://app.example:8443 (scheme and host, "
                        + "no path), or *, got \(item.summary)"
                )
            }
            guard !origins.contains(origin) else {
                throw item.error(.duplicate, "\(origin) is listed twice")
            }
            origins.append(origin)
        }
        guard !origins.isEmpty else {
            throw originsNode.error(.missingKey, "cors.origins needs at least one origin")
        }
        let credentials = try map["credentials"]?.bool() ?? false
        if credentials, origins.contains("*") {
            throw map.keyNode("credentials").error(
                .insecure,
                "credentials: true with origins: [\"*\"] would let every site use the user's cookies; list the origins"
            )
        }
        var methods = ["GET", "HEAD", "POST"]
        if let methodsNode = map["methods"] {
            methods = []
            for item in try methodsNode.sequence(maximumCount: 32) {
                let method = try item.string(maximumLength: 32).uppercased()
                guard ValueSyntax.isToken(method), method != "CONNECT", method != "TRACE" else {
                    throw item.error(.invalidValue, "expected an HTTP method name (not CONNECT or TRACE), got \(item.summary)")
                }
                if !methods.contains(method) { methods.append(method) }
            }
        }
        return CORSConfiguration(
            origins: origins,
            methods: methods,
            headers: try map["headers"].map { node throws(ConfigurationError) in try self.fieldNames(node) } ?? [],
            exposeHeaders: try map["expose_headers"].map { node throws(ConfigurationError) in try self.fieldNames(node) }
                ?? [],
            credentials: credentials,
            maxAge: try map["max_age"]?.duration(in: .zero...(.seconds(86_400)))
        )
    }

    private func fieldNames(_ node: ConfigNode) throws(ConfigurationError) -> [String] {
        var names: [String] = []
        for item in try node.sequence(maximumCount: 64) {
            let name = try item.string(maximumLength: 128).lowercased()
            guard ValueSyntax.isToken(name) else {
                throw item.error(.invalidValue, "expected a header name, got \(item.summary)")
            }
            if !names.contains(name) { names.append(name) }
        }
        return names
    }

    /// `scheme://host[:port]` as a browser serializes an `Origin` (RFC 6454 §6.2), lower-cased already.
    static func isSerializedOrigin(_ origin: String) -> Bool {
        let rest: Substring
        if origin.hasPrefix("https://") {
            rest = origin.dropFirst(8)
        } else if origin.hasPrefix("http://") {
            rest = origin.dropFirst(7)
        } else {
            return false
        }
        var host = rest
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            let port = rest[rest.index(after: colon)...]
            guard !port.isEmpty, port.count <= 5, port.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let number = Int(port), (1...65_535).contains(number), !port.hasPrefix("0")
            else {
                return false
            }
            host = rest[..<colon]
        }
        if host.hasPrefix("["), host.hasSuffix("]") {
            return IPAddressParser.ipv6(host.dropFirst().dropLast()) != nil
        }
        return !host.isEmpty && ValueSyntax.isHostName(String(host))
    }

    /// One bucket: `{ key: user|client|route, rate: N/s|N/m|N/h, burst: N }`. `defaultKey` is the key where the
    /// setting has a fixed one (the gateway-wide guards, per client).
    func rateLimit(_ node: ConfigNode, defaultKey: RateLimit.Key?) throws(ConfigurationError) -> RateLimit {
        let map = try node.mapping(allowed: defaultKey == nil ? ["key", "rate", "burst"] : ["rate", "burst"])
        let key: RateLimit.Key
        if let defaultKey {
            key = defaultKey
        } else {
            key = try map.required("key").choice(RateLimit.Key.self)
        }
        let rateNode = try map.required("rate")
        let rateText = try rateNode.scalar(expected: "a rate such as 10/s, 600/m or 3600/h")
        guard let perSecond = Self.rate(rateText) else {
            throw rateNode.error(
                .invalidValue,
                "expected a rate such as 10/s, 600/m or 3600/h (1 to 1000000 per unit), got \(rateNode.summary)"
            )
        }
        let burst = try map["burst"]?.int(in: 1...1_000_000) ?? max(1, Int(perSecond.rounded(.up)))
        return RateLimit(key: key, perSecond: perSecond, burst: burst)
    }

    /// `N/s`, `N/m` or `N/h` in tokens per second.
    static func rate(_ text: String) -> Double? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[0].count <= 7,
            parts[0].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let count = Int(parts[0]), (1...1_000_000).contains(count)
        else {
            return nil
        }
        switch parts[1] {
        case "s": return Double(count)
        case "m": return Double(count) / 60
        case "h": return Double(count) / 3600
        default: return nil
        }
    }

    /// The top-level `rate_limits: { failed_tokens: …|off, token_page: …|off, max_keys: N }`.
    func rateLimitSettings(_ node: ConfigNode) throws(ConfigurationError) -> RateLimitSettings {
        let map = try node.mapping(allowed: ["failed_tokens", "token_page", "max_keys"])
        func guardLimit(_ key: String, _ fallback: RateLimit) throws(ConfigurationError) -> RateLimit? {
            guard let node = map[key] else { return fallback }
            if node.isScalar, try node.scalar() == "off" { return nil }
            return try self.rateLimit(node, defaultKey: .client)
        }
        return RateLimitSettings(
            failedTokens: try guardLimit("failed_tokens", RateLimitSettings.defaultFailedTokens),
            tokenPage: try guardLimit("token_page", RateLimitSettings.defaultTokenPage),
            maxKeys: try map["max_keys"]?.int(in: 1000...10_000_000) ?? 100_000
        )
    }
}

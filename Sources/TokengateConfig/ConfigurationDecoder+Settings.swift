//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// MARK: Limits, realm, proxies, logging, HTTP/2, HSTS

extension ConfigurationDecoder {
    func limits(_ node: ConfigNode) throws(ConfigurationError) -> LimitsConfiguration {
        let map = try node.mapping(allowed: [
            "max_header_bytes", "max_uri_bytes", "max_body_bytes", "max_token_body_bytes", "max_connections",
            "idle_timeout", "request_header_timeout", "drain_timeout", "request_body_timeout", "request_body_min_rate",
            "token_body_memory", "response_buffer_per_connection", "response_buffer_total", "response_min_rate",
            "response_send_timeout",
        ])
        let kib = 1024
        let mib = 1024 * kib
        var limits = LimitsConfiguration()
        limits.maxHeaderBytes = try map["max_header_bytes"]?.size(in: kib...mib) ?? limits.maxHeaderBytes
        limits.maxURIBytes = try map["max_uri_bytes"]?.size(in: 256...mib) ?? limits.maxURIBytes
        limits.maxBodyBytes = try map["max_body_bytes"]?.size(in: 0...(64 * 1024 * mib)) ?? limits.maxBodyBytes
        limits.maxTokenBodyBytes =
            try map["max_token_body_bytes"]?.size(in: kib...(16 * mib))
            ?? limits.maxTokenBodyBytes
        limits.maxConnections = try map["max_connections"]?.int(in: 1...1_000_000) ?? limits.maxConnections
        limits.idleTimeout = try map["idle_timeout"]?.duration(in: .seconds(1)...(.seconds(3600))) ?? limits.idleTimeout
        limits.requestHeaderTimeout =
            try map["request_header_timeout"]?.duration(in: .seconds(1)...(.seconds(300)))
            ?? limits.requestHeaderTimeout
        limits.drainTimeout = try map["drain_timeout"]?.duration(in: .zero...(.seconds(3600))) ?? limits.drainTimeout
        limits.requestBodyTimeout =
            try map["request_body_timeout"]?.duration(in: .seconds(1)...(.seconds(3600))) ?? limits.requestBodyTimeout
        limits.requestBodyMinRate = try map["request_body_min_rate"]?.size(in: 0...(64 * mib)) ?? limits.requestBodyMinRate
        limits.tokenBodyMemory = try map["token_body_memory"]?.size(in: kib...(64 * 1024 * mib)) ?? limits.tokenBodyMemory
        limits.responseBufferPerConnection =
            try map["response_buffer_per_connection"]?.size(in: 0...(1024 * mib)) ?? limits.responseBufferPerConnection
        limits.responseBufferTotal =
            try map["response_buffer_total"]?.size(in: 0...(64 * 1024 * mib)) ?? limits.responseBufferTotal
        limits.responseMinRate = try map["response_min_rate"]?.size(in: 0...(64 * mib)) ?? limits.responseMinRate
        limits.responseSendTimeout =
            try map["response_send_timeout"]?.duration(in: .seconds(1)...(.seconds(3600))) ?? limits.responseSendTimeout
        if limits.tokenBodyMemory < limits.maxTokenBodyBytes {
            throw (map["token_body_memory"] ?? node).error(
                .conflict,
                "token_body_memory (\(limits.tokenBodyMemory)) cannot be less than max_token_body_bytes "
                    + "(\(limits.maxTokenBodyBytes)): no token body could be read whole"
            )
        }
        if limits.maxURIBytes > limits.maxHeaderBytes {
            throw (map["max_uri_bytes"] ?? node).error(
                .conflict,
                "max_uri_bytes (\(limits.maxURIBytes)) cannot exceed max_header_bytes (\(limits.maxHeaderBytes)): "
                    + "the request line is part of the head"
            )
        }
        return limits
    }

    /// The realm goes inside a quoted-string of `WWW-Authenticate`, so `"` and `\` are refused rather than
    /// escaped: there is no reason for a realm to need them.
    func realm(_ node: ConfigNode) throws(ConfigurationError) -> String {
        let realm = try node.string(maximumLength: 256)
        guard ValueSyntax.isPrintableASCII(realm, allowSpace: true), !realm.contains("\""), !realm.contains("\\") else {
            throw node.error(.invalidValue, "the realm must be printable ASCII without \" or \\")
        }
        return realm
    }

    func trustedProxies(_ node: ConfigNode) throws(ConfigurationError) -> [CIDR] {
        var networks: [CIDR] = []
        for item in try node.sequence(maximumCount: 1000) {
            let text = try item.string(maximumLength: 64)
            guard let network = CIDR(text) else {
                throw item.error(
                    .invalidValue,
                    "expected an IP address or a network such as 10.0.0.0/8 (host bits zero), got \(item.summary)"
                )
            }
            guard !networks.contains(network) else {
                throw item.error(.duplicate, "\(network) is listed twice")
            }
            networks.append(network)
        }
        return networks
    }

    func log(_ node: ConfigNode) throws(ConfigurationError) -> LogConfiguration {
        let map = try node.mapping(allowed: ["level", "access_log", "format"])
        return LogConfiguration(
            level: try map["level"]?.choice(LogLevelName.self) ?? .info,
            accessLog: try map["access_log"]?.bool() ?? true,
            format: try map["format"]?.choice(LogFormat.self) ?? .auto
        )
    }

    func http2(_ node: ConfigNode) throws(ConfigurationError) -> HTTP2Configuration {
        let map = try node.mapping(allowed: ["enabled", "max_concurrent_streams", "initial_window_size"])
        return HTTP2Configuration(
            enabled: try map["enabled"]?.bool() ?? true,
            maxConcurrentStreams: try map["max_concurrent_streams"]?.int(in: 1...10_000) ?? 100,
            initialWindowSize: try map["initial_window_size"]?.int(in: 1...2_147_483_647) ?? 65_535
        )
    }

    func hsts(_ node: ConfigNode) throws(ConfigurationError) -> HSTSConfiguration {
        let map = try node.mapping(allowed: ["max_age", "include_subdomains", "preload"])
        let hsts = HSTSConfiguration(
            maxAge: try map["max_age"]?.duration(in: .zero...(.seconds(3650 * 86_400))) ?? .seconds(365 * 86_400),
            includeSubdomains: try map["include_subdomains"]?.bool() ?? false,
            preload: try map["preload"]?.bool() ?? false
        )
        if hsts.preload, !hsts.includeSubdomains || hsts.maxAge < .seconds(365 * 86_400) {
            throw map.keyNode("preload").error(
                .conflict,
                "preload requires include_subdomains: true and max_age of at least 365d"
            )
        }
        return hsts
    }
}

// MARK: Forward auth

extension ConfigurationDecoder {
    /// A listener's `forward_auth:` section (``ForwardAuthConfiguration``). `address` is the listener's: plain
    /// HTTP is accepted only where no other machine can connect, since the check answers carry identities and
    /// the check requests carry tokens.
    func forwardAuth(_ node: ConfigNode, address: SocketAddressSpec) throws(ConfigurationError) -> ForwardAuthConfiguration {
        let map = try node.mapping(allowed: ["headers", "trusted_peers", "path_prefix", "tls"])
        let headers = try map.required("headers").choice(ForwardAuthHeaders.self)
        let peersNode = try map.required("trusted_peers")
        let peers = try self.trustedProxies(peersNode)
        guard !peers.isEmpty else {
            throw peersNode.error(.missingKey, "list the front proxies' addresses (127.0.0.1/32, say): no other peer is believed")
        }
        var pathPrefix = ""
        if let prefixNode = map["path_prefix"] {
            guard headers == .envoy else {
                throw map.keyNode("path_prefix").error(.conflict, "only for headers: envoy (ext_authz's path_prefix)")
            }
            pathPrefix = try prefixNode.string(maximumLength: 256)
            guard pathPrefix.hasPrefix("/"), !pathPrefix.hasSuffix("/"), ValueSyntax.isPrintableASCII(pathPrefix, allowSpace: false),
                !pathPrefix.contains("?"), !pathPrefix.contains("%")
            else {
                throw prefixNode.error(.invalidValue, "a path such as /check: starting with /, not ending with /, no query")
            }
        }
        let tls = try map["tls"].map { node throws(ConfigurationError) in try self.tls(node) }
        if tls == nil, !address.isLoopback {
            throw node.error(
                .insecure,
                "the check listener on \(address) is reachable from other machines: it needs tls (plain HTTP only on loopback)"
            )
        }
        return ForwardAuthConfiguration(headers: headers, trustedPeers: peers, pathPrefix: pathPrefix, tls: tls)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateHTTP

// MARK: Upstreams

extension ConfigurationDecoder {
    /// The upstreams that decode; each one that does not adds its problem to `problems` and its name to
    /// `invalid` (so that a route naming it is not also reported as naming an unknown upstream).
    func upstreams(
        _ node: ConfigNode,
        problems: inout [ConfigurationError],
        invalid: inout Set<String>
    ) throws(ConfigurationError) -> [String: UpstreamConfiguration] {
        let map = try node.anyMapping()
        guard map.entries.count <= 256 else {
            throw node.error(.tooLarge, "at most 256 upstreams")
        }
        var upstreams: [String: UpstreamConfiguration] = [:]
        for entry in map.entries {
            do throws(ConfigurationError) {
                guard ValueSyntax.isSimpleName(entry.key) else {
                    throw entry.keyNode.error(.invalidValue, "upstream names may hold letters, digits, _ and - only")
                }
                upstreams[entry.key] = try self.upstream(entry.value, name: entry.key)
            } catch {
                problems.append(error)
                invalid.insert(entry.key)
            }
        }
        return upstreams
    }

    private func upstream(_ node: ConfigNode, name: String) throws(ConfigurationError) -> UpstreamConfiguration {
        let map = try node.mapping(allowed: [
            "targets", "connect_timeout", "response_timeout", "idle_timeout", "max_connections_per_target", "retries",
            "ejection", "tls", "keep_alive", "secret_header", "health_check",
        ])
        let targetsNode = try map.required("targets")
        var targets: [UpstreamTarget] = []
        for item in try targetsNode.sequence(maximumCount: 256) {
            let text = try item.string(maximumLength: 300)
            let target: UpstreamTarget
            do {
                target = try ValueSyntax.upstreamTarget(text)
            } catch {
                throw item.error(error)
            }
            guard !targets.contains(target) else {
                throw item.error(.duplicate, "\(target) is listed twice")
            }
            if let first = targets.first, first.scheme != target.scheme {
                throw item.error(.conflict, "all targets of an upstream use the same scheme (\(first.scheme.rawValue))")
            }
            targets.append(target)
        }
        guard let scheme = targets.first?.scheme else {
            throw targetsNode.error(.missingKey, "an upstream needs at least one target")
        }
        var tls: UpstreamTLSConfiguration?
        if let tlsNode = map["tls"] {
            guard scheme == .https else {
                throw map.keyNode("tls").error(.conflict, "tls settings need https:// targets")
            }
            let tlsMap = try tlsNode.mapping(allowed: ["ca_file", "verify", "server_name", "client_certificate"])
            var serverName: String?
            if let nameNode = tlsMap["server_name"] {
                let name = try nameNode.string(maximumLength: 253).lowercased()
                guard ValueSyntax.isHostName(name) else {
                    throw nameNode.error(.invalidValue, "expected a host name, got \(nameNode.summary)")
                }
                serverName = name
            }
            tls = UpstreamTLSConfiguration(
                caFile: try tlsMap["ca_file"]?.path(mustExist: true),
                verify: try tlsMap["verify"]?.bool() ?? true,
                serverName: serverName,
                clientCertificate: try tlsMap["client_certificate"].map(self.clientCertificate)
            )
        } else if scheme == .https {
            tls = UpstreamTLSConfiguration()
        }
        var ejection = EjectionConfiguration()
        if let ejectionNode = map["ejection"] {
            let ejectionMap = try ejectionNode.mapping(allowed: ["consecutive_failures", "duration"])
            ejection.consecutiveFailures =
                try ejectionMap["consecutive_failures"]?.int(in: 1...1000)
                ?? ejection.consecutiveFailures
            ejection.duration =
                try ejectionMap["duration"]?.duration(in: .seconds(1)...(.seconds(3600)))
                ?? ejection.duration
        }
        return UpstreamConfiguration(
            name: name,
            targets: targets,
            connectTimeout: try map["connect_timeout"]?.duration(in: .milliseconds(10)...(.seconds(300)))
                ?? .seconds(2),
            responseTimeout: try map["response_timeout"]?.duration(in: .milliseconds(100)...(.seconds(3600)))
                ?? .seconds(30),
            idleTimeout: try map["idle_timeout"]?.duration(in: .seconds(1)...(.seconds(3600))) ?? .seconds(60),
            maxConnectionsPerTarget: try map["max_connections_per_target"]?.int(in: 1...100_000) ?? 512,
            retries: try map["retries"]?.int(in: 0...5) ?? 1,
            ejection: ejection,
            tls: tls,
            keepAlive: try map["keep_alive"]?.bool() ?? true,
            secretHeader: try map["secret_header"].map(self.secretHeader),
            healthCheck: try map["health_check"].map(self.healthCheck)
        )
    }

    /// `tls.client_certificate: { cert: FILE, key: FILE }`: both must exist; that they parse and belong together
    /// is checked when the TLS context is built (start, reload, `check-config`), naming the setting.
    private func clientCertificate(_ node: ConfigNode) throws(ConfigurationError) -> CertificateConfiguration {
        let map = try node.mapping(allowed: ["cert", "key"])
        return CertificateConfiguration(
            cert: try map.required("cert").path(mustExist: true),
            key: try map.required("key").path(mustExist: true)
        )
    }

    /// The fields a secret header may not be: those the gateway sets or removes itself (framing, `Host`,
    /// hop-by-hop and forwarding fields, the identity fields), and `Authorization` and `Cookie`, where a client's
    /// token may travel to the backend (`forward_token: keep`).
    static let reservedSecretHeaderNames: Set<String> = Set(
        (ProxyFieldRules.hopByHopNames + ProxyFieldRules.forwardingFieldNames.map(\.description)
            + ProxyFieldRules.protectedNames.map(\.description)).map { $0.lowercased() }
            + [
                "expect", "cookie", "authorization", "x-tokengate-user", "x-tokengate-token-kind",
                "x-tokengate-issued-at", "x-tokengate-key-id",
            ]
    )

    /// `secret_header: { name: X-Tokengate-Secret, value_file: FILE }`. The value is read (and checked) when
    /// the runtime is built, so that a reload rereads it; here only the file's existence is checked.
    private func secretHeader(_ node: ConfigNode) throws(ConfigurationError) -> SecretHeaderConfiguration {
        let map = try node.mapping(allowed: ["name", "value_file"])
        let nameNode = try map.required("name")
        let name = try nameNode.string(maximumLength: 128)
        guard ValueSyntax.isToken(name) else {
            throw nameNode.error(.invalidValue, "expected a header field name, got \(nameNode.summary)")
        }
        guard !name.contains("_") else {
            // Dropped from every request as nginx does (CGI maps `_` and `-` to the same variable).
            throw nameNode.error(.invalidValue, "a header name with _ is dropped on its way to backends: use -")
        }
        guard !Self.reservedSecretHeaderNames.contains(name.lowercased()) else {
            throw nameNode.error(.conflict, "\(name) is a field the gateway sets or forwards itself: choose another name")
        }
        return SecretHeaderConfiguration(name: name, valueFile: try map.required("value_file").path(mustExist: true))
    }

    /// `health_check: { path, interval, timeout, expected_status, healthy_threshold, unhealthy_threshold }`.
    private func healthCheck(_ node: ConfigNode) throws(ConfigurationError) -> HealthCheckConfiguration {
        let map = try node.mapping(allowed: [
            "path", "interval", "timeout", "expected_status", "healthy_threshold", "unhealthy_threshold",
        ])
        let pathNode = try map.required("path")
        let path = try pathNode.string(maximumLength: 1024)
        guard path.hasPrefix("/"), ValueSyntax.isPrintableASCII(path, allowSpace: false), !path.contains("#") else {
            throw pathNode.error(.invalidValue, "expected a path such as /healthz (printable ASCII, no spaces or #), got \(pathNode.summary)")
        }
        var check = HealthCheckConfiguration(path: path)
        check.interval = try map["interval"]?.duration(in: .milliseconds(100)...(.seconds(3600))) ?? check.interval
        let timeoutNode = map["timeout"]
        check.timeout = try timeoutNode?.duration(in: .milliseconds(10)...(.seconds(300))) ?? min(check.timeout, check.interval)
        guard check.timeout <= check.interval else {
            throw (timeoutNode ?? node).error(
                .conflict, "timeout (\(ValueSyntax.format(check.timeout))) must not be longer than interval (\(ValueSyntax.format(check.interval)))")
        }
        if let statusNode = map["expected_status"] {
            check.expectedStatus = try Self.expectedStatus(statusNode)
        }
        check.healthyThreshold = try map["healthy_threshold"]?.int(in: 1...100) ?? check.healthyThreshold
        check.unhealthyThreshold = try map["unhealthy_threshold"]?.int(in: 1...100) ?? check.unhealthyThreshold
        return check
    }

    /// `expected_status`: a status (`200`), a range (`"200-399"`), or a list of either.
    private static func expectedStatus(_ node: ConfigNode) throws(ConfigurationError) -> [ClosedRange<Int>] {
        func one(_ item: ConfigNode) throws(ConfigurationError) -> ClosedRange<Int> {
            let text = try item.scalar(expected: "a status or a range such as 200-399")
            let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count),
                let low = Int(parts[0]),
                let high = Int(parts[parts.count - 1]),
                (100...599).contains(low), (100...599).contains(high), low <= high
            else {
                throw item.error(.invalidValue, "expected a status (100-599) or a range such as 200-399, got \(item.summary)")
            }
            return low...high
        }
        if node.isSequence {
            let items = try node.sequence(maximumCount: 50)
            guard !items.isEmpty else { throw node.error(.invalidValue, "list at least one status") }
            var ranges: [ClosedRange<Int>] = []
            for item in items { ranges.append(try one(item)) }
            return ranges
        }
        return [try one(node)]
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

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
            "ejection", "tls", "keep_alive",
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
            let tlsMap = try tlsNode.mapping(allowed: ["ca_file", "verify", "server_name"])
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
                serverName: serverName
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
            keepAlive: try map["keep_alive"]?.bool() ?? true
        )
    }
}

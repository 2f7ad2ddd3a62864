//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOConcurrencyHelpers
import NIOCore
import Prometheus
import TokengateConfig
import TokengateTokens

/// The process's fetched key sets, by ``RemoteKeySource/Identity``: a reload that keeps an entry keeps its
/// source, with its keys and its schedule (a SIGHUP neither refetches every set nor serves `503` meanwhile); a
/// new entry gets a new source, an entry that left the configuration has its source stopped.
final class RemoteKeySets: Sendable {
    private let sources = NIOLockedValueBox<[RemoteKeySource.Identity: RemoteKeySource]>([:])
    private let group: any EventLoopGroup
    private let logger: Logger
    private let registry: MetricsRegistry

    init(group: any EventLoopGroup, logger: Logger, registry: MetricsRegistry) {
        self.group = group
        self.logger = logger
        self.registry = registry
    }

    /// The identities of a configuration's fetched key entries, in order: the top-level keys', then each JWT
    /// issuer's (by name). An entry two issuers share is one source.
    static func identities(_ configuration: GatewayConfiguration) -> [RemoteKeySource.Identity] {
        var all = Self.identities(keys: configuration.keys, algorithms: configuration.tokens.algorithms)
        for name in configuration.jwtIssuers.keys.sorted() {
            let issuer = configuration.jwtIssuers[name]!
            for identity in Self.identities(keys: issuer.keys, algorithms: issuer.tokens.algorithms)
            where !all.contains(identity) {
                all.append(identity)
            }
        }
        return all
    }

    /// The identities of one issuer's fetched key entries, in order.
    static func identities(keys: [KeySourceConfiguration], algorithms: [TokenAlgorithm]) -> [RemoteKeySource.Identity] {
        keys.compactMap { key in
            guard case .remote(let remote) = key.source else { return nil }
            return RemoteKeySource.Identity(configuration: remote, algorithm: key.algorithm, allowed: algorithms)
        }
    }

    /// The sources a configuration needs: the existing ones, and new ones (not started: ``start(_:onChange:)``
    /// does that once the generation that reads them is in place).
    func prepare(_ configuration: GatewayConfiguration) throws -> [RemoteKeySource.Identity: RemoteKeySource] {
        var result: [RemoteKeySource.Identity: RemoteKeySource] = [:]
        for identity in Self.identities(configuration) {
            if let existing = self.sources.withLockedValue({ $0[identity] }) {
                result[identity] = existing
            } else {
                result[identity] = try RemoteKeySource(
                    identity: identity, eventLoop: self.group.next(), logger: self.logger, registry: self.registry)
            }
        }
        return result
    }

    /// Makes `sources` the process's: starts the new ones, stops those no longer listed.
    func adopt(_ sources: [RemoteKeySource.Identity: RemoteKeySource], onChange: @escaping @Sendable () -> Void) {
        let (started, stopped) = self.sources.withLockedValue { current -> ([RemoteKeySource], [RemoteKeySource]) in
            let started = sources.filter { current[$0.key] !== $0.value }.map(\.value)
            let stopped = current.filter { sources[$0.key] == nil }.map(\.value)
            current = sources
            return (started, stopped)
        }
        for source in stopped { source.stop() }
        for source in started {
            source.setOnChange(onChange)
            source.start()
        }
    }

    /// The current sources, for a generation rebuilt because one of them changed.
    var current: [RemoteKeySource.Identity: RemoteKeySource] {
        self.sources.withLockedValue { $0 }
    }

    func stopAll() {
        for source in self.sources.withLockedValue({ $0.values }) { source.stop() }
    }
}

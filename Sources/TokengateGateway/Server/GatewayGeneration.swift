//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import Logging
import NIOCore
import Prometheus
import TokengateConfig
import TokengateTLS
import TokengateTokens
import TokengateHTTP

/// One loaded configuration: the runtime requests read, its upstream pools and the listeners'
/// certificates. A reload builds a whole new generation and swaps it in; nothing in one is ever mutated.
///
/// Each request reads the current generation once, at its head, with one atomic load: a request in flight
/// finishes with the generation it started with, the next one on the same connection uses the new one.
final class GatewayGeneration: Sendable, AtomicReference {
    let number: Int
    let configuration: GatewayConfiguration
    let runtime: GatewayRuntime
    let pools: UpstreamPoolDirectory
    /// Each event loop's verified tokens, empty at the start of every generation.
    let tokenCaches: VerifiedTokenCacheDirectory
    /// The TLS context of each TLS listener, by its index in the configuration.
    let tlsContexts: [Int: TLSServerContext]
    /// The upstreams' active health checks; started with the generation, stopped when it is replaced.
    let healthChecker: UpstreamHealthChecker

    init(
        number: Int,
        configuration: GatewayConfiguration,
        cutoffs: CutoffSnapshotHolder,
        metrics: GatewayMetrics?,
        registry: MetricsRegistry,
        tokenBodyMemory: TokenBodyMemory,
        responseBuffers: ResponseBufferBudget? = nil,
        whoamiCallsInFlight: ManagedAtomic<Int>,
        redeemedCodes: RedeemedCodeMemory,
        devices: DeviceRegistry? = nil,
        group: any EventLoopGroup,
        logger: Logger,
        now: (@Sendable () -> Int64)?,
        nowMilliseconds: (@Sendable () -> Int64)?,
        remoteKeys: [RemoteKeySource.Identity: RemoteKeySource] = [:],
        replacing previous: GatewayGeneration? = nil
    ) throws {
        self.number = number
        self.configuration = configuration
        self.runtime = try GatewayRuntime.build(
            from: configuration,
            cutoffs: cutoffs,
            metrics: metrics,
            registry: registry,
            tokenBodyMemory: tokenBodyMemory,
            responseBuffers: responseBuffers,
            whoamiCallsInFlight: whoamiCallsInFlight,
            redeemedCodes: redeemedCodes,
            devices: devices,
            now: now,
            nowMilliseconds: nowMilliseconds,
            remoteKeys: remoteKeys
        )
        self.tlsContexts = try Self.makeTLSContexts(configuration)
        // Nothing below throws: a generation that is built is one that starts its checks.
        self.healthChecker = UpstreamHealthChecker(
            upstreams: self.runtime.upstreams, eventLoop: group.next(), logger: logger, inheriting: previous?.healthChecker)
        self.pools = UpstreamPoolDirectory(
            upstreams: self.runtime.upstreams,
            group: group,
            logger: logger,
            metrics: self.runtime.metrics,
            health: self.healthChecker.health
        )
        self.tokenCaches = VerifiedTokenCacheDirectory(
            entries: configuration.tokens.verifiedCacheEntries,
            runtime: self.runtime,
            group: group
        )
    }

    /// The same generation with a runtime rebuilt around new fetched keys: same number, configuration,
    /// certificates and upstream pools (connections to the backends stay open; nothing but the verifiers changed).
    init(republishing generation: GatewayGeneration, runtime: GatewayRuntime) {
        self.number = generation.number
        self.configuration = generation.configuration
        self.runtime = runtime
        self.tlsContexts = generation.tlsContexts
        self.healthChecker = generation.healthChecker
        self.pools = generation.pools
        // The same caches: a cache meeting a verifier of another key set empties itself on first use.
        self.tokenCaches = generation.tokenCaches
    }

    /// A generation around an already built runtime and without TLS contexts: for handler tests that feed
    /// plaintext HTTP straight into the pipeline.
    init(runtime: GatewayRuntime, configuration: GatewayConfiguration, group: any EventLoopGroup, logger: Logger) {
        self.number = 1
        self.configuration = configuration
        self.runtime = runtime
        self.tlsContexts = [:]
        self.healthChecker = UpstreamHealthChecker(upstreams: runtime.upstreams, eventLoop: group.next(), logger: logger)
        self.pools = UpstreamPoolDirectory(
            upstreams: runtime.upstreams, group: group, logger: logger, metrics: runtime.metrics,
            health: self.healthChecker.health)
        self.tokenCaches = VerifiedTokenCacheDirectory(
            entries: configuration.tokens.verifiedCacheEntries,
            runtime: runtime,
            group: group
        )
    }

    static func makeTLSContexts(_ configuration: GatewayConfiguration) throws -> [Int: TLSServerContext] {
        var contexts: [Int: TLSServerContext] = [:]
        for (index, listener) in configuration.listeners.enumerated() {
            if let tls = listener.forwardAuth?.tls {
                // A front proxy's checks: HTTP/1.1, which every one of them speaks to an authorization service.
                contexts[index] = try TLSServerContext(listener: tls, key: "listen[\(index)].forward_auth.tls", alpnProtocols: ["http/1.1"])
                continue
            }
            guard case .tls(let tls) = listener.mode else { continue }
            contexts[index] = try TLSServerContext(
                listener: tls,
                key: "listen[\(index)].tls",
                // HTTP/2 preferred, as mobile HTTP stacks expect; HTTP/1.1 for everyone else.
                alpnProtocols: configuration.http2.enabled ? ["h2", "http/1.1"] : ["http/1.1"]
            )
        }
        return contexts
    }
}

/// The current generation, swapped atomically on reload and read lock-free by every request.
final class GatewayGenerationHolder: Sendable {
    private let current: ManagedAtomic<GatewayGeneration>

    init(_ generation: GatewayGeneration) {
        self.current = ManagedAtomic(generation)
    }

    func load() -> GatewayGeneration {
        self.current.load(ordering: .acquiring)
    }

    /// Publishes `generation` and returns the one it replaced.
    func exchange(_ generation: GatewayGeneration) -> GatewayGeneration {
        self.current.exchange(generation, ordering: .acquiringAndReleasing)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import TokengateConfig
import TokengateTLS
import TokengateTokens

/// The running gateway: its listeners, the runtime they serve, and the way down.
///
/// Built from a validated ``GatewayConfiguration``; ``start()`` binds every listener (or fails on the
/// first that cannot be bound, closing the others), ``shutdown(drainTimeout:)`` stops accepting,
/// lets in-flight exchanges finish within the drain timeout, then closes what is left.
public final class GatewayServer: Sendable {
    private let configuration: GatewayConfiguration
    private let runtime: GatewayRuntime
    private let tlsContexts: [Int: TLSServerContext]
    private let group: any EventLoopGroup
    private let pools: UpstreamPoolDirectory
    private let registry: ConnectionRegistry
    private let logger: Logger
    private let serverChannels = NIOLockedValueBox<[any Channel]>([])

    /// - Parameters:
    ///   - cutoffs: the holder the cutoff store keeps current; requests read it without locks.
    ///   - now: the clock for token checks (UNIX seconds); tests inject one.
    public init(
        configuration: GatewayConfiguration,
        cutoffs: CutoffSnapshotHolder,
        group: any EventLoopGroup,
        logger: Logger,
        now: (@Sendable () -> Int64)? = nil
    ) throws {
        self.configuration = configuration
        self.runtime = try GatewayRuntime.build(from: configuration, cutoffs: cutoffs, now: now)
        let contexts = try Self.makeTLSContexts(configuration)
        self.tlsContexts = contexts
        self.group = group
        self.logger = logger
        self.pools = UpstreamPoolDirectory(
            upstreams: self.runtime.upstreams,
            group: group,
            logger: logger,
            metrics: self.runtime.metrics
        )
        self.registry = ConnectionRegistry(limit: configuration.limits.maxConnections)
    }

    /// The gateway's metrics, for the admin listener's `/metrics`.
    public var metrics: GatewayMetrics { self.runtime.metrics }

    /// Everything `init` checks without binding anything: the keys parse, the certificates load and match
    /// their keys. For `tokengate check-config`.
    public static func check(_ configuration: GatewayConfiguration) throws {
        _ = try GatewayRuntime.build(from: configuration, cutoffs: CutoffSnapshotHolder(.empty))
        _ = try Self.makeTLSContexts(configuration)
    }

    private static func makeTLSContexts(_ configuration: GatewayConfiguration) throws -> [Int: TLSServerContext] {
        var contexts: [Int: TLSServerContext] = [:]
        for (index, listener) in configuration.listeners.enumerated() {
            guard case .tls(let tls) = listener.mode else { continue }
            do {
                contexts[index] = try TLSServerContext(
                    certificates: tls.certificates.map {
                        TLSCertificateSource(certificatePath: $0.cert.path, privateKeyPath: $0.key.path)
                    },
                    alpnProtocols: ["http/1.1"]
                )
            } catch {
                throw GatewayStartupError("listener \(listener.address): \(error)")
            }
        }
        return contexts
    }

    /// Binds every listener. Returns the bound addresses in configuration order (useful with port 0).
    @discardableResult
    public func start() async throws -> [SocketAddress] {
        var bound: [SocketAddress] = []
        let httpsPort = self.configuration.listeners.first { $0.tls != nil }?.address.port
        do {
            for (index, listener) in self.configuration.listeners.enumerated() {
                let channel: any Channel
                switch listener.mode {
                case .tls(let tls):
                    channel = try await self.bindTLS(listener.address, context: self.tlsContexts[index]!, handshakeTimeout: .init(tls.handshakeTimeout))
                case .plain(let mode):
                    channel = try await self.bindPlain(listener.address, mode: mode, httpsPort: listener.redirectPort ?? httpsPort)
                }
                self.serverChannels.withLockedValue { $0.append(channel) }
                if let address = channel.localAddress { bound.append(address) }
                self.logger.info("listening", metadata: ["address": "\(listener.address)", "tls": "\(listener.tls != nil)"])
            }
        } catch {
            for channel in self.serverChannels.withLockedValue({ $0 }) { try? await channel.close() }
            throw GatewayStartupError("cannot listen: \(error)")
        }
        return bound
    }

    /// Graceful shutdown: stop accepting, let in-flight exchanges finish (up to `drainTimeout`), close.
    public func shutdown(drainTimeout: TimeAmount) async {
        for channel in self.serverChannels.withLockedValue({ $0 }) {
            try? await channel.close()
        }
        let open = self.registry.all
        for channel in open {
            channel.pipeline.fireUserInboundEventTriggered(GatewayShutdownEvent())
        }
        let deadline = NIODeadline.now() + drainTimeout
        while self.registry.count > 0, NIODeadline.now() < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for channel in self.registry.all {
            channel.close(promise: nil)
        }
        self.pools.closeAll()
        self.logger.info("stopped", metadata: ["forced_connections": "\(self.registry.count)"])
    }

    // MARK: Listeners

    private func bindTLS(_ address: SocketAddressSpec, context tlsContext: TLSServerContext, handshakeTimeout: TimeAmount) async throws -> any Channel {
        let runtime = self.runtime
        let pools = self.pools
        let registry = self.registry
        let logger = self.logger
        let limits = self.configuration.limits
        return try await self.serverBootstrap().childChannelInitializer { channel in
            guard registry.add(channel) else {
                logger.warning("connection limit reached", metadata: ["limit": "\(registry.limit)"])
                return channel.close()
            }
            return channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(TLSHandler(context: tlsContext, handshakeTimeout: handshakeTimeout, logger: logger))
                try sync.addHandler(IdleStateHandler(readTimeout: .init(limits.idleTimeout)))
                try Self.addHTTP1Handlers(to: sync, limits: limits)
                try sync.addHandler(
                    HTTP1ConnectionHandler(
                        runtime: runtime,
                        pools: pools.pools(for: channel.eventLoop),
                        clientAddress: channel.remoteAddress?.ipAddress,
                        logger: logger
                    )
                )
            }
        }.bind(host: address.host, port: address.port).get()
    }

    private func bindPlain(_ address: SocketAddressSpec, mode: PlainHTTPMode, httpsPort: Int?) async throws -> any Channel {
        let limits = self.configuration.limits
        return try await self.serverBootstrap().childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                try Self.addHTTP1Handlers(to: sync, limits: limits)
                try sync.addHandler(PlainHTTPHandler(mode: mode, httpsPort: httpsPort))
            }
        }.bind(host: address.host, port: address.port).get()
    }

    private func serverBootstrap() -> ServerBootstrap {
        ServerBootstrap(group: self.group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: false)
    }

    /// The HTTP/1.1 codec with the gateway's limits: the decoder refuses oversized header sections itself
    /// (431), and the pipelining handler hands requests over one at a time.
    static func addHTTP1Handlers(to sync: ChannelPipeline.SynchronousOperations, limits: LimitsConfiguration) throws {
        var decoderLimits = NIOHTTPDecoderLimitConfiguration()
        // The URI counts towards the decoder's field size, so the field limit must let a URI through up to
        // its own limit for the 414 check to see it; everything past both limits is a 431.
        decoderLimits.maxHeaderFieldSize = max(limits.maxHeaderBytes, limits.maxURIBytes) + 1
        decoderLimits.maxHeaderListSize = limits.maxHeaderBytes + limits.maxURIBytes + 1
        decoderLimits.maxHeaderFieldCount = 256
        try sync.addHandler(HTTPResponseEncoder())
        try sync.addHandler(
            ByteToMessageHandler(
                HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes, informationalResponseStrategy: .drop, limitConfiguration: decoderLimits)
            )
        )
        try sync.addHandler(HTTPServerPipelineHandler())
    }
}

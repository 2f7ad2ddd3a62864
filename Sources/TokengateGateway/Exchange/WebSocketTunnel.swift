//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateConfig
import TokengateTokens

/// One WebSocket connection after the `101`: the client's connection and the backend's, joined byte for
/// byte on one event loop. The gateway does not read the frames: the handshake was checked on both sides
/// (the client's request by the authorizer, the backend's answer by ``WebSocketHandshakeCheck``), and what
/// follows is the two peers' business, extensions and all.
///
/// ### Backpressure
/// Bytes read from one side are written to the other at once; while the other side's channel is not
/// writable (its unsent bytes passed the channel's high water mark), reading from the first side stops, and
/// resumes when the other side drains below its low mark. So each direction holds at most about one high
/// water mark plus one read, however fast a peer sends and however slowly the other reads.
///
/// ### Ending
/// Either side closing ends the tunnel (after what it sent before is written to the other side), as do the
/// route's idle timeout and lifetime, a revocation of the user's tokens or device, and a graceful shutdown
/// (``WebSocketTunnelRegistry`` looks at those). The access log gets one line when it ends.
final class WebSocketTunnel {
    enum CloseReason: String, CaseIterable {
        case clientClosed = "client_closed"
        case backendClosed = "backend_closed"
        case clientError = "client_error"
        case backendError = "backend_error"
        case idleTimeout = "idle_timeout"
        case maxLifetime = "max_lifetime"
        case revoked = "revoked"
        case deviceRevoked = "device_revoked"
        case shutdown = "shutdown"
    }

    let client: any Channel
    let backend: any Channel
    private(set) var clientSide: WebSocketClientHandler!
    let backendSide: WebSocketUpstreamHandler
    /// The exchange of the upgrade request: its access log line is written when the tunnel ends.
    let exchange: ProxyExchange
    let identity: VerifiedToken?
    let routeIndex: Int
    let opened: NIODeadline
    let idleTimeout: TimeAmount
    let maxLifetime: TimeAmount
    private(set) var lastActivity: NIODeadline
    /// The cutoff snapshot the identity was last checked against (``WebSocketTunnelRegistry``): held, so that
    /// a newer one is told by identity (a generation number is not promised to move).
    var checkedCutoffs: CutoffSnapshot
    private(set) var bytesFromClient = 0
    private(set) var bytesFromBackend = 0
    private(set) var isClosed = false
    private let registry: WebSocketTunnelRegistry

    init(
        client: any Channel, backend: any Channel, backendSide: WebSocketUpstreamHandler, exchange: ProxyExchange,
        routeIndex: Int, configuration: WebSocketRouteConfiguration, registry: WebSocketTunnelRegistry, cutoffs: CutoffSnapshot
    ) {
        self.client = client
        self.backend = backend
        self.backendSide = backendSide
        self.exchange = exchange
        self.identity = exchange.identity
        self.routeIndex = routeIndex
        let now = NIODeadline.now()
        self.opened = now
        self.lastActivity = now
        self.idleTimeout = TimeAmount(configuration.idleTimeout)
        self.maxLifetime = TimeAmount(configuration.maxLifetime)
        self.registry = registry
        self.checkedCutoffs = cutoffs
        self.clientSide = WebSocketClientHandler(tunnel: self)
    }

    // MARK: Client to backend.

    func fromClient(_ bytes: ByteBuffer) {
        guard !self.isClosed else { return }
        self.bytesFromClient += bytes.readableBytes
        self.lastActivity = .now()
        self.backend.write(bytes, promise: nil)
        if !self.backend.isWritable {
            self.clientSide.pauseReading()
        }
    }

    func clientReadComplete() {
        self.backend.flush()
    }

    func backendWritabilityChanged(_ isWritable: Bool) {
        if isWritable {
            self.clientSide.resumeReading()
        }
    }

    // MARK: Backend to client.

    func fromBackend(_ bytes: ByteBuffer) {
        guard !self.isClosed else { return }
        self.bytesFromBackend += bytes.readableBytes
        self.lastActivity = .now()
        self.client.write(bytes, promise: nil)
        if !self.client.isWritable {
            self.backendSide.pauseReading()
        }
    }

    func backendReadComplete() {
        self.client.flush()
    }

    func clientWritabilityChanged(_ isWritable: Bool) {
        if isWritable {
            self.backendSide.resumeReading()
        }
    }

    // MARK: Ending.

    /// The backend half-closed: what it sent reaches the client, then both close.
    func backendFinished() {
        self.close(.backendClosed)
    }

    /// The client half-closed: what it sent reaches the backend, then both close.
    func clientFinished() {
        self.close(.clientClosed)
    }

    /// How long the side still open gets to take what the closed side sent last (its WebSocket close frame).
    static let lingerAfterClose = TimeAmount.seconds(5)

    /// Ends the tunnel, once: the registry forgets it, and the access log and metrics hear why. When one peer
    /// closed, the other gets what that peer sent before closing (its close frame), within
    /// ``lingerAfterClose``; for every other reason both connections close now.
    func close(_ reason: CloseReason) {
        guard !self.isClosed else { return }
        self.isClosed = true
        self.registry.remove(self)
        self.backendSide.tunnel = nil
        switch reason {
        case .clientClosed:
            self.client.close(promise: nil)
            Self.closeAfterFlush(self.backend)
        case .backendClosed:
            self.backend.close(promise: nil)
            Self.closeAfterFlush(self.client)
        default:
            self.client.close(promise: nil)
            self.backend.close(promise: nil)
        }
        self.exchange.webSocketTunnelEnded(
            reason: reason, bytesFromClient: self.bytesFromClient, bytesFromBackend: self.bytesFromBackend)
    }

    /// Closes `channel` once the bytes written to it are sent (an empty write completes after them), or after
    /// ``lingerAfterClose`` when its peer does not read them.
    private static func closeAfterFlush(_ channel: any Channel) {
        guard channel.isActive else { return }
        let written = channel.eventLoop.makePromise(of: Void.self)
        channel.writeAndFlush(channel.allocator.buffer(capacity: 0), promise: written)
        let linger = channel.eventLoop.scheduleTask(in: Self.lingerAfterClose) { channel.close(promise: nil) }
        written.futureResult.whenComplete { _ in
            linger.cancel()
            channel.close(promise: nil)
        }
    }
}

@available(*, unavailable)
extension WebSocketTunnel: Sendable {}

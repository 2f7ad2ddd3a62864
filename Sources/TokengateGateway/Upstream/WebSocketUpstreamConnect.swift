//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOPosix
import TokengateTLS

/// Opens a WebSocket tunnel's backend connection: TCP, then TLS for an `https://` target (with the upstream's
/// client certificate and server name, as for pooled connections), within the upstream's `connect_timeout`.
/// The connection is the tunnel's alone and is never pooled: after a `101` it carries another protocol, and
/// after a refused upgrade the backend may have read the request in a way the gateway cannot know.
enum WebSocketUpstreamConnect {
    /// The channel, with its ``WebSocketUpstreamHandler`` last in the pipeline, once it is usable.
    static func connect(
        _ settings: UpstreamSettings, target index: Int, eventLoop: any EventLoop, logger: Logger
    ) -> EventLoopFuture<any Channel> {
        let target = settings.targets[index]
        let deadline = NIODeadline.now() + settings.connectTimeout
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(settings.connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            // The backend's FIN is an event (the tunnel delivers what it sent, then ends), not an abrupt close.
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(WebSocketUpstreamHandler())
                }
            }
        return bootstrap.connect(host: target.host, port: target.port).flatMap { channel in
            guard target.useTLS, let context = settings.tlsContext else {
                return channel.eventLoop.makeSucceededFuture(channel)
            }
            let handshake = channel.eventLoop.makePromise(of: Void.self)
            do {
                let sync = channel.pipeline.syncOperations
                try sync.handler(type: WebSocketUpstreamHandler.self).handshakePromise = handshake
                try sync.addHandler(
                    TLSHandler(
                        context: context,
                        serverHostname: settings.tlsServerName ?? target.host,
                        handshakeTimeout: max(deadline - .now(), .milliseconds(1)),
                        handshakeFailureLogLevel: .debug,
                        logger: logger
                    ),
                    position: .first
                )
            } catch {
                channel.close(promise: nil)
                return channel.eventLoop.makeFailedFuture(error)
            }
            return handshake.futureResult.map { channel }.flatMapErrorThrowing { error in
                channel.close(promise: nil)
                throw error
            }
        }
    }
}

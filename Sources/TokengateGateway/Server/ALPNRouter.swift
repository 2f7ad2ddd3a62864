//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Prometheus
import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateTLS
import TokengateHTTP

/// Sits right after the TLS handler until the handshake completes, then puts the codec ALPN chose in its
/// place: `h2` gets the HTTP/2 codec, anything else (`http/1.1`, or no ALPN) the HTTP/1.1 pipeline. Both
/// end in the same ``ProxyExchange``.
///
/// Plaintext only flows after the handshake event, so no request byte ever reaches this handler.
final class ALPNRouter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let generations: GatewayGenerationHolder
    private let logger: Logger
    /// The listener's certificates, when requests for hosts outside the connection's certificate are refused
    /// (more than one certificate, `misdirected_requests: refuse`); `nil` otherwise.
    private let checkedCertificates: TLSServerContext?
    /// The connection in `tokengate_open_connections`, moved from `tls_handshake` to its protocol here.
    private let openConnection: NIOLoopBound<OpenConnectionSlot>?
    private let listenerIndex: Int
    /// Where a PROXY protocol header's client address lands (``ProxyProtocolHandler``), read once the handshake
    /// is done (the header came before it); `nil` on a connection that sends none.
    private let proxiedAddress: ProxiedAddress?
    /// The gateway began draining during the handshake: passed on to the codec once it is in place.
    private var drainRequested = false

    /// - Parameters:
    ///   - tlsContext: the context the connection's TLS handler was made with (the same generation's).
    ///   - misdirectedRequests: the listener's `misdirected_requests`.
    init(
        generations: GatewayGenerationHolder,
        tlsContext: TLSServerContext? = nil,
        misdirectedRequests: MisdirectedRequests = .refuse,
        openConnection: NIOLoopBound<OpenConnectionSlot>? = nil,
        listenerIndex: Int = 0,
        proxiedAddress: ProxiedAddress? = nil,
        logger: Logger
    ) {
        self.listenerIndex = listenerIndex
        self.proxiedAddress = proxiedAddress
        self.generations = generations
        self.openConnection = openConnection
        self.logger = logger
        // With one certificate every name gets it: a client told `421` would only reconnect to the same one.
        let checked = misdirectedRequests == .refuse && (tlsContext?.certificateCount ?? 0) > 1
        self.checkedCertificates = checked ? tlsContext : nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is GatewayShutdownEvent {
            // Still in the pipeline, so the handshake has not completed, and no request can be in flight. The
            // handshake goes on (its timeout bounds it) and the codec learns of the shutdown once in place:
            // HTTP/1.1 answers the first request with `Connection: close`, HTTP/2 sends GOAWAY.
            self.drainRequested = true
            // A connection that has not sent its first byte yet (the plain-HTTP check in front of the TLS handler
            // still waits for one) may be one accepted just before the listeners stopped (a binary hand-over, a
            // restart on a socket systemd holds), whose client is sending its hello right now: closing it at once
            // would fail that client's request. It gets ``helloGrace`` to send it; one still silent then is
            // closed, so that silence cannot hold the drain (and the process) up until the handshake timeout.
            if Self.awaitsFirstByte(context.channel) {
                let channel = context.channel
                context.eventLoop.assumeIsolated().scheduleTask(in: Self.helloGrace) {
                    if Self.awaitsFirstByte(channel) { channel.close(promise: nil) }
                }
            }
            return
        }
        guard case .handshakeCompleted(let negotiated, let serverName, _)? = event as? TLSUserEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        let generation = self.generations.load()
        generation.runtime.metrics.tlsHandshakes.increment()
        self.openConnection?.value.negotiated(negotiated)
        let configuration = generation.configuration
        let peer = self.proxiedAddress?.address ?? context.channel.remoteAddress?.ipAddress
        let listenerIndex = self.listenerIndex
        // Looked up once per connection: every request on it is compared with these names.
        let certificateNames = self.checkedCertificates?.certificateNames(forServerName: serverName)
        do {
            let sync = context.pipeline.syncOperations
            if negotiated == "h2" {
                let generations = self.generations
                let logger = self.logger
                let eventLoop = context.eventLoop
                let connectionID = RequestRewriter.newConnectionID()
                var codecConfiguration = HTTP2ServerConfiguration(
                    configuration.http2,
                    limits: configuration.limits,
                    accessLog: configuration.log.accessLog,
                    hsts: configuration.hsts
                )
                codecConfiguration.responseBuffers = generation.runtime.responseBuffers
                let codec = HTTP2ServerCodec(
                    configuration: codecConfiguration,
                    logger: logger,
                    countAnswer: { generations.load().runtime.metrics.recordUnrouted(reason: $0) },
                    takeOutputBuffer: { ClientOutputBuffers.output.take(allocator: $0, minimumCapacity: $1) },
                    giveBackOutputBuffer: { ClientOutputBuffers.output.giveBack($0) }
                ) { stream in
                    HTTP2StreamExchange(
                        stream: stream,
                        generations: generations,
                        eventLoop: eventLoop,
                        clientAddress: peer,
                        listenerIndex: listenerIndex,
                        certificateNames: certificateNames,
                        connectionID: connectionID,
                        logger: logger
                    )
                }
                try sync.addHandler(codec, position: .after(self))
            } else {
                let generations = self.generations
                let logger = self.logger
                let handler = GatewayServer.http1Handler(limits: configuration.limits) { readDeadlines in
                    HTTP1ConnectionHandler(
                        generations: generations,
                        clientAddress: peer,
                        listenerIndex: listenerIndex,
                        certificateNames: certificateNames,
                        readDeadlines: readDeadlines,
                        logger: logger
                    )
                }
                try sync.addHandler(handler, position: .after(self))
            }
            context.fireUserInboundEventTriggered(event)
            if self.drainRequested {
                context.fireUserInboundEventTriggered(GatewayShutdownEvent())
            }
            sync.removeHandler(context: context, promise: nil)
        } catch {
            self.logger.error("cannot set up the connection's codec", metadata: ["error": "\(error)"])
            context.close(promise: nil)
        }
    }

    /// How long a connection still silent when the drain begins may take to send its first byte. A client
    /// sends its hello right after the TCP handshake, so a real one needs milliseconds, but a loaded client
    /// host can stall it: 500 ms still cut curl now and then with a dozen processes per core. The bound is
    /// for a drain that must not wait long on connections that never speak.
    static let helloGrace = TimeAmount.seconds(1)

    /// No byte has arrived yet: ``PlainHTTPOnTLSPortHandler`` removes itself at the first one. On the
    /// channel's event loop.
    private static func awaitsFirstByte(_ channel: any Channel) -> Bool {
        (try? channel.pipeline.syncOperations.handler(type: PlainHTTPOnTLSPortHandler.self)) != nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Before the handshake completes, every error is a TLS failure (the TLS handler already logged it).
        if let tlsError = error as? TLSError {
            self.generations.load().runtime.metrics.recordTLSFailure(tlsError.code.description)
        }
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension ALPNRouter: Sendable {}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL
internal import CTokengateShims
public import Logging
public import NIOCore

/// TLS 1.2/1.3 through libssl, as a channel handler: ciphertext below, plaintext above.
///
/// ### Overview
/// One handler per connection, server or client role. It owns a ``TLSConnection`` (the `SSL*` with a
/// ByteBuffer BIO) and drives it from channel events. The decisions live in ``StateMachine``; this class
/// performs them.
///
/// ### Reads
/// `channelRead` feeds the ciphertext to OpenSSL and then acts by state: a handshake step, or `SSL_read` in a
/// loop until WANT_READ. Plaintext from all reads of one batch collects in one ByteBuffer, which is fired as a
/// single `channelRead` followed by `channelReadComplete` when the batch ends.
///
/// ### Writes
/// Writes are buffered until `flush`, also during the handshake (the flush is remembered and done when the
/// handshake completes). A flush encrypts every flushed write, in records of at most 16 KiB (writes of up to
/// 4 KiB share records, see ``TLSConnection/encrypt(_:)``), into one pre-sized ByteBuffer and does one network
/// write; the write promises complete with that write.
///
/// ### Close
/// `close()` on an established connection sends close_notify and waits up to ``closeNotifyTimeout`` for the
/// peer's before closing the channel. A peer's close_notify is answered, ``TLSUserEvent/shutdownCompleted`` is
/// fired and the channel is closed. EOF without close_notify fires ``TLSError/Code/uncleanShutdown``.
/// Half-closure (`close(mode: .output)` / `.input`) is passed through untouched.
///
/// ### Errors
/// Handshake failures, the handshake timeout and fatal record errors are logged once (reason only, never key
/// material), fired as ``TLSError`` through `errorCaught`, and close the channel. A client whose caller reports
/// handshake failures itself, with what only it knows (which upstream, which request), lowers their level
/// (``handshakeFailureLogLevel``), so that a backend failing every handshake is not logged twice per connect.
///
/// ### Reentrancy
/// OpenSSL's callbacks (BIO, SNI, ALPN, info) never touch the pipeline, so no channel event fires while an
/// SSL call is on the stack. Events are fired only after the state machine has moved, and every path
/// re-reads the state after firing, because any handler above may write, flush or close from the event.
public final class TLSHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    enum Role {
        case server(TLSServerContext)
        case client(TLSClientContext, serverHostname: String?)
    }

    // Stored state is internal (not private) only so that TLSHandler+Operations.swift can reach it.

    /// How long we wait for the peer's close_notify after sending ours before closing anyway.
    static let closeNotifyTimeout: TimeAmount = .seconds(3)

    var stateMachine = StateMachine()
    let role: Role
    let handshakeTimeout: TimeAmount
    let logger: Logger
    /// The level of the line logged when the handshake fails or times out (info unless the creator says).
    let handshakeFailureLogLevel: Logger.Level
    var connection: TLSConnection?
    var bufferedWrites = MarkedCircularBuffer<(ByteBuffer, EventLoopPromise<Void>?)>(initialCapacity: 8)
    var handshakeTimer: Scheduled<Void>?
    var closeNotifyTimer: Scheduled<Void>?
    /// Plaintext decrypted during the current read batch; fired at `channelReadComplete`.
    var plaintext: ByteBuffer?
    /// A `read()` from above that no plaintext has answered yet (matters when autoRead is off).
    var readPending = false

    /// A server-side handler: the client picks the certificate by SNI; ALPN per `context`.
    public init(context: TLSServerContext, handshakeTimeout: TimeAmount = .seconds(10), logger: Logger) {
        self.role = .server(context)
        self.handshakeTimeout = handshakeTimeout
        self.logger = logger
        self.handshakeFailureLogLevel = .info
    }

    /// A client-side handler for an upstream.
    ///
    /// - Parameters:
    ///   - serverHostname: sent as SNI (unless it is an IP literal) and, when the context verifies peers, checked
    ///     against the server's certificate (DNS name or IP address).
    ///   - handshakeFailureLogLevel: the level of this handler's own line about a failed or timed-out handshake;
    ///     lowered by a caller that logs those failures itself (the error always reaches it via `errorCaught`).
    public init(
        context: TLSClientContext,
        serverHostname: String?,
        handshakeTimeout: TimeAmount = .seconds(10),
        handshakeFailureLogLevel: Logger.Level = .info,
        logger: Logger
    ) {
        self.role = .client(context, serverHostname: serverHostname)
        self.handshakeTimeout = handshakeTimeout
        self.logger = logger
        self.handshakeFailureLogLevel = handshakeFailureLogLevel
    }

    // MARK: Lifecycle.

    public func handlerAdded(context: ChannelHandlerContext) {
        let connection: TLSConnection?
        switch self.role {
        case .server(let server):
            connection = TLSConnection(
                sslContext: server.contexts[0],
                isServer: true,
                allocator: context.channel.allocator
            )
        case .client(let client, let hostname):
            connection = TLSConnection(
                sslContext: client.context, isServer: false, allocator: context.channel.allocator)
            if let connection, let hostname, !Self.configureClient(connection, hostname: hostname, client: client) {
                self.fail(
                    context: context, error: TLSError(code: .invalidConfiguration, message: "bad server hostname"))
                return
            }
        }
        guard let connection else {
            self.fail(context: context, error: TLSError(code: .internalError, message: "SSL_new failed"))
            return
        }
        self.connection = connection
        if context.channel.isActive {
            self.startHandshake(context: context)
        }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.cancelTimers()
        self.failBufferedWrites(ChannelError.ioOnClosedChannel)
        if let promise = self.stateMachine.failed() {
            promise.fail(ChannelError.ioOnClosedChannel)
        }
        // Drops the only reference: SSL_free (and the BIO) run now, on the event loop.
        self.connection = nil
    }

    public func channelActive(context: ChannelHandlerContext) {
        self.startHandshake(context: context)
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        self.cancelTimers()
        switch self.stateMachine.channelInactive() {
        case .none:
            break
        case .reportHandshakeEOF:
            let error = TLSError(code: .handshakeFailed, message: "connection closed during the handshake")
            self.logger.debug("TLS handshake failed", metadata: ["tls.error": "\(error)"])
            context.fireErrorCaught(error)
        case .reportUncleanShutdown:
            if self.deliverPlaintext(context: context) {
                context.fireChannelReadComplete()
            }
            let error = TLSError(code: .uncleanShutdown, message: "connection closed without close_notify")
            self.logger.debug("TLS unclean shutdown", metadata: ["tls.error": "\(error)"])
            context.fireErrorCaught(error)
        case .succeedClose(let promise):
            promise?.succeed()
        }
        self.connection?.discardInbound()
        self.failBufferedWrites(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    // MARK: Inbound.

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let connection = self.connection else {
            return
        }
        connection.receive(self.unwrapInboundIn(data))
        switch self.stateMachine.channelRead() {
        case .continueHandshake:
            self.doHandshakeStep(context: context)
        case .decode:
            self.decode(context: context, deliver: true)
        case .decodeAndDiscard:
            self.decode(context: context, deliver: false)
        case .ignore:
            connection.discardInbound()
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        let delivered = self.deliverPlaintext(context: context)
        switch self.stateMachine.state {
        case .idle, .handshaking, .closing:
            // The handshake and the close_notify wait need bytes whether or not anyone above asked for them.
            context.read()
        case .active:
            if !delivered, self.readPending {
                context.read()
            }
        case .closed:
            break
        }
        context.fireChannelReadComplete()
    }

    public func read(context: ChannelHandlerContext) {
        self.readPending = true
        context.read()
    }

    // MARK: Outbound.

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard self.stateMachine.acceptsWrites else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        self.bufferedWrites.append((self.unwrapOutboundIn(data), promise))
    }

    public func flush(context: ChannelHandlerContext) {
        self.bufferedWrites.mark()
        switch self.stateMachine.flush() {
        case .unbufferWrites:
            self.unbufferWrites(context: context)
        case .waitForHandshake:
            break
        case .failWrites:
            self.failBufferedWrites(ChannelError.ioOnClosedChannel)
        }
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all else {
            context.close(mode: mode, promise: promise)
            return
        }
        switch self.stateMachine.close(promise: promise) {
        case .closeChannel(let promise):
            self.cancelTimers()
            self.failBufferedWrites(ChannelError.ioOnClosedChannel)
            context.close(mode: .all, promise: promise)
        case .sendCloseNotify:
            // Unflushed writes are dropped, as a plain channel's close would drop them.
            self.failBufferedWrites(ChannelError.ioOnClosedChannel)
            self.sendCloseNotify(context: context)
        case .none:
            break
        }
    }
}

@available(*, unavailable)
extension TLSHandler: Sendable {}

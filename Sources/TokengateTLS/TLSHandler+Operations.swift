//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL
internal import CTokengateShims
import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: Code that drives the TLS connection. All of it runs on the channel's event loop.

extension TLSHandler {
    /// Per-connection client settings: SNI and host name verification.
    ///
    /// SNI must carry a DNS name (RFC 6066 §3), so an IP literal is only used for verification
    /// (`X509_VERIFY_PARAM_set1_ip_asc` against the IP SANs). Both must be set before the first handshake step.
    static func configureClient(_ connection: TLSConnection, hostname: String, client: TLSClientContext) -> Bool {
        let isIP = Self.isIPLiteral(hostname)
        if !isIP, CTokengateShims_SSL_set_tlsext_host_name(connection.ssl, hostname) != 1 {
            ERR_clear_error()
            return false
        }
        guard client.verifyPeer else {
            return true
        }
        SSL_set_hostflags(connection.ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
        let ok =
            isIP
            ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(connection.ssl), hostname) == 1
            : SSL_set1_host(connection.ssl, hostname) == 1
        ERR_clear_error()
        return ok
    }

    private static func isIPLiteral(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// Starts the handshake once (on `handlerAdded` with an active channel, or on `channelActive`): arms the
    /// timeout, takes the first step (a client writes its ClientHello here) and asks for bytes.
    func startHandshake(context: ChannelHandlerContext) {
        guard self.connection != nil, self.stateMachine.startHandshake() else {
            return
        }
        self.handshakeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: self.handshakeTimeout) {
            self.handshakeTimedOut(context: context)
        }
        self.doHandshakeStep(context: context)
        context.read()
    }

    private func handshakeTimedOut(context: ChannelHandlerContext) {
        self.handshakeTimer = nil
        guard self.stateMachine.handshakeTimedOut() else {
            return
        }
        let error = TLSError(code: .handshakeTimeout, message: "no handshake within \(self.handshakeTimeout)")
        self.logger.log(level: self.handshakeFailureLogLevel, "TLS handshake timed out", metadata: ["tls.error": "\(error)"])
        self.connection?.discardInbound()
        self.failBufferedWrites(error)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    /// One `SSL_do_handshake` step. Whatever the result, the produced bytes (a flight, or the alert explaining
    /// a failure) are written out before anything else happens, so the peer learns why we hang up.
    func doHandshakeStep(context: ChannelHandlerContext) {
        guard let connection = self.connection else {
            return
        }
        let result = connection.doHandshake()
        self.writeToNetwork(context: context, promise: nil)
        switch result {
        case .incomplete:
            break
        case .failed(let error):
            self.fail(context: context, error: error)
        case .complete:
            guard self.stateMachine.handshakeCompleted() else {
                return
            }
            self.handshakeTimer?.cancel()
            self.handshakeTimer = nil
            let event = TLSUserEvent.handshakeCompleted(
                negotiatedProtocol: connection.negotiatedProtocol,
                serverName: connection.serverName,
                version: connection.version
            )
            self.logger.trace("TLS handshake completed", metadata: ["tls.event": "\(event)"])
            context.fireUserInboundEventTriggered(event)
            // The event may have closed the connection or written; re-check before touching OpenSSL again.
            guard self.stateMachine.isActive else {
                return
            }
            // Application data may have arrived with the peer's last flight. Always try SSL_read: with
            // read-ahead, OpenSSL may already have pulled those records out of our BIO into its own buffer,
            // so an empty BIO does not mean there is nothing to decrypt (it returns WANT_READ at once if so).
            self.decode(context: context, deliver: true)
            if self.stateMachine.isActive, self.bufferedWrites.hasMark {
                self.unbufferWrites(context: context)
            }
        }
    }

    /// Loops `SSL_read` until OpenSSL needs more bytes. Plaintext is kept for `channelReadComplete` (or
    /// dropped when `deliver` is false, i.e. while waiting for the peer's close_notify).
    func decode(context: ChannelHandlerContext, deliver: Bool) {
        guard let connection = self.connection else {
            return
        }
        var buffer =
            self.plaintext
            ?? TLSScratchBuffers.plaintext.take(
                allocator: context.channel.allocator,
                minimumCapacity: connection.pendingInboundBytes + 1024
            )
        // Parked outside `self` while OpenSSL writes into it, so the storage stays uniquely referenced.
        self.plaintext = nil
        var sawCloseNotify = false
        decoding: while true {
            switch connection.read(into: &buffer) {
            case .bytes:
                if !deliver {
                    buffer.clear()
                }
                if !connection.hasPendingInput {
                    break decoding  // The next SSL_read could only say WANT_READ (see `hasPendingInput`).
                }
            case .wantMore:
                break decoding
            case .receivedCloseNotify:
                sawCloseNotify = true
                break decoding
            case .failed(let error):
                self.writeToNetwork(context: context, promise: nil)
                self.fail(context: context, error: error)
                return
            }
        }
        if buffer.readableBytes > 0 {
            self.plaintext = buffer
        } else {
            TLSScratchBuffers.plaintext.giveBack(buffer)
        }
        // Key updates and session tickets may have produced records to send.
        self.writeToNetwork(context: context, promise: nil)
        if sawCloseNotify {
            self.deliverPlaintext(context: context)
            self.closeNotifyReceived(context: context)
        }
    }

    /// Fires the batch's plaintext, if any. Returns whether something was fired.
    @discardableResult
    func deliverPlaintext(context: ChannelHandlerContext) -> Bool {
        guard let plaintext = self.plaintext else {
            return false
        }
        self.plaintext = nil
        self.readPending = false
        TLSScratchBuffers.plaintext.giveBack(plaintext)
        context.fireChannelRead(self.wrapInboundOut(plaintext))
        return true
    }

    private func closeNotifyReceived(context: ChannelHandlerContext) {
        switch self.stateMachine.receivedCloseNotify() {
        case .answerAndClose:
            self.cancelTimers()
            _ = self.connection?.shutdown()
            self.writeToNetwork(context: context, promise: nil)
            self.failBufferedWrites(ChannelError.ioOnClosedChannel)
            context.fireUserInboundEventTriggered(TLSUserEvent.shutdownCompleted)
            context.close(promise: nil)
        case .close(let promise):
            self.cancelTimers()
            context.fireUserInboundEventTriggered(TLSUserEvent.shutdownCompleted)
            context.close(promise: promise)
        case .none:
            break
        }
    }

    /// Sends close_notify and arms the bounded wait for the peer's.
    func sendCloseNotify(context: ChannelHandlerContext) {
        guard let connection = self.connection else {
            return
        }
        let result = connection.shutdown()
        self.writeToNetwork(context: context, promise: nil)
        switch result {
        case .complete:
            // The peer's close_notify was already in.
            self.closeNotifyReceived(context: context)
        case .incomplete:
            self.closeNotifyTimer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.closeNotifyTimeout) {
                self.closeNotifyTimedOut(context: context)
            }
            context.read()
        case .failed(let error):
            self.fail(context: context, error: error)
        }
    }

    private func closeNotifyTimedOut(context: ChannelHandlerContext) {
        self.closeNotifyTimer = nil
        let (shouldClose, promise) = self.stateMachine.shutdownTimedOut()
        guard shouldClose else {
            return
        }
        self.logger.debug("TLS peer did not answer close_notify in time; closing")
        context.close(promise: promise)
    }

    /// Encrypts every flushed write into one buffer and writes it with one network write and one flush.
    func unbufferWrites(context: ChannelHandlerContext) {
        guard let connection = self.connection, self.bufferedWrites.hasMark else {
            return
        }
        var total = 0
        var count = 0
        if let end = self.bufferedWrites.markedElementIndex {
            var index = self.bufferedWrites.startIndex
            while true {
                total += self.bufferedWrites[index].0.readableBytes
                count += 1
                if index == end {
                    break
                }
                index = self.bufferedWrites.index(after: index)
            }
        }
        connection.reserveOutbound(plaintextBytes: total)

        // One promise for the network write; the others are chained to it (no array per flush).
        var combined: EventLoopPromise<Void>? = nil
        while self.bufferedWrites.hasMark {
            let (buffer, promise) = self.bufferedWrites.removeFirst()
            if let promise {
                if let combined {
                    combined.futureResult.cascade(to: promise)
                } else {
                    combined = promise
                }
            }
            guard buffer.readableBytes > 0 else {
                continue
            }
            // A flush of one buffer (a whole HTTP/1.1 response, usually) has nothing to share a record with:
            // it is encrypted straight from that buffer, without the copy into a staging buffer.
            if case .failed(let error) = count == 1 ? connection.write(buffer) : connection.encrypt(buffer) {
                combined?.fail(error)
                self.fail(context: context, error: error)
                return
            }
        }
        if case .failed(let error) = connection.finishEncrypting() {
            combined?.fail(error)
            self.fail(context: context, error: error)
            return
        }
        self.writeToNetwork(context: context, promise: combined)
    }

    /// Hands whatever ciphertext OpenSSL produced to the channel, with one write and one flush.
    func writeToNetwork(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        guard let outbound = self.connection?.takeOutbound() else {
            promise?.succeed()
            return
        }
        context.write(self.wrapOutboundOut(outbound), promise: promise)
        context.flush()
    }

    /// A fatal error: log once, report, close. Safe to call in any state.
    func fail(context: ChannelHandlerContext, error: TLSError) {
        let level: Logger.Level
        switch self.stateMachine.state {
        case .idle, .handshaking: level = self.handshakeFailureLogLevel
        case .active, .closing, .closed: level = .info
        }
        let pendingClose = self.stateMachine.failed()
        self.cancelTimers()
        self.connection?.discardInbound()
        self.plaintext = nil
        self.logger.log(
            level: level,
            "TLS connection failed",
            metadata: ["tls.code": "\(error.code)", "tls.reason": "\(error.message)"]
        )
        self.failBufferedWrites(error)
        context.fireErrorCaught(error)
        context.close(promise: pendingClose)
    }

    func failBufferedWrites(_ error: any Error) {
        while let (_, promise) = self.bufferedWrites.popFirst() {
            promise?.fail(error)
        }
    }

    func cancelTimers() {
        self.handshakeTimer?.cancel()
        self.handshakeTimer = nil
        self.closeNotifyTimer?.cancel()
        self.closeNotifyTimer = nil
    }
}

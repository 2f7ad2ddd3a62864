//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateTLS
import TokengateHTTP

/// The HTTP/1.1 codec of an upstream connection, and its last handler: writes the request an exchange
/// sends (a head serialized by ``RequestRewriter``, body parts framed here), reads the response with
/// ``HTTP1ResponseParser`` and hands its parts to that exchange, and holds `read()` back while the
/// exchange's client cannot take more bytes.
///
/// One handler instead of NIO's client codec (request encoder, outbound header validator, response
/// decoder): a request's head and end used to cross three handlers as separate `NIOAny` parts, and the
/// decoder learned the request's method by watching them go past. The exchange calls ``send(_:)``,
/// ``sendBody(_:)`` and ``sendEnd()`` directly; each is one write of bytes.
///
/// Holding reads is the response half of the proxy's backpressure (the GlueHandler pattern of
/// swift-nio-examples): the backend's bytes wait in the kernel, not in the gateway's memory.
final class UpstreamResponseHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The exchange using the connection; `nil` while the connection is idle in the pool.
    ///
    /// Strong, and cleared explicitly (the exchange's release, the pool, a failure or the close), as in the
    /// GlueHandler pattern: a `weak` reference gave every exchange — one per request — a side table, a
    /// heap allocation of its own after which all of its retains and releases took the runtime's slow path.
    /// The reference cycle it forms (exchange → connection → handler → exchange) lasts exactly while the
    /// exchange is forwarding on this connection; every way out of that state releases the connection.
    var receiver: (any UpstreamResponseReceiver)?
    /// Called once when the channel goes inactive, so the pool forgets the connection.
    var onClose: (() -> Void)?
    /// The close was handled (``channelClosed()``): NIO may tell of it twice, inactive then unregistered.
    private var closeHandled = false
    private var readingPaused = false
    private var pendingRead = false
    private var parser = HTTP1ResponseParser()
    private var context: ChannelHandlerContext?
    /// The body of the request being sent goes as chunks.
    private var chunkedRequest = false
    /// The buffer request heads are written into: the connection's next request writes over the last one's
    /// bytes (sent by then: a request goes out only after the response before it ended), so a pooled
    /// connection serves its requests without allocating a buffer for each head.
    private var headBuffer: ByteBuffer?
    /// A head buffer grown past this (a request with an unusually large head) is not kept.
    static let maxKeptHeadBufferBytes = 16 * 1024
    /// Bytes came after the end of a response, in the same read: the backend sent more than it was asked
    /// for, so the connection is never given to another exchange. Such bytes that arrive only after the next
    /// request went out cannot be told from its response (no HTTP/1.1 proxy can): the parser closes the
    /// connection after the heads that announce a body HTTP says is absent (``HTTP1ResponseParser``), and an
    /// upstream with `keep_alive: false` never reuses a connection at all.
    private(set) var desynchronized = false

    /// The channel is active: set when it becomes active (or is when this handler is added), cleared when it goes
    /// inactive. The pool asks this three times per request instead of `channel.isActive`, an existential call
    /// into NIO's channel and its lifecycle state each time; NIO tells a handler of both changes.
    private(set) var isOpen = false
    /// The channel's writability, kept from `channelWritabilityChanged` (NIO fires it on every change, from inside
    /// the write that caused it) instead of asked of the channel: the exchange looks at it for every request.
    private(set) var isWritable = true

    /// Completed when the TLS handshake below this handler ends, either way (``awaitTLSHandshake(_:)``); `nil`
    /// once completed, and for plain connections.
    private var handshakePromise: EventLoopPromise<Void>?

    /// Where ``flush()`` defers to; `nil` (handler tests on an `EmbeddedChannel`) flushes at once.
    private let flushBatch: UpstreamFlushBatch?
    /// Registered with `flushBatch` for the end of this tick.
    private var flushPending = false

    init(flushBatch: UpstreamFlushBatch? = nil) {
        self.flushBatch = flushBatch
    }

    /// Whether the connection may serve another request after the response just read.
    var keepsConnection: Bool { self.parser.keepsConnection && !self.desynchronized }

    /// Between a `channelRead` and its `channelReadComplete`: NIO may still deliver more of the bytes it read
    /// in this batch (it reads again at once when a buffer came back full), so a response that just ended may
    /// have bytes behind it that this handler has not seen yet. The pool does not hand out such a connection
    /// (a pipelined next request would start inside this batch and read those bytes as its response).
    private(set) var isInReadBatch = false

    /// The connection goes back to the pool: no exchange, and reads flowing again (an exchange whose client
    /// was not writable may have paused them; the next exchange must see its response, and an idle
    /// connection must see the backend's close).
    func detach() {
        self.receiver = nil
        if let context = self.context {
            self.resumeReading(channel: context.channel)
        }
    }

    /// Completes `promise` when the TLS handshake of this connection completes, and fails it with the error
    /// when the handshake fails (the ``TLSError``), or the connection closes first. Set before the
    /// ``TLSHandler`` is added: the pool hands out a connection only once it is usable, so a certificate the
    /// gateway does not trust is a connect failure (nothing of a request was sent) and not a closed connection.
    func awaitTLSHandshake(_ promise: EventLoopPromise<Void>) {
        self.handshakePromise = promise
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            self.handshakePromise.take()?.succeed()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.isOpen = context.channel.isActive
        self.isWritable = context.channel.isWritable
    }

    func channelActive(context: ChannelHandlerContext) {
        self.isOpen = true
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.handshakePromise.take()?.fail(UpstreamError.connectionClosed)
        self.context = nil
    }

    // MARK: The request, from the exchange.

    /// Writes a request head (not flushed). The response read next is this request's.
    func send(_ head: UpstreamRequestHead) {
        guard let context = self.context else { return }
        guard self.parser.isIdle else {
            // A connection handed out while a response was still due (never expected): closing it fails the
            // exchange over to a fresh connection instead of pairing it with the wrong response.
            context.close(promise: nil)
            return
        }
        self.parser.requestSent(method: head.method)
        self.chunkedRequest = head.chunked
        // `clear()` keeps the storage when nothing else holds it any more, and gives fresh storage otherwise: bytes
        // still on their way out are never written over.
        var bytes = self.headBuffer.take() ?? context.channel.allocator.buffer(capacity: head.sizeHint)
        bytes.clear()
        head.write(into: &bytes)
        context.write(self.wrapOutboundOut(bytes), promise: nil)
        if bytes.capacity <= Self.maxKeptHeadBufferBytes {
            self.headBuffer = bytes
        }
    }

    /// Writes a body part (not flushed), as a chunk when the head said so.
    func sendBody(_ body: ByteBuffer) {
        guard let context = self.context, body.readableBytes > 0 else { return }  // An empty chunk would end the body.
        guard self.chunkedRequest else {
            context.write(self.wrapOutboundOut(body), promise: nil)
            return
        }
        var framed = context.channel.allocator.buffer(capacity: min(body.readableBytes, ByteBuffer.http1CopyLimit) + 24)
        framed.writeChunkSizeLine(body.readableBytes)
        if body.readableBytes <= ByteBuffer.http1CopyLimit {
            framed.writeImmutableBuffer(body)
            framed.writeStaticString("\r\n")
            context.write(self.wrapOutboundOut(framed), promise: nil)
        } else {
            // A large part is not copied: size line, the part, then its CRLF.
            context.write(self.wrapOutboundOut(framed), promise: nil)
            context.write(self.wrapOutboundOut(body), promise: nil)
            context.write(self.wrapOutboundOut(ByteBuffer(string: "\r\n")), promise: nil)
        }
    }

    /// Ends the request body (the last chunk; nothing for a body of known length). Client trailers are never
    /// forwarded: they would carry fields past the rewriter.
    func sendEnd() {
        guard let context = self.context, self.chunkedRequest else { return }
        self.chunkedRequest = false
        context.write(self.wrapOutboundOut(ByteBuffer(string: "0\r\n\r\n")), promise: nil)
    }

    /// Whether bytes written for the request may not have reached the backend yet: a flush waits for the end of
    /// the tick (``UpstreamFlushBatch``), or NIO holds writes the socket has not taken (not writable). A response
    /// head that arrives meanwhile was sent before the backend had the whole request, however the exchange's own
    /// reading of the client has ended.
    var requestMayBeUnsent: Bool {
        self.flushPending || !self.isWritable
    }

    /// Flushes what was written, at the end of the loop's tick (see ``UpstreamFlushBatch``).
    func flush() {
        guard let batch = self.flushBatch else {
            self.context?.flush()
            return
        }
        guard !self.flushPending, self.context != nil else { return }
        self.flushPending = true
        batch.add(self)
    }

    /// The deferred flush itself, called by the batch.
    func flushNow() {
        self.flushPending = false
        self.context?.flush()
    }

    // MARK: The response.

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.isInReadBatch = true
        var buffer = self.unwrapInboundIn(data)
        do {
            while let part = try self.parser.next(from: &buffer) {
                if case .end = part, buffer.readableBytes > 0 {
                    self.desynchronized = true  // Before the exchange sees the end and releases the connection.
                }
                guard let receiver = self.receiver else {
                    // A response with no exchange waiting for it: the connection can never be reused.
                    context.close(promise: nil)
                    return
                }
                receiver.upstreamReceived(part)
            }
        } catch {
            let receiver = self.receiver
            self.receiver = nil
            receiver?.upstreamFailed(error)
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.isInReadBatch = false
        self.receiver?.upstreamReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.channelClosed()
        context.fireChannelInactive()
    }

    /// Also the close of a channel that never became fully active: NIO succeeds the connect promise before it
    /// fires `channelActive`, and a channel closed from that promise's callbacks (a fresh connection given back
    /// by an exchange whose client went away while it connected) fires only `channelUnregistered`, never
    /// `channelInactive`. Without this the pool would never hear of the close, and the connection's slot
    /// (``UpstreamPool``'s count against `max_connections_per_target`) would be lost for good.
    func channelUnregistered(context: ChannelHandlerContext) {
        self.channelClosed()
        context.fireChannelUnregistered()
    }

    /// The connect promise succeeded: the channel is open, although NIO fires `channelActive` only after that
    /// promise's callbacks, in which the pool hands the connection out (or back, to be kept idle).
    func connected() {
        if let context = self.context {
            self.isOpen = context.channel.isActive
        }
    }

    /// The channel closed (`channelInactive`, or `channelUnregistered` when it never became fully active):
    /// ends the exchange on it and tells the pool, once.
    private func channelClosed() {
        guard !self.closeHandled else { return }
        self.closeHandled = true
        self.isOpen = false
        // A body that runs until the close ends here; anything else unfinished is a failure.
        do {
            if let end = try self.parser.connectionClosed() {
                self.receiver?.upstreamReceived(end)
            }
        } catch {}
        self.handshakePromise.take()?.fail(UpstreamError.connectionClosed)
        let receiver = self.receiver
        self.receiver = nil
        receiver?.upstreamFailed(UpstreamError.connectionClosed)
        self.onClose?()
        self.onClose = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.handshakePromise.take()?.fail(error)
        let receiver = self.receiver
        self.receiver = nil
        receiver?.upstreamFailed(error)
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.isWritable = context.channel.isWritable
        self.receiver?.upstreamWritabilityChanged(isWritable: self.isWritable)
    }

    func read(context: ChannelHandlerContext) {
        if self.readingPaused {
            self.pendingRead = true
        } else {
            context.read()
        }
    }

    func pauseReading() {
        self.readingPaused = true
    }

    /// Lets reads through again and replays the one held back, through the whole pipeline from its tail.
    func resumeReading(channel: any Channel) {
        self.readingPaused = false
        if self.pendingRead {
            self.pendingRead = false
            channel.read()
        }
    }
}

@available(*, unavailable)
extension UpstreamResponseHandler: Sendable {}

/// Why an exchange with a backend failed; mapped to 502/503/504 by the connection handler.
struct UpstreamError: Error, Hashable, CustomStringConvertible {
    let code: String
    var description: String { self.code }

    static let connectionClosed = UpstreamError(code: "upstream_closed")
    static let noTargetAvailable = UpstreamError(code: "no_upstream_available")
    static let connectFailed = UpstreamError(code: "upstream_connect_failed")
    static let responseTimeout = UpstreamError(code: "upstream_timeout")
    static let malformedResponse = UpstreamError(code: "upstream_malformed_response")
}

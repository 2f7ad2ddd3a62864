//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateNghttp2
import CTokengateShims
import NIOCore
import TokengateTLS

/// The top of an HTTP/2 bench connection's pipeline, right after the TLS handler: one libnghttp2 client
/// session, many streams. Sends prepared requests as streams, hands answers, resets, GOAWAY and connection
/// events to its owner: the load generator's ConnectionSlot (`run --http 2`) or the idle command's
/// IdleHTTP2Client (`idle --http 2`). Thin on purpose; the owner decides.
///
/// ### ALPN
/// The session is created only once the handshake completed with ALPN `h2`. Any other outcome (the server
/// chose `http/1.1`, or no protocol at all) is reported to the owner as `alpn_not_h2` and the connection is
/// closed: a bench that silently fell back to HTTP/1.1 would measure the wrong thing.
///
/// ### The reentrancy rule (as in the gateway's HTTP2ServerCodec)
/// nghttp2 must never be entered from inside one of its own callbacks, and the owner must never run while
/// nghttp2 is on the stack (it may submit a request or close the channel). So the callbacks
/// (`BenchHTTP2Handler+Callbacks.swift`) only *record*: a response's status, the end of a stream, a closed
/// stream, a GOAWAY. Everything else happens in ``process()``, in rounds of:
/// 1. feed queued input to `mem_recv`;
/// 2. deliver the recorded events to the owner (which may call ``send(_:)``: `nghttp2_submit_request` is
///    safe here, nghttp2 is not on the stack);
/// 3. drain `mem_send` into one buffer, write and flush it (its callbacks may record more events: another
///    round delivers them).
///
/// A ``flush()`` from the owner outside a round (a fixed-rate timer) runs one round at once; inside a round
/// it only asks for another.
final class BenchHTTP2Handler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = Never
    typealias OutboundIn = Never
    typealias OutboundOut = ByteBuffer

    /// What a callback recorded for the owner, delivered in order after nghttp2 returned.
    enum Event {
        /// A stream closed; `code` is the RST_STREAM (or GOAWAY-refusal) error code, 0 for a normal close.
        case streamClosed(Int32, code: UInt32)
        case goaway(code: UInt32)
    }

    /// A stream's answer as the callbacks saw it.
    struct Stream {
        /// The request body still to be sent (pulled by the data provider during `mem_send`).
        var body: ByteBuffer?
        /// The last `:status` received (a final status overrides an informational one).
        var status = 0
        /// END_STREAM arrived from the server: the answer is complete.
        var ended = false
    }

    private let owner: BenchHTTP2Owner
    private var context: ChannelHandlerContext?
    /// Created when the handshake completed with `h2`; deleted in `handlerRemoved` or `deinit`.
    private var session: OpaquePointer?
    var streams: [Int32: Stream] = [:]
    var events = CircularBuffer<Event>(initialCapacity: 16)
    private var pendingInput = CircularBuffer<ByteBuffer>(initialCapacity: 2)
    private var processing = false
    private var needsProcessing = false
    /// Closed or closing: nothing more is fed to nghttp2 or delivered.
    private var closed = false
    private var lastWrite: EventLoopFuture<Void>?

    /// Bytes taken from nghttp2 per write, at most (then writability is looked at again).
    private static let maxBytesPerFlush = 256 * 1024

    init(owner: BenchHTTP2Owner) {
        self.owner = owner
    }

    deinit {
        if let session = self.session {
            nghttp2_session_del(session)
        }
    }

    // MARK: Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.closed = true
        self.context = nil
        // Never while a round runs: nghttp2 may still be on the stack below us.
        if !self.processing, let session = self.session {
            self.session = nil
            nghttp2_session_del(session)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted(let negotiated, _, let version) = event {
            self.handshakeCompleted(context: context, alpn: negotiated, tlsVersion: version)
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func handshakeCompleted(context: ChannelHandlerContext, alpn: String?, tlsVersion: String) {
        guard alpn == "h2" else {
            let chosen = alpn.map { "the server chose ALPN '\($0)'" } ?? "the server selected no ALPN protocol"
            self.fail(BenchError("alpn_not_h2", "\(chosen); --http 2 needs 'h2' (is HTTP/2 enabled on the server?)"))
            return
        }
        do {
            self.session = try self.makeSession()
        } catch {
            self.fail(BenchError("h2_session", "\(error)"))
            return
        }
        self.owner.handshakeCompleted(self, alpn: alpn, tlsVersion: tlsVersion)
        // The client preface and SETTINGS go out now, with whatever requests the owner just submitted.
        self.process()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.closed, self.session != nil else { return }
        self.pendingInput.append(self.unwrapInboundIn(data))
        self.process()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.fail(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.closed = true
        self.streams.removeAll()
        self.events.removeAll()
        self.owner.channelClosed()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            self.process()
        }
        context.fireChannelWritabilityChanged()
    }

    /// Reports `error` to the owner once and closes the connection.
    private func fail(_ error: any Error) {
        guard !self.closed else { return }
        self.closed = true
        self.owner.channelError(error)
        self.context?.close(promise: nil)
    }

    // MARK: What the owner calls

    /// Submits `request` as a new stream and returns its id, the owner's tag for it; nil when the session
    /// takes no new stream (closed, GOAWAY received, stream ids exhausted). Never called from a callback.
    func send(_ request: PreparedRequest) -> Int32? {
        guard !self.closed, let session = self.session, let block = request.http2 else { return nil }
        let hasBody = (block.body?.readableBytes ?? 0) > 0
        let id = block.bytes.withUnsafeBytes { bytes in
            block.lengths.withUnsafeBufferPointer { lengths in
                block.neverIndex.withUnsafeBufferPointer { neverIndex in
                    CTokengateShims_nghttp2_submit_request(
                        session, bytes.baseAddress, lengths.baseAddress, neverIndex.baseAddress, block.count,
                        hasBody ? readRequestBody : nil
                    )
                }
            }
        }
        guard id > 0 else { return nil }
        self.streams[id] = Stream(body: hasBody ? block.body : nil)
        return id
    }

    /// Sends what was submitted: now, or at the end of the running round.
    func flush() {
        self.process()
    }

    /// GOAWAY (NO_ERROR) to the server, then the TLS close.
    func close() {
        guard !self.closed else { return }
        if let session = self.session, let context = self.context, !self.processing {
            // Outside a round only: nghttp2 must not be on the stack. Inside one the GOAWAY is skipped; the
            // TLS close_notify still ends the connection cleanly.
            nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
            self.drain(session, context: context)
        }
        self.closed = true
        guard let context = self.context else { return }
        if let lastWrite = self.lastWrite {
            lastWrite.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        } else {
            context.close(promise: nil)
        }
    }

    // MARK: The processing round

    /// Runs rounds until nothing is left to do. See the type's documentation for the order and why.
    private func process() {
        if self.processing {
            self.needsProcessing = true
            return
        }
        guard let context = self.context, let session = self.session else { return }
        self.processing = true
        repeat {
            self.needsProcessing = false
            self.feedInput(session)
            self.deliverEvents()
            self.drain(session, context: context)
            if !self.events.isEmpty { self.needsProcessing = true }
        } while self.needsProcessing && !self.closed
        self.processing = false
        if self.context == nil, let session = self.session {
            // handlerRemoved ran during the round and left the deletion to us.
            self.session = nil
            nghttp2_session_del(session)
            return
        }
        if !self.closed, nghttp2_session_want_read(session) == 0, nghttp2_session_want_write(session) == 0 {
            // After a GOAWAY, once the streams it lets finish are done: a slot reconnects if it wants to.
            self.close()
        }
    }

    /// Step 1: `mem_recv` takes every byte (no callback pauses it); a negative result ends the connection.
    private func feedInput(_ session: OpaquePointer) {
        while let buffer = self.pendingInput.popFirst() {
            guard !self.closed else {
                self.pendingInput.removeAll()
                return
            }
            let result = buffer.withUnsafeReadableBytes { bytes in
                nghttp2_session_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
            }
            if result < 0 {
                let reason = String(cString: nghttp2_strerror(Int32(truncatingIfNeeded: result)))
                self.fail(BenchError("h2_protocol", "h2: \(reason)"))
                return
            }
        }
    }

    /// Step 2: hands recorded events to the owner, which may submit more requests or close.
    private func deliverEvents() {
        while !self.closed, let event = self.events.popFirst() {
            switch event {
            case .streamClosed(let id, let code):
                guard let stream = self.streams.removeValue(forKey: id) else { continue }
                if stream.ended, stream.status > 0, code == NGHTTP2_NO_ERROR.rawValue {
                    self.owner.responseCompleted(stream: id, status: stream.status)
                } else {
                    self.owner.streamFailed(stream: id, reason: "h2 stream reset: \(Self.errorName(code))")
                }
            case .goaway(let code):
                self.owner.goawayReceived(reason: "h2 goaway: \(Self.errorName(code))")
            }
        }
    }

    /// Step 3: nghttp2's output into one buffer, written and flushed; stops while the channel is not writable
    /// (the rest stays in nghttp2 until `channelWritabilityChanged`).
    private func drain(_ session: OpaquePointer, context: ChannelHandlerContext) {
        var finished = false
        while !finished, !self.closed, context.channel.isWritable {
            var buffer = context.channel.allocator.buffer(capacity: 16 * 1024)
            while buffer.readableBytes < Self.maxBytesPerFlush {
                var data: UnsafePointer<UInt8>? = nil
                let count = nghttp2_session_mem_send(session, &data)
                if count < 0 {
                    let reason = String(cString: nghttp2_strerror(Int32(truncatingIfNeeded: count)))
                    self.fail(BenchError("h2_protocol", "h2: \(reason)"))
                    return
                }
                guard count > 0, let data else {
                    finished = true
                    break
                }
                buffer.writeBytes(UnsafeRawBufferPointer(start: data, count: count))
            }
            if buffer.readableBytes > 0 {
                self.lastWrite = context.writeAndFlush(self.wrapOutboundOut(buffer))
            }
        }
    }

    /// RFC 9113 §7 error code names, for the report.
    static func errorName(_ code: UInt32) -> String {
        switch code {
        case 0x0: "NO_ERROR"
        case 0x1: "PROTOCOL_ERROR"
        case 0x2: "INTERNAL_ERROR"
        case 0x3: "FLOW_CONTROL_ERROR"
        case 0x4: "SETTINGS_TIMEOUT"
        case 0x5: "STREAM_CLOSED"
        case 0x6: "FRAME_SIZE_ERROR"
        case 0x7: "REFUSED_STREAM"
        case 0x8: "CANCEL"
        case 0x9: "COMPRESSION_ERROR"
        case 0xa: "CONNECT_ERROR"
        case 0xb: "ENHANCE_YOUR_CALM"
        case 0xc: "INADEQUATE_SECURITY"
        case 0xd: "HTTP_1_1_REQUIRED"
        default: "0x" + String(code, radix: 16)
        }
    }
}

@available(*, unavailable)
extension BenchHTTP2Handler: Sendable {}

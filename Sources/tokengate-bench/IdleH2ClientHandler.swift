//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateTLS

/// `tokengate-bench idle --http 2`: the smallest HTTP/2 client that gets one request answered and then keeps
/// the connection open and quiet. Right above the TLS handler (ALPN `h2`): it sends the preface, an empty
/// SETTINGS, and one GET on stream 1 as a single HEADERS frame; it acknowledges the server's SETTINGS and
/// PINGs, and completes the attempt when stream 1 ends.
///
/// The request's header block uses only HPACK literals without indexing (with static-table names) and no
/// Huffman coding, so no encoder state is needed. The status is read only when the response's first header
/// field is an indexed static-table `:status` (what servers send for 200, 204, 206, 304, 400, 404 and 500);
/// anything else is reported as status 0. Frames larger than 1 MiB are refused (the bench's own bound).
///
/// Confined to its channel's event loop.
final class IdleH2ClientHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let request: PreparedRequest
    private let authority: String
    private let attempt: IdleClientHandler.Attempt
    private let answerTimeout: TimeAmount
    private var timer: Scheduled<Void>?
    private var pending = ByteBuffer()
    private var status = 0
    private var lastError: String?

    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    private static let maxFrame = 1 << 20

    init(request: PreparedRequest, authority: String, attempt: IdleClientHandler.Attempt, answerTimeout: TimeAmount) {
        self.request = request
        self.authority = authority
        self.attempt = attempt
        self.answerTimeout = answerTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: self.answerTimeout) {
            self.timer = nil
            guard !self.attempt.isSettled else { return }
            self.attempt.fail(BenchError("timeout", "no answer within \(self.answerTimeout)"))
            context.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.attempt.fail(BenchError("closed", self.lastError ?? "connection closed before the answer"))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted(let negotiated, _, _) = event {
            guard negotiated == "h2" else {
                self.lastError = "ALPN gave \(negotiated ?? "nothing"), not h2"
                context.close(promise: nil)
                return
            }
            var out = context.channel.allocator.buffer(capacity: 1024)
            out.writeBytes(Self.preface)
            Self.writeFrameHeader(length: 0, type: 0x4, flags: 0, stream: 0, into: &out)  // SETTINGS
            let block = self.headerBlock()
            // HEADERS on stream 1: END_STREAM (0x1) | END_HEADERS (0x4).
            Self.writeFrameHeader(length: block.count, type: 0x1, flags: 0x5, stream: 1, into: &out)
            out.writeBytes(block)
            context.writeAndFlush(self.wrapOutboundOut(out), promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = self.unwrapInboundIn(data)
        self.pending.writeBuffer(&incoming)
        while self.pending.readableBytes >= 9 {
            let start = self.pending.readerIndex
            guard let high = self.pending.getInteger(at: start, as: UInt8.self),
                let low = self.pending.getInteger(at: start + 1, as: UInt16.self),
                let type = self.pending.getInteger(at: start + 3, as: UInt8.self),
                let flags = self.pending.getInteger(at: start + 4, as: UInt8.self),
                let stream = self.pending.getInteger(at: start + 5, as: UInt32.self)
            else { return }
            let length = Int(high) << 16 | Int(low)
            guard length <= Self.maxFrame else {
                self.lastError = "frame of \(length) bytes"
                context.close(promise: nil)
                return
            }
            guard self.pending.readableBytes >= 9 + length else { break }
            self.pending.moveReaderIndex(forwardBy: 9)
            let payload = self.pending.readSlice(length: length)!
            self.frame(type: type, flags: flags, stream: stream & 0x7FFF_FFFF, payload: payload, context: context)
        }
        self.pending.discardReadBytes()
    }

    private func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: ByteBuffer, context: ChannelHandlerContext) {
        switch type {
        case 0x1 where stream == 1:  // HEADERS
            if self.status == 0, let first = payload.getInteger(at: payload.readerIndex + Self.headerBlockOffset(flags), as: UInt8.self) {
                self.status = Self.staticStatus[first] ?? 0
            }
            if flags & 0x1 != 0 { self.answered() }
        case 0x0 where stream == 1:  // DATA
            if flags & 0x1 != 0 { self.answered() }
        case 0x4 where flags & 0x1 == 0:  // SETTINGS from the server: acknowledge
            var out = context.channel.allocator.buffer(capacity: 9)
            Self.writeFrameHeader(length: 0, type: 0x4, flags: 0x1, stream: 0, into: &out)
            context.writeAndFlush(self.wrapOutboundOut(out), promise: nil)
        case 0x6 where flags & 0x1 == 0:  // PING: answer with the same payload
            var out = context.channel.allocator.buffer(capacity: 17)
            Self.writeFrameHeader(length: payload.readableBytes, type: 0x6, flags: 0x1, stream: 0, into: &out)
            out.writeImmutableBuffer(payload)
            context.writeAndFlush(self.wrapOutboundOut(out), promise: nil)
        case 0x7:  // GOAWAY
            self.lastError = "GOAWAY"
        case 0x3 where stream == 1:  // RST_STREAM
            self.lastError = "RST_STREAM on the request"
            context.close(promise: nil)
        default:
            break
        }
    }

    private func answered() {
        self.timer?.cancel()
        self.timer = nil
        self.attempt.succeed(status: self.status)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let tls = error as? TLSError {
            self.lastError = "tls: \(tls.code)"
        } else {
            self.lastError = String(String(describing: error).prefix(80))
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.attempt.fail(BenchError("closed", self.lastError ?? "connection closed before the answer"))
        context.fireChannelInactive()
    }

    // MARK: Encoding.

    /// HPACK static-table indices of `:status` values (RFC 7541 Appendix A), as indexed header field bytes.
    private static let staticStatus: [UInt8: Int] = [
        0x88: 200, 0x89: 204, 0x8A: 206, 0x8B: 304, 0x8C: 400, 0x8D: 404, 0x8E: 500,
    ]

    /// Where the header block starts in a HEADERS payload: after the pad length and the priority fields.
    private static func headerBlockOffset(_ flags: UInt8) -> Int {
        (flags & 0x8 != 0 ? 1 : 0) + (flags & 0x20 != 0 ? 5 : 0)
    }

    /// `:method GET`, `:scheme https` (indexed), then `:path`, `:authority` and the request's own headers
    /// (lowercased; Host is :authority) as literals without indexing.
    private func headerBlock() -> [UInt8] {
        var block: [UInt8] = [0x82, 0x87]
        Self.literal(nameIndex: 4, value: self.request.head.uri, into: &block)
        Self.literal(nameIndex: 1, value: self.authority, into: &block)
        for (name, value) in self.request.head.headers where name.lowercased() != "host" {
            block.append(0x00)
            Self.string(name.lowercased(), into: &block)
            Self.string(value, into: &block)
        }
        return block
    }

    private static func literal(nameIndex: Int, value: String, into block: inout [UInt8]) {
        Self.integer(nameIndex, prefixBits: 4, firstByte: 0x00, into: &block)
        Self.string(value, into: &block)
    }

    private static func string(_ text: String, into block: inout [UInt8]) {
        let bytes = Array(text.utf8)
        Self.integer(bytes.count, prefixBits: 7, firstByte: 0x00, into: &block)
        block.append(contentsOf: bytes)
    }

    /// RFC 7541 §5.1 integer with an N-bit prefix.
    private static func integer(_ value: Int, prefixBits: Int, firstByte: UInt8, into block: inout [UInt8]) {
        let limit = (1 << prefixBits) - 1
        if value < limit {
            block.append(firstByte | UInt8(value))
            return
        }
        block.append(firstByte | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            block.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        block.append(UInt8(rest))
    }

    private static func writeFrameHeader(length: Int, type: UInt8, flags: UInt8, stream: UInt32, into out: inout ByteBuffer) {
        out.writeInteger(UInt8(truncatingIfNeeded: length >> 16))
        out.writeInteger(UInt16(truncatingIfNeeded: length))
        out.writeInteger(type)
        out.writeInteger(flags)
        out.writeInteger(stream)
    }
}

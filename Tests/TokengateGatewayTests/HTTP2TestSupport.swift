//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateNghttp2
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
import TokengateHTTP
import TokengateHTTPTestSupport

@testable import TokengateGateway

// MARK: Hand-built frames (RFC 9113 §4.1) and an HPACK encoder that only emits literals.

/// One HTTP/2 frame as the tests build and read them.
struct H2Frame: Equatable, CustomStringConvertible {
    static let data: UInt8 = 0x0, headers: UInt8 = 0x1, priority: UInt8 = 0x2, rstStream: UInt8 = 0x3
    static let settings: UInt8 = 0x4, ping: UInt8 = 0x6, goaway: UInt8 = 0x7, windowUpdate: UInt8 = 0x8
    static let continuation: UInt8 = 0x9
    static let endStream: UInt8 = 0x1, ack: UInt8 = 0x1, endHeaders: UInt8 = 0x4

    var type: UInt8
    var flags: UInt8
    var stream: Int32
    var payload: [UInt8]

    var description: String { "frame(type: \(self.type), flags: \(self.flags), stream: \(self.stream), \(self.payload.count) bytes)" }

    var bytes: [UInt8] {
        let length = self.payload.count
        var out: [UInt8] = [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), self.type, self.flags]
        out += Self.uint32(UInt32(bitPattern: self.stream) & 0x7fff_ffff)
        return out + self.payload
    }

    static func uint32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }

    /// The connection preface and an empty SETTINGS frame.
    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + H2Frame(type: settings, flags: 0, stream: 0, payload: []).bytes

    static func settingsAck() -> H2Frame { H2Frame(type: settings, flags: ack, stream: 0, payload: []) }

    static func settings(_ entries: [(UInt16, UInt32)]) -> H2Frame {
        var payload: [UInt8] = []
        for (id, value) in entries { payload += [UInt8(id >> 8), UInt8(id & 0xff)] + uint32(value) }
        return H2Frame(type: settings, flags: 0, stream: 0, payload: payload)
    }

    /// HEADERS with END_HEADERS; `fields` are HPACK literals without indexing.
    static func headers(_ stream: Int32, _ fields: [(String, String)], endStream: Bool, endHeaders: Bool = true) -> H2Frame {
        H2Frame(
            type: headers,
            flags: (endStream ? Self.endStream : 0) | (endHeaders ? Self.endHeaders : 0),
            stream: stream,
            payload: HPACKLiteral.encode(fields)
        )
    }

    static func request(_ stream: Int32, method: String = "GET", path: String, authority: String = "example.test",
                        extra: [(String, String)] = [], endStream: Bool = true) -> H2Frame {
        .headers(stream, [(":method", method), (":scheme", "https"), (":authority", authority), (":path", path)] + extra, endStream: endStream)
    }

    static func data(_ stream: Int32, _ bytes: [UInt8], endStream: Bool = false) -> H2Frame {
        H2Frame(type: data, flags: endStream ? Self.endStream : 0, stream: stream, payload: bytes)
    }

    static func windowUpdate(_ stream: Int32, _ increment: UInt32) -> H2Frame {
        H2Frame(type: windowUpdate, flags: 0, stream: stream, payload: uint32(increment))
    }

    static func ping(_ value: UInt8 = 1) -> H2Frame {
        H2Frame(type: ping, flags: 0, stream: 0, payload: [UInt8](repeating: value, count: 8))
    }

    static func rstStream(_ stream: Int32, _ code: UInt32) -> H2Frame {
        H2Frame(type: rstStream, flags: 0, stream: stream, payload: uint32(code))
    }

    static func priority(_ stream: Int32) -> H2Frame {
        H2Frame(type: priority, flags: 0, stream: stream, payload: uint32(0) + [15])
    }

    /// Splits `bytes` into frames (the server only ever writes whole frames).
    static func parse(_ bytes: [UInt8]) -> [H2Frame] {
        var frames: [H2Frame] = []
        var index = 0
        while bytes.count - index >= 9 {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            let stream = Int32(bitPattern: UInt32(bytes[index + 5]) << 24 | UInt32(bytes[index + 6]) << 16 | UInt32(bytes[index + 7]) << 8 | UInt32(bytes[index + 8])) & 0x7fff_ffff
            guard bytes.count - index - 9 >= length else { break }
            frames.append(H2Frame(type: bytes[index + 3], flags: bytes[index + 4], stream: stream, payload: Array(bytes[index + 9..<index + 9 + length])))
            index += 9 + length
        }
        return frames
    }

    /// GOAWAY's last stream id and error code.
    var goaway: (lastStream: Int32, code: UInt32)? {
        guard self.type == Self.goaway, self.payload.count >= 8 else { return nil }
        let p = self.payload
        return (Int32(bitPattern: UInt32(p[0]) << 24 | UInt32(p[1]) << 16 | UInt32(p[2]) << 8 | UInt32(p[3])) & 0x7fff_ffff,
                UInt32(p[4]) << 24 | UInt32(p[5]) << 16 | UInt32(p[6]) << 8 | UInt32(p[7]))
    }

    var errorCode: UInt32? {
        guard self.type == Self.rstStream, self.payload.count == 4 else { return nil }
        let p = self.payload
        return UInt32(p[0]) << 24 | UInt32(p[1]) << 16 | UInt32(p[2]) << 8 | UInt32(p[3])
    }

    var windowIncrement: UInt32? {
        guard self.type == Self.windowUpdate, self.payload.count == 4 else { return nil }
        let p = self.payload
        return (UInt32(p[0]) << 24 | UInt32(p[1]) << 16 | UInt32(p[2]) << 8 | UInt32(p[3])) & 0x7fff_ffff
    }
}

/// HPACK literal header fields without indexing and without Huffman coding (RFC 7541 §6.2.2): enough for
/// a client under test, and independent of the server's encoder.
enum HPACKLiteral {
    static func encode(_ fields: [(String, String)]) -> [UInt8] {
        var out: [UInt8] = []
        for (name, value) in fields {
            out.append(0x00)
            out += self.string(Array(name.utf8))
            out += self.string(Array(value.utf8))
        }
        return out
    }

    private static func string(_ bytes: [UInt8]) -> [UInt8] {
        self.integer(bytes.count, prefixBits: 7) + bytes
    }

    private static func integer(_ value: Int, prefixBits: Int) -> [UInt8] {
        let limit = (1 << prefixBits) - 1
        if value < limit { return [UInt8(value)] }
        var out = [UInt8(limit)]
        var rest = value - limit
        while rest >= 128 {
            out.append(UInt8(rest % 128 + 128))
            rest /= 128
        }
        out.append(UInt8(rest))
        return out
    }
}

/// Decodes the server's header blocks with nghttp2's HPACK inflater (one per connection: the dynamic table
/// is connection state).
final class HPACKDecoder {
    private var inflater: OpaquePointer?

    init() {
        nghttp2_hd_inflate_new(&self.inflater)
    }

    deinit {
        nghttp2_hd_inflate_del(self.inflater)
    }

    func decode(_ block: [UInt8]) -> [(String, String)] {
        var fields: [(String, String)] = []
        block.withUnsafeBufferPointer { buffer in
            var offset = 0
            while true {
                var nv = nghttp2_nv()
                var flags: Int32 = 0
                let consumed = nghttp2_hd_inflate_hd2(self.inflater, &nv, &flags, buffer.baseAddress! + offset, buffer.count - offset, 1)
                if consumed < 0 { fields.append(("!error", "\(consumed)")); return }
                offset += consumed
                if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                    fields.append((
                        String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self),
                        String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self)
                    ))
                }
                if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                    nghttp2_hd_inflate_end_headers(self.inflater)
                    return
                }
                if consumed == 0 && flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) == 0 { return }
            }
        }
        return fields
    }
}

// MARK: A test responder

/// What the responder saw, shared with the test.
final class H2ResponderLog {
    var heads: [ClientRequestHead] = []
    var bodies: [Int32: [UInt8]] = [:]
    var ends: [Int32: HTTPHeaders?] = [:]
    var resets: [(Int32, HTTP2ErrorCode)] = []
    var writability: [(Int32, Bool)] = []
    var streams: [Int32: HTTP2ServerStream] = [:]
}

/// Answers by path: `/hang` never answers; `/big?<n>` answers n bytes of "x" in 64 KiB writes;
/// `/trailers` answers with a trailer; `/noconsume` echoes without reporting bytes consumed; anything else
/// echoes "<method> <uri> <host>\n" and the body once the request ended.
final class H2TestResponder: HTTP2StreamHandler {
    let stream: HTTP2ServerStream
    let log: H2ResponderLog
    private var head: ClientRequestHead?
    private var body: [UInt8] = []

    init(stream: HTTP2ServerStream, log: H2ResponderLog) {
        self.stream = stream
        self.log = log
        log.streams[stream.id] = stream
    }

    static func factory(_ log: H2ResponderLog) -> HTTP2StreamHandlerFactory {
        { stream in H2TestResponder(stream: stream, log: log) }
    }

    func received(_ part: ClientRequestPart) {
        switch part {
        case .head(let head):
            self.head = head
            self.log.heads.append(head)
            if head.uri.hasPrefix("/big?") {
                let size = Int(head.uri.dropFirst(5)) ?? 0
                self.stream.writeHead(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["content-length": "\(size)"]))
                var left = size
                while left > 0 {
                    let chunk = min(left, 64 * 1024)
                    self.stream.writeBody(ByteBuffer(repeating: UInt8(ascii: "x"), count: chunk))
                    left -= chunk
                }
                self.stream.writeEnd(nil)
            }
        case .body(let buffer):
            self.body += buffer.readableBytesView
            self.log.bodies[self.stream.id, default: []] += buffer.readableBytesView
            if self.head?.uri != "/noconsume" {
                self.stream.consumed(bytes: buffer.readableBytes)
            }
        case .end(let trailers):
            self.log.ends[self.stream.id] = trailers
            guard let head = self.head, head.uri != "/hang", !head.uri.hasPrefix("/big?") else { return }
            var headers: HTTPHeaders = ["Content-Type": "text/plain", "Connection": "close", "X-Upper": "A", "Transfer-Encoding": "chunked"]
            if head.uri == "/trailers" { headers.remove(name: "Transfer-Encoding") }
            if head.uri == "/many" {
                for index in 0..<40 { headers.add(name: "x-field-\(index)", value: String(index)) }
            }
            self.stream.writeHead(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))
            let text = "\(head.method.rawValue) \(head.uri) \(head.headers.first(name: "host") ?? "-")\n"
            self.stream.writeBody(ByteBuffer(string: text))
            if !self.body.isEmpty { self.stream.writeBody(ByteBuffer(bytes: self.body)) }
            self.stream.writeEnd(head.uri == "/trailers" ? ["x-checksum": "42"] : nil)
        }
    }

    func streamReset(_ code: HTTP2ErrorCode) {
        self.log.resets.append((self.stream.id, code))
    }

    func writabilityChanged(_ writable: Bool) {
        self.log.writability.append((self.stream.id, writable))
    }

    func drainEnded() {}
}

// MARK: The codec in an EmbeddedChannel, with a hand-driven client.

final class H2EmbeddedClient {
    let channel: EmbeddedChannel
    let codec: HTTP2ServerCodec
    let log = H2ResponderLog()
    let decoder = HPACKDecoder()
    /// Every frame the server wrote so far.
    private(set) var received: [H2Frame] = []

    /// - Parameter logs: where the codec's log lines go (from `info` up), when a test reads them.
    init(configuration: HTTP2ServerConfiguration = HTTP2ServerConfiguration(), logs: LogCapture? = nil) throws {
        self.channel = EmbeddedChannel()
        var logger = logs.map { logs in Logger(label: "h2-test") { logs.handler(label: $0) } } ?? Logger(label: "h2-test")
        logger.logLevel = logs == nil ? .critical : .info
        let codec = HTTP2ServerCodec(configuration: configuration, logger: logger, makeHandler: H2TestResponder.factory(self.log))
        self.codec = codec
        try self.channel.pipeline.syncOperations.addHandler(codec)
        try self.channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
    }

    /// Sends the preface (and acknowledges the server's SETTINGS).
    func handshake() throws {
        try self.send(bytes: H2Frame.preface + H2Frame.settingsAck().bytes)
    }

    func send(_ frames: H2Frame...) throws {
        try self.send(bytes: frames.flatMap(\.bytes))
    }

    func send(bytes: [UInt8]) throws {
        guard self.channel.isActive else { return }
        try self.channel.writeInbound(ByteBuffer(bytes: bytes))
    }

    /// Runs scheduled work and collects what the server wrote since the last call.
    @discardableResult
    func read() throws -> [H2Frame] {
        self.channel.embeddedEventLoop.run()
        var bytes: [UInt8] = []
        while let buffer = try self.channel.readOutbound(as: ByteBuffer.self) {
            bytes += buffer.readableBytesView
        }
        let frames = H2Frame.parse(bytes)
        self.received += frames
        return frames
    }

    /// The decoded fields of every HEADERS frame in `frames`, in order.
    func headerBlocks(_ frames: [H2Frame]) -> [(stream: Int32, fields: [(String, String)], endStream: Bool)] {
        frames.filter { $0.type == H2Frame.headers }.map { ($0.stream, self.decoder.decode($0.payload), $0.flags & H2Frame.endStream != 0) }
    }

    var isClosed: Bool { !self.channel.isActive }

    /// Lets the close linger pass.
    func lingerOver() throws {
        self.channel.embeddedEventLoop.advanceTime(by: HTTP2ServerConfiguration().closeLinger)
        try self.read()
    }

    func finish() {
        _ = try? self.channel.finish(acceptAlreadyClosed: true)
    }
}

extension Array where Element == (String, String) {
    func value(_ name: String) -> String? { self.first { $0.0 == name }?.1 }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOHTTP1
import TokengateHTTP

/// Looks once at the first byte a TLS listener receives, in front of the TLS handler.
///
/// A TLS connection opens with a handshake record (content type 22), or an SSLv2-style hello (high bit set);
/// a client that sends plain HTTP to the HTTPS port (`http://host:443/`, a misconfigured health check) opens
/// with a method, whose first byte is an uppercase letter. That client gets a readable `400` (JSON, `tls_required`) that says what
/// went wrong, as nginx's does, instead of a TLS alert it cannot read and a closed connection. Anything else
/// passes to the TLS handler untouched, and this handler removes itself after the first read either way, so
/// a connection pays for it once, never per request.
final class PlainHTTPOnTLSPortHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let logger: Logger
    /// `log.access_log`: the refusal gets a `request` line like any answer, else the shorter info line.
    private let accessLog: Bool
    /// The client address a PROXY protocol header in front gave (``ProxyProtocolHandler``, which has read it
    /// by the time the first byte after it arrives here): the line's `client`, as on every other answer.
    private let proxiedAddress: ProxiedAddress?
    private let onRefused: () -> Void

    /// - Parameter onRefused: called when a connection is refused this way (the TLS failure metric).
    init(logger: Logger, accessLog: Bool = false, proxiedAddress: ProxiedAddress? = nil, onRefused: @escaping () -> Void) {
        self.logger = logger
        self.accessLog = accessLog
        self.proxiedAddress = proxiedAddress
        self.onRefused = onRefused
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        guard let first = buffer.readableBytesView.first else {
            context.fireChannelRead(data)  // Nothing to judge yet: wait for a byte.
            return
        }
        guard first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z") else {
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            return
        }
        self.onRefused()
        let answer = GatewayAnswer.plainHTTPOnTLSPort()
        if self.accessLog {
            var record = AccessLogRecord(status: answer.status.code, reason: answer.reasonCode)
            record.client = self.proxiedAddress?.address ?? context.channel.remoteAddress?.ipAddress
            (record.method, record.target, record.protocolName) = Self.requestLine(buffer)
            self.logger.info("request", metadata: record.metadata)
        } else {
            self.logger.info(
                "plain HTTP on a TLS listener",
                metadata: ["peer": "\(self.proxiedAddress?.address ?? context.channel.remoteAddress?.description ?? "-")"]
            )
        }
        let response = answer.http1Response(version: .http1_1, requestMethod: .GET, allocator: context.channel.allocator)
        // Written past the TLS handler (this handler sits in front of it), then closed: nothing else is read.
        context.writeAndFlush(self.wrapOutboundOut(response)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}

extension PlainHTTPOnTLSPortHandler {
    /// The method, target and version of the request line at the start of `buffer`, as far as the first read
    /// holds it: each only when it looks like one (a method of capital letters, a target, `HTTP/1.x`), since
    /// nothing here parsed the request. The target is bounded and cleaned by ``AccessLogPath`` when written.
    static func requestLine(_ buffer: ByteBuffer) -> (method: String?, target: String?, version: String?) {
        let bytes = buffer.readableBytesView.prefix(8 << 10)
        let line = bytes.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }
        let parts = line.split(separator: UInt8(ascii: " "), maxSplits: 2, omittingEmptySubsequences: false)
        guard let first = parts.first, (1...16).contains(first.count),
            first.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") })
        else { return (nil, nil, nil) }
        let method = String(decoding: first, as: UTF8.self)
        guard parts.count >= 2, !parts[1].isEmpty else { return (method, nil, nil) }
        let target = String(decoding: parts[1], as: UTF8.self)
        guard parts.count == 3 else { return (method, target, nil) }
        let version = String(decoding: parts[2], as: UTF8.self)
        return (method, target, version == "HTTP/1.1" || version == "HTTP/1.0" ? version : nil)
    }
}

@available(*, unavailable)
extension PlainHTTPOnTLSPortHandler: Sendable {}

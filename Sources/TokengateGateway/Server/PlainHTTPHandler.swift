//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

/// The plain-HTTP listener: it never forwards (DESIGN §4). Every request gets 426 with a JSON error, or,
/// in `redirect` mode and for a route browsers use, a 308 redirect to the same path over https — without
/// the query, which may hold what should never have been sent in the clear.
final class PlainHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let mode: PlainHTTPMode
    private let httpsPort: Int?
    /// The routes of the generation the connection was accepted under, to tell browser routes from API ones.
    private let runtime: GatewayRuntime
    private var parser: HTTP1RequestParser
    /// The one answer was written: nothing more is read.
    private var answered = false
    /// The head deadline, and the idle timeout that closes a silent connection.
    private let readDeadlines: HTTP1ReadDeadlines
    /// For the access-log line each answer gets (when `log.access_log` is on).
    private let logger: Logger

    init(
        mode: PlainHTTPMode, httpsPort: Int?, runtime: GatewayRuntime, limits: LimitsConfiguration,
        readDeadlines: HTTP1ReadDeadlines, logger: Logger
    ) {
        self.logger = logger
        self.mode = mode
        self.httpsPort = httpsPort
        self.runtime = runtime
        self.parser = HTTP1RequestParser(limits: HTTP1RequestParser.Limits(limits))
        self.readDeadlines = readDeadlines
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive {
            self.startReadDeadlines(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.readDeadlines.stop()
    }

    func channelActive(context: ChannelHandlerContext) {
        self.startReadDeadlines(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.readDeadlines.stop()
        context.fireChannelInactive()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.readDeadlines.readBatchEnded(context: context)
        context.fireChannelReadComplete()
    }

    private func startReadDeadlines(context: ChannelHandlerContext) {
        // Nothing useful comes from a silent plain-HTTP connection.
        self.readDeadlines.start(context: context) { context.close(promise: nil) }
    }

    /// Answers the first request head, then closes; bytes that are not HTTP/1.1 get the same 400 (or 414,
    /// 431) the TLS listener gives them, and a close.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.answered else { return }
        var bytes = self.unwrapInboundIn(data)
        self.readDeadlines.bytesArrived(bytes.readableBytes)
        let part: ClientRequestPart?
        do {
            part = try self.parser.next(from: &bytes)
        } catch {
            self.answered = true
            let answer = GatewayAnswer.parseFailure(error)
            self.logAnswer(status: answer.status.code, reason: answer.reasonCode, head: nil, context: context)
            self.writeAndClose(answer, version: .http1_1, method: .GET, context: context)
            return
        }
        guard case .head(let head) = part else {
            self.readDeadlines.bytesParsed(context: context)  // A head begun and not whole: its deadline runs.
            return
        }
        self.readDeadlines.headReceived()
        self.answered = true
        switch self.mode {
        case .redirect where self.isBrowserRoute(head):
            // Where to send the browser is the host it asked for; without one that can go into `Location`
            // (none, two, or not a host name) there is nowhere to send it, and a made-up one would be wrong.
            guard let host = Self.redirectHost(head.fields.values(name: "host")) else {
                let answer = GatewayAnswer.malformedHTTP("a request needs exactly one Host header naming a host")
                self.logAnswer(status: answer.status.code, reason: answer.reasonCode, head: head, context: context)
                self.writeAndClose(answer, version: head.version, method: head.method, context: context)
                return
            }
            var serializer = HTTP1ResponseSerializer()
            var buffer = context.channel.allocator.buffer(capacity: 512)
            var headers = HTTPHeaders()
            let port = self.httpsPort.map { $0 == 443 ? "" : ":\($0)" } ?? ""
            let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "/"
            headers.add(name: "location", value: "https://\(host)\(port)\(path.hasPrefix("/") ? String(path) : "/")")
            headers.add(name: "content-length", value: "0")
            headers.add(name: "connection", value: "close")
            serializer.writeHead(
                HTTPResponseHead(version: head.version, status: .permanentRedirect, headers: headers),
                requestMethod: head.method,
                into: &buffer
            )
            serializer.writeEnd(nil, into: &buffer)
            self.logAnswer(status: 308, reason: "https_redirect", head: head, context: context)
            self.writeAndClose(buffer, context: context)
        case .redirect, .reject:
            let answer = GatewayAnswer.tlsRequired()
            self.logAnswer(status: answer.status.code, reason: answer.reasonCode, head: head, context: context)
            self.writeAndClose(answer, version: head.version, method: head.method, context: context)
        }
    }

    /// The access-log line of the one answer: the same members as a proxied request's that apply (no route,
    /// user or upstream: nothing here is routed or checked). A head that did not parse has only the client.
    private func logAnswer(status: UInt, reason: String, head: ClientRequestHead?, context: ChannelHandlerContext) {
        guard self.runtime.accessLog else { return }
        var record = AccessLogRecord(status: status, reason: reason)
        record.client = context.channel.remoteAddress?.ipAddress
        if let head {
            record.host = head.fields.first(name: "host")
            record.method = head.method.rawValue
            record.target = head.uri
            record.protocolName = AccessLogRecord.protocolName(head.version)
            record.userAgent = head.fields.first(name: "user-agent")
        }
        self.logger.info("request", metadata: record.metadata)
    }

    /// Whether `head` is for a route browsers use: a public route, a session-only route or a token page. Those
    /// get the redirect; a route that accepts api tokens, and a path no route serves, get the 426 with its
    /// JSON error even in `redirect` mode (DESIGN §4: an app's HTTP client would follow a redirect, re-sending
    /// its token, and should learn instead that it is misconfigured). Matched on the path as sent: nothing is
    /// forwarded here, so a path spelled to match another route only changes which refusal it gets.
    private func isBrowserRoute(_ head: ClientRequestHead) -> Bool {
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? "/"
        guard let index = self.runtime.routeTable.match(host: head.fields.first(name: "host"), path: path) else {
            return false
        }
        let route = self.runtime.routes[index]
        return route.tokenPage != nil || !(route.tokens?.accept.contains(.api) ?? false)
    }

    private func writeAndClose(
        _ answer: GatewayAnswer,
        version: HTTPVersion,
        method: HTTPMethod,
        context: ChannelHandlerContext
    ) {
        self.writeAndClose(answer.http1Response(version: version, requestMethod: method, allocator: context.channel.allocator), context: context)
    }

    private func writeAndClose(_ response: ByteBuffer, context: ChannelHandlerContext) {
        context.writeAndFlush(self.wrapOutboundOut(response)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// The host to redirect to, without its port: from exactly one `Host` that names a host (``HostFieldCheck``:
    /// not empty, not two, and nothing that would break out of `Location` or send the browser somewhere the
    /// request did not name); `nil` otherwise.
    static func redirectHost(_ hosts: [String]) -> String? {
        guard HostFieldCheck.problem(hosts, required: true, emptyAllowed: false) == nil else { return nil }
        let host = Substring(hosts[0]).trimmingOWS()
        if host.hasPrefix("["), let end = host.firstIndex(of: "]") {
            return String(host[...end])
        }
        return String(host.prefix { $0 != ":" })
    }
}

@available(*, unavailable)
extension PlainHTTPHandler: Sendable {}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import TokengateConfig
import TokengateGateway
import TokengateHTTP
import TokengateTLS

/// The admin listener: a small HTTP/1.1 server, separate from the public listeners, for the cutoff
/// admin API, health and readiness.
///
/// What each path does is the caller's (the executable wires the cutoff store's admin API in): this
/// type does the transport, the body limit and the authentication. When a secret is configured every
/// request must carry `Authorization: Bearer <secret>`, compared in constant time; `/healthz` stays open
/// and `/readyz` stay open so probes need no secret (they say nothing that needs one).
///
/// The listener is reachable by whoever can reach its port (off loopback that is the network), so it has
/// transport limits of its own: short deadlines for a request and between requests (``AdminConnectionPhase``),
/// a close after NIO's 400 answer to bytes that are not HTTP/1.1, and a cap on open connections
/// (``defaultMaxConnections``) that makes room for a new connection by closing the one that has waited longest
/// for a request (``AdminConnectionSlots``), so a flood of silent connections cannot keep the probes out.
public final class AdminServer: Sendable {
    /// Open admin connections at most. Probes, a metrics scraper and an operator need a handful: the cap only
    /// keeps a flood from taking the file descriptors the public listeners need.
    public static let defaultMaxConnections = 256

    /// How long a request (head and body) may take to arrive: from the connection's start, TLS handshake
    /// included, or from a later request's first byte. Admin requests are small and sent at once; a few
    /// seconds is ample even over a slow link, and short enough that silent connections do not pile up.
    public static let defaultRequestTimeout = Duration.seconds(5)

    /// How long a kept-alive connection may wait for its next request after an answer. A scraper that comes
    /// back less often reconnects, which costs it a millisecond.
    public static let defaultIdleTimeout = Duration.seconds(10)

    /// One admin request, read whole (bodies are small and bounded).
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var body: [UInt8]
        /// The peer's address (`ip:port`), for the audit line of a cutoff write.
        public var client: String?
    }

    public struct Response: Sendable {
        public var status: Int
        public var contentType: String
        public var body: String
        /// Extra response headers, such as `Allow` on a 405 (RFC 9110 §15.5.6 requires it there).
        public var headers: [(name: String, value: String)]

        public init(
            status: Int,
            contentType: String = "application/json",
            body: String,
            headers: [(name: String, value: String)] = []
        ) {
            self.status = status
            self.contentType = contentType
            self.body = body
            self.headers = headers
        }
    }

    public typealias Handler = @Sendable (Request) async -> Response

    private let channel: any Channel
    /// The listening socket's descriptor when the server was given one (`boundSocket`), for a binary hand-over
    /// to pass on; valid until ``stop()``.
    package let descriptor: CInt?

    private init(channel: any Channel, descriptor: CInt?) {
        self.channel = channel
        self.descriptor = descriptor
    }

    public var localAddress: SocketAddress? { self.channel.localAddress }

    /// Binds the admin listener.
    ///
    /// Each connection uses the TLS certificates in force when it is accepted, each request the secret in force
    /// when it arrives: a reload may replace both (``AdminCredentials``). Whether the listener speaks TLS is
    /// fixed at start (`admin` is restart-only).
    /// - Parameters:
    ///   - credentials: the bearer secret (`nil` when the listener is on loopback and needs none) and the
    ///     server context when the admin listener speaks TLS.
    ///   - requestTimeout: a request must arrive whole within this (``defaultRequestTimeout``).
    ///   - idleTimeout: after an answer, the next request must begin within this (``defaultIdleTimeout``).
    ///     Neither is the public listeners' `limits` value: see ``AdminConnectionPhase``.
    ///   - maxConnections: open admin connections at most (``AdminConnectionSlots``).
    ///   - boundSocket: a socket already bound to `host:port` (bound by the launcher, passed by systemd or by the
    ///     process handing over) to serve on instead of binding one; its descriptor is ``descriptor``.
    public static func start(
        host: String,
        port: Int,
        boundSocket: CInt? = nil,
        credentials: AdminCredentials,
        requestTimeout: Duration = AdminServer.defaultRequestTimeout,
        idleTimeout: Duration = AdminServer.defaultIdleTimeout,
        maxConnections: Int = AdminServer.defaultMaxConnections,
        group: any EventLoopGroup,
        logger: Logger,
        handler: @escaping Handler
    ) async throws -> AdminServer {
        let overTLS = credentials.files.tls != nil
        let slots = AdminConnectionSlots(limit: maxConnections)
        let backoff = AcceptBackoff(listener: "admin \(host):\(port)", logger: logger)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(backoff.handler()) }
            }
            // As the public listeners: with NIO's default of 128, a burst of connections fills the accept queue
            // and the kernel drops further SYNs, a probe's among them, which is then retried after a second.
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                guard backoff.admit(channel) else {
                    return channel.eventLoop.makeSucceededVoidFuture()
                }
                let admission = slots.admit(channel)
                if let overflow = slots.overflowToReport() {
                    // At most one line a second under a flood, with the counts since the last one.
                    logger.warning(
                        "admin connection limit reached",
                        metadata: ["limit": "\(slots.limit)", "evicted": "\(overflow.evicted)", "refused": "\(overflow.refused)"]
                    )
                }
                switch admission {
                case .admitted:
                    break
                case .admittedInPlaceOf(let waiting):
                    waiting.close(promise: nil)
                case .refused:
                    return channel.close()
                }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if overTLS, let tls = credentials.files.tls {
                        try sync.addHandler(TLSHandler(context: tls, logger: logger))
                    }
                    let phase = AdminConnectionPhase(
                        requestTimeout: TimeAmount(requestTimeout),
                        idleTimeout: TimeAmount(idleTimeout),
                        slots: slots
                    )
                    try sync.addHandler(AdminReadDeadlineHandler(phase: phase))
                    try sync.configureHTTPServerPipeline(withErrorHandling: true)
                    try sync.addHandler(
                        AdminConnectionHandler(credentials: credentials, overTLS: overTLS, phase: phase, handler: handler)
                    )
                }
            }
        let channel: any Channel
        if let boundSocket {
            channel = try await bootstrap.withBoundSocket(boundSocket).get()
            ListeningSocket.setBacklog(boundSocket)
        } else {
            channel = try await bootstrap.bind(host: host, port: port).get()
        }
        logger.info("admin listening", metadata: ["address": "\(host):\(port)", "tls": "\(overTLS)"])
        return AdminServer(channel: channel, descriptor: boundSocket)
    }

    public func stop() async {
        try? await self.channel.close()
    }
}

/// One admin connection: collects a request (up to 64 KiB of body), checks the secret, and hands the
/// request to the async handler, writing its answer back on the connection's loop.
package final class AdminConnectionHandler: ChannelInboundHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias OutboundOut = HTTPServerResponsePart

    package static let maxBodyBytes = 64 * 1024
    /// Read per request: a reload may have replaced the secret.
    private let credentials: AdminCredentials
    /// Over TLS a rebinding name fails the browser's certificate check, so any `Host` may be used.
    private let overTLS: Bool
    private let handler: AdminServer.Handler
    /// Shared with the ``AdminReadDeadlineHandler`` in front of the codec: this handler says when a request has
    /// arrived and when its answer is written.
    private let phase: AdminConnectionPhase
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    /// The request was answered before its body was read (``refusal(for:)``, or a body over the limit): the rest
    /// of it is ignored and the connection closes once the answer is out.
    private var answeredEarly = false

    package init(credentials: AdminCredentials, overTLS: Bool, phase: AdminConnectionPhase, handler: @escaping AdminServer.Handler) {
        self.credentials = credentials
        self.overTLS = overTLS
        self.phase = phase
        self.handler = handler
    }

    /// Refusals are decided on the head and answered at once, and the connection then closes: a body is read
    /// only for a request that will be served. Before, the whole body was read first (up to its end, however
    /// long), so anyone who could reach the port held admin connections — and with them the probes' slots —
    /// by trickling a body nobody would ever accept.
    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.phase.headArrived()
            self.head = head
            self.body = []
            self.answeredEarly = false
            if let refusal = self.refusal(for: head) {
                self.answerEarly(refusal, head: head, context: context)
            }
        case .body(let buffer):
            guard !self.answeredEarly, let head = self.head else { return }
            if self.body.count + buffer.readableBytes > Self.maxBodyBytes {
                self.answerEarly(Self.tooLarge, head: head, context: context)
            } else {
                self.body += buffer.readableBytesView
            }
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            guard !self.answeredEarly else { return }
            guard self.phase.requestReceived() else {
                // Evicted at the cap while the request was arriving: the connection is being closed.
                context.close(promise: nil)
                return
            }
            self.respond(to: head, context: context)
        }
    }

    private static let tooLarge = AdminServer.Response(status: 413, body: error("payload_too_large", "the request body is too large"))

    /// What is refused on the head alone, in this order: not exactly one `Host` (HTTP/1.0: at most one), or an empty or
    /// invalid one (400), a request
    /// from a web page (403, ``AdminBrowserGuard``), a missing or wrong secret (401: a client without it learns
    /// nothing else), a declared body over the limit (413).
    private func refusal(for head: HTTPRequestHead) -> AdminServer.Response? {
        if let problem = Self.hostProblem(head.headers, version: head.version) {
            return .init(status: 400, body: Self.error("invalid_request", problem))
        }
        let secret = self.credentials.files.secret
        if let refusal = AdminBrowserGuard.refusal(for: head.headers, anyHostAllowed: secret != nil || self.overTLS) {
            return .init(status: 403, body: Self.error(refusal.error, refusal.description))
        }
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        if path != "/healthz", path != "/readyz", let secret, !Self.authorized(head.headers, secret: secret) {
            // RFC 9110 §11.6.1: a 401 names the scheme it wants.
            var response = AdminServer.Response(status: 401, body: Self.error("unauthorized", "the admin API needs the admin secret"))
            response.headers.append((name: "www-authenticate", value: #"Bearer realm="tokengate-admin""#))
            return response
        }
        if let length = head.headers.first(name: "content-length").flatMap(Int.init), length > Self.maxBodyBytes {
            return Self.tooLarge
        }
        return nil
    }

    /// A repeated `Host`, or an invalid one (RFC 9112 §3.2: a server answers 400, as the public listeners do,
    /// by the same ``HostFieldCheck``), or an empty one. The rebinding check reads the first `Host` only, so a
    /// second one that a proxy or a tool might take instead must not pass; and an empty `Host` names no host
    /// that check could judge. None at all is refused from HTTP/1.1 (RFC 9112 §3.2: "MUST respond with a 400"), as
    /// the public listeners refuse it, and passes from HTTP/1.0, which predates the field.
    package static func hostProblem(_ headers: HTTPHeaders, version: HTTPVersion) -> String? {
        HostFieldCheck.problem(
            headers["host"], required: HostFieldCheck.isRequired(in: version), emptyAllowed: false)?.description
    }

    private func answerEarly(_ response: AdminServer.Response, head: HTTPRequestHead, context: ChannelHandlerContext) {
        self.answeredEarly = true
        self.write(response, head: head, closing: true, context: context)
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = String(head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        let client = context.channel.remoteAddress.map { address in
            "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        }
        let request = AdminServer.Request(method: head.method.rawValue, path: path, body: self.body, client: client)
        let handler = self.handler
        let promise = context.eventLoop.makePromise(of: AdminServer.Response.self)
        promise.completeWithTask { await handler(request) }
        promise.futureResult.assumeIsolated().whenSuccess { response in
            self.write(response, head: head, closing: !head.isKeepAlive, context: context)
        }
    }

    private func write(_ response: AdminServer.Response, head: HTTPRequestHead, closing: Bool, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: response.contentType)
        headers.add(name: "content-length", value: String(response.body.utf8.count))
        headers.add(name: "cache-control", value: "no-store")
        for header in response.headers { headers.add(name: header.name, value: header.value) }
        if closing { headers.add(name: "connection", value: "close") }
        let status = HTTPResponseStatus(statusCode: response.status)
        context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: response.body)))), promise: nil)
        // Before the end is written: NIO's pipelining handler may hand over a request it held back while
        // this one was answered from within that write, and that head must find the connection idle.
        self.phase.answered(closing: closing)
        let done = context.writeAndFlush(self.wrapOutboundOut(.end(nil)))
        if closing {
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    /// Closes the connection on any error. The one that matters: bytes that are not HTTP/1.1 (a bare LF,
    /// `Content-Length` with `Transfer-Encoding`, a TLS hello on a plain listener) make NIO's decoder fail,
    /// and its `HTTPServerProtocolErrorHandler` answers 400 `Connection: close` and passes the error on —
    /// but nothing closed the socket, which stayed open (and unread) until the client left. The 400 is
    /// already flushed when the error arrives here, so closing now still delivers it.
    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// `Authorization: Bearer <secret>`, compared without an early exit so the time taken does not tell
    /// how much of a guess was right.
    package static func authorized(_ headers: HTTPHeaders, secret: [UInt8]) -> Bool {
        guard var value = headers.first(name: "authorization") else { return false }
        let candidate: [UInt8]? = value.withUTF8 { bytes in
            guard case .token(let range) = TokenExtractor.bearerToken(UnsafeRawBufferPointer(bytes)) else { return nil }
            return Array(bytes[range])
        }
        guard let candidate else { return false }
        var difference = UInt8(candidate.count == secret.count ? 0 : 1)
        for index in 0..<secret.count {
            difference |= secret[index] ^ (index < candidate.count ? candidate[index] : 0)
        }
        return difference == 0
    }

    package static func error(_ code: String, _ description: String) -> String {
        "{\"error\":\(JSONString.quote(code)),\"error_description\":\(JSONString.quote(description))}"
    }
}

@available(*, unavailable)
extension AdminConnectionHandler: Sendable {}

extension AdminServer {
    /// The shortest admin secret accepted: a guessable secret on a listener that revokes every token would be
    /// worse than none, because it looks like protection.
    public static let minimumSecretBytes = 16

    /// Reads the admin listener's bearer secret from `file`: its bytes without trailing line breaks (an editor's
    /// or `echo`'s newline is not part of the secret).
    ///
    /// `serve` and `check-config` both call this, so a file `check-config` passes is one `serve` starts with,
    /// and each problem gets its own words: a missing file, one the gateway may not read, an empty one, a
    /// short one. The message names the file, never its content.
    /// - Throws: ``GatewayStartupError``.
    public static func loadSecret(_ file: ConfigPath) throws -> [UInt8] {
        guard FileManager.default.fileExists(atPath: file.path) else {
            throw GatewayStartupError("admin.secret_file: cannot read the admin secret file \(file): no such file")
        }
        guard var bytes = FileManager.default.contents(atPath: file.path).map(Array.init) else {
            throw GatewayStartupError(
                "admin.secret_file: cannot read the admin secret file \(file): permission denied or not a regular file"
            )
        }
        while bytes.last == UInt8(ascii: "\n") || bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard !bytes.isEmpty else {
            throw GatewayStartupError(
                "admin.secret_file: the admin secret file \(file) is empty: put a secret of at least "
                    + "\(Self.minimumSecretBytes) bytes in it (e.g. openssl rand -hex 32)"
            )
        }
        guard bytes.count >= Self.minimumSecretBytes else {
            throw GatewayStartupError(
                "admin.secret_file: the admin secret in \(file) is too short: use at least \(Self.minimumSecretBytes) "
                    + "bytes (e.g. openssl rand -hex 32)"
            )
        }
        return bytes
    }

    /// The admin listener's TLS context (HTTP/1.1 only), for `serve` and `check-config` alike.
    public static func makeTLSContext(_ tls: TLSListenerConfiguration) throws -> TLSServerContext {
        try TLSServerContext(listener: tls, key: "admin.tls", alpnProtocols: ["http/1.1"])
    }
}

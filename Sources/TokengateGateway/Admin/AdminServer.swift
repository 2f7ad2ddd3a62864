//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import TokengateTLS

/// The admin listener: a small HTTP/1.1 server, separate from the public listeners, for the cutoff
/// admin API, health and readiness.
///
/// What each path does is the caller's (the executable wires the cutoff store's admin API in): this
/// type does the transport, the body limit and the authentication. When a secret is configured every
/// request must carry `Authorization: Bearer <secret>`, compared in constant time; `/healthz` stays open
/// and `/readyz` stay open so probes need no secret (they say nothing that needs one).
public final class AdminServer: Sendable {
    /// One admin request, read whole (bodies are small and bounded).
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var body: [UInt8]
    }

    public struct Response: Sendable {
        public var status: Int
        public var contentType: String
        public var body: String

        public init(status: Int, contentType: String = "application/json", body: String) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }
    }

    public typealias Handler = @Sendable (Request) async -> Response

    private let channel: any Channel

    private init(channel: any Channel) {
        self.channel = channel
    }

    public var localAddress: SocketAddress? { self.channel.localAddress }

    /// Binds the admin listener.
    /// - Parameters:
    ///   - secret: the bearer secret, or `nil` when the listener is on loopback and needs none.
    ///   - tls: a server context when the admin listener speaks TLS.
    public static func start(
        host: String,
        port: Int,
        secret: [UInt8]?,
        tls: TLSServerContext?,
        group: any EventLoopGroup,
        logger: Logger,
        handler: @escaping Handler
    ) async throws -> AdminServer {
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls {
                        try sync.addHandler(TLSHandler(context: tls, logger: logger))
                    }
                    try sync.configureHTTPServerPipeline(withErrorHandling: true)
                    try sync.addHandler(AdminConnectionHandler(secret: secret, handler: handler))
                }
            }
            .bind(host: host, port: port).get()
        logger.info("admin listening", metadata: ["address": "\(host):\(port)", "tls": "\(tls != nil)"])
        return AdminServer(channel: channel)
    }

    public func stop() async {
        try? await self.channel.close()
    }
}

/// One admin connection: collects a request (up to 64 KiB of body), checks the secret, and hands the
/// request to the async handler, writing its answer back on the connection's loop.
final class AdminConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let maxBodyBytes = 64 * 1024
    private let secret: [UInt8]?
    private let handler: AdminServer.Handler
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    init(secret: [UInt8]?, handler: @escaping AdminServer.Handler) {
        self.secret = secret
        self.handler = handler
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.body = []
            self.tooLarge = false
        case .body(let buffer):
            if self.body.count + buffer.readableBytes > Self.maxBodyBytes {
                self.tooLarge = true
            } else {
                self.body += buffer.readableBytesView
            }
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            self.respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = String(head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        if self.tooLarge {
            self.write(.init(status: 413, body: Self.error("payload_too_large", "the request body is too large")), head: head, context: context)
            return
        }
        if path != "/healthz", path != "/readyz", let secret = self.secret, !Self.authorized(head.headers, secret: secret) {
            self.write(.init(status: 401, body: Self.error("unauthorized", "the admin API needs the admin secret")), head: head, context: context)
            return
        }
        let request = AdminServer.Request(method: head.method.rawValue, path: path, body: self.body)
        let handler = self.handler
        let promise = context.eventLoop.makePromise(of: AdminServer.Response.self)
        promise.completeWithTask { await handler(request) }
        promise.futureResult.assumeIsolated().whenSuccess { response in
            self.write(response, head: head, context: context)
        }
    }

    private func write(_ response: AdminServer.Response, head: HTTPRequestHead, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: response.contentType)
        headers.add(name: "content-length", value: String(response.body.utf8.count))
        headers.add(name: "cache-control", value: "no-store")
        if !head.isKeepAlive { headers.add(name: "connection", value: "close") }
        let status = HTTPResponseStatus(statusCode: response.status)
        context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: response.body)))), promise: nil)
        let done = context.writeAndFlush(self.wrapOutboundOut(.end(nil)))
        if !head.isKeepAlive {
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    /// `Authorization: Bearer <secret>`, compared without an early exit so the time taken does not tell
    /// how much of a guess was right.
    static func authorized(_ headers: HTTPHeaders, secret: [UInt8]) -> Bool {
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

    static func error(_ code: String, _ description: String) -> String {
        "{\"error\":\(JSONString.quote(code)),\"error_description\":\(JSONString.quote(description))}"
    }
}

@available(*, unavailable)
extension AdminConnectionHandler: Sendable {}

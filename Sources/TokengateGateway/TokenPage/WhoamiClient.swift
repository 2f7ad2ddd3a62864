//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import TokengateConfig
import TokengateTLS

/// The token page's subrequest to the RP's "who am I" endpoint: `GET url` with the browser's cookies, on
/// a fresh connection from the requesting connection's event loop, bounded by the configured timeout.
///
/// Only the status and the user-id header values come back; the response body is read and dropped (up to
/// 64 KiB), and redirects are not followed (a 3xx means "not logged in" to the responder).
struct WhoamiClient: Sendable {
    let url: URLComponents
    let userHeader: String
    let timeout: TimeAmount
    let tlsContext: TLSClientContext?
    let maxInFlight: Int
    /// Calls under way across every event loop (the client is shared by the generation's loops).
    private let inFlight = ManagedAtomic<Int>(0)

    init(configuration: WhoamiConfiguration) throws {
        guard let url = URLComponents(string: configuration.url), let scheme = url.scheme, url.host != nil,
            scheme == "http" || scheme == "https"
        else {
            throw GatewayStartupError("token page whoami url '\(configuration.url)' is not an http(s) URL")
        }
        self.url = url
        self.userHeader = configuration.userHeader
        self.timeout = TimeAmount(configuration.timeout)
        self.maxInFlight = configuration.maxInFlight
        if scheme == "https" {
            do {
                self.tlsContext = try TLSClientContext(trustRootsPath: nil)
            } catch {
                throw GatewayStartupError("token page whoami: cannot set up TLS: \(error)")
            }
        } else {
            self.tlsContext = nil
        }
    }

    func ask(cookies: String, on eventLoop: any EventLoop, logger: Logger) -> EventLoopFuture<TokenPageWhoamiResult> {
        let host = self.url.host ?? "localhost"
        let port = self.url.port ?? (self.tlsContext == nil ? 80 : 443)
        let path = (self.url.percentEncodedPath.isEmpty ? "/" : self.url.percentEncodedPath)
            + (self.url.percentEncodedQuery.map { "?" + $0 } ?? "")
        // Reserve a slot first; past the cap the RP is not asked at all (fail fast, 503).
        guard self.inFlight.wrappingIncrementThenLoad(ordering: .relaxed) <= self.maxInFlight else {
            self.inFlight.wrappingDecrement(ordering: .relaxed)
            return eventLoop.makeSucceededFuture(.busy)
        }
        let promise = eventLoop.makePromise(of: TokenPageWhoamiResult.self)
        let inFlight = self.inFlight
        promise.futureResult.whenComplete { _ in inFlight.wrappingDecrement(ordering: .relaxed) }
        let tlsContext = self.tlsContext
        let userHeader = self.userHeader
        let timeout = self.timeout
        ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tlsContext {
                        try sync.addHandler(TLSHandler(context: tlsContext, serverHostname: host, logger: logger))
                    }
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(WhoamiResponseHandler(userHeader: userHeader, promise: promise))
                }
            }
            .connect(host: host, port: port)
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    var headers = HTTPHeaders()
                    headers.add(name: "host", value: port == 80 || port == 443 ? host : "\(host):\(port)")
                    headers.add(name: "cookie", value: cookies)
                    headers.add(name: "connection", value: "close")
                    channel.write(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)), promise: nil)
                    channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                    let deadline = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
                    promise.futureResult.whenComplete { _ in
                        deadline.cancel()
                        channel.close(promise: nil)
                    }
                case .failure:
                    promise.succeed(.failed)
                }
            }
        return promise.futureResult
    }
}

/// Collects the whoami response's status and user header; anything else (EOF before the end, a parse
/// error, the timeout closing the channel) is `.failed`.
final class WhoamiResponseHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let userHeader: String
    private let promise: EventLoopPromise<TokenPageWhoamiResult>
    private var head: HTTPResponseHead?
    private var bodyBytes = 0
    private var completed = false

    init(userHeader: String, promise: EventLoopPromise<TokenPageWhoamiResult>) {
        self.userHeader = userHeader
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body(let buffer):
            self.bodyBytes += buffer.readableBytes
            if self.bodyBytes > 64 * 1024 {
                self.complete(.failed)
                context.close(promise: nil)
            }
        case .end:
            guard let head = self.head else { return }
            self.complete(.answered(status: Int(head.status.code), userHeaderValues: head.headers[self.userHeader]))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.complete(.failed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.complete(.failed)
        context.close(promise: nil)
    }

    /// The promise is completed once: the first of end, error, close or timeout decides.
    private func complete(_ result: TokenPageWhoamiResult) {
        guard !self.completed else { return }
        self.completed = true
        self.promise.succeed(result)
    }
}

@available(*, unavailable)
extension WhoamiResponseHandler: Sendable {}

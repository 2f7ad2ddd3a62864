//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateHTTP
import TokengateTokens

// MARK: WebSocket upgrades: from an authorized upgrade request to a tunnel (``WebSocketTunnel``).

extension ProxyExchange {
    /// An upgrade request on a route with `websocket`, after the authorizer let it through (every token check
    /// ran, as for any request). What is left to check: the page's origin when the token came in a cookie, and
    /// the tunnel limit; then the backend gets the upgrade on a connection of its own, and its answer decides.
    func beginWebSocket(key: String, route routeIndex: Int, configuration: WebSocketRouteConfiguration, strip: TokenSource?) {
        let route = self.runtime.routes[routeIndex]
        if self.tokenCameInCookie(route), !Self.originAllowed(self.head, configuration.allowedOrigins) {
            self.answer(.webSocketOriginRefused())
            return
        }
        guard let http1 = self.client as? HTTP1ConnectionHandler, let clientChannel = http1.channel else {
            self.answer(.webSocketInvalidUpgrade("a WebSocket upgrade needs HTTP/1.1"))
            return
        }
        let tunnels = self.pools.tunnels
        guard tunnels.hasRoom(route: routeIndex, limit: configuration.maxTunnels) else {
            self.answer(
                .serviceUnavailable("this route has as many WebSocket connections open as it allows", reason: "websocket_tunnel_limit"))
            return
        }
        let upstream = self.runtime.upstreams[self.upstreamIndex]
        guard
            let upstreamHead = RequestRewriter.upstreamHead(
                from: self.head,
                identity: self.identity,
                strip: strip,
                withheldCookies: route.withheldCookies,
                newBodyLength: nil,
                forwardedClaimHeaders: route.forwardedClaimHeaders,
                secretHeader: upstream.secretHeader,
                forwarding: .init(clientAddress: self.traffic.client.forwardedFor, requestID: self.requestID, scheme: "https")
            )
        else {
            self.answer(.malformedHTTP("a header field value holds a line break or a NUL byte"))
            return
        }
        self.upstreamHead = upstreamHead
        var bytes = clientChannel.allocator.buffer(capacity: upstreamHead.sizeHint + 64)
        upstreamHead.write(into: &bytes)
        // The rewriter drops `Upgrade` and `Connection` (hop-by-hop, RFC 9110 §7.6.1); this hop asks for the
        // upgrade itself, in their place before the head's empty line.
        precondition(bytes.readableBytesView.suffix(4).elementsEqual("\r\n\r\n".utf8))
        bytes.moveWriterIndex(to: bytes.writerIndex - 2)
        bytes.writeString("upgrade: websocket\r\nconnection: upgrade\r\n\r\n")
        let targetIndex = tunnels.nextTarget(count: upstream.targets.count)
        self.respondingTarget = targetIndex
        let sentAt = NIODeadline.now()
        WebSocketUpstreamConnect.connect(upstream, target: targetIndex, eventLoop: clientChannel.eventLoop, logger: self.logger)
            .assumeIsolated()
            .whenComplete { result in
                switch result {
                case .failure:
                    guard clientChannel.isActive else { return }
                    self.answer(.badGateway("the backend could not be reached", reason: "upstream_connect_failed"))
                case .success(let channel):
                    guard clientChannel.isActive,
                        let handler = try? channel.pipeline.syncOperations.handler(type: WebSocketUpstreamHandler.self)
                    else {
                        channel.close(promise: nil)
                        return
                    }
                    let timeout = channel.eventLoop.scheduleTask(in: upstream.responseTimeout) {
                        guard handler.onHead != nil else { return }
                        handler.onHead = nil
                        channel.close(promise: nil)
                        guard clientChannel.isActive else { return }
                        self.answer(.gatewayTimeout())
                    }
                    handler.onHead = { verdict, leftover in
                        timeout.cancel()
                        self.upstreamWait = (NIODeadline.now() - sentAt).nanoseconds
                        self.backendAnsweredUpgrade(
                            verdict, leftover: leftover, backend: channel, handler: handler, http1: http1,
                            route: routeIndex, configuration: configuration)
                    }
                    handler.sendUpgrade(bytes, key: key)
                }
            }
    }

    private func backendAnsweredUpgrade(
        _ verdict: WebSocketHandshakeCheck.Verdict, leftover: ByteBuffer?, backend: any Channel,
        handler: WebSocketUpstreamHandler, http1: HTTP1ConnectionHandler, route routeIndex: Int,
        configuration: WebSocketRouteConfiguration
    ) {
        switch verdict {
        case .needMore:
            return
        case .refused(let status):
            backend.close(promise: nil)
            guard http1.channel?.isActive == true else { return }
            self.answer(
                .badGateway("the backend refused the WebSocket upgrade (status \(status))", reason: "websocket_refused"))
        case .invalid(let why):
            backend.close(promise: nil)
            guard http1.channel?.isActive == true else { return }
            let upstream = self.runtime.upstreams[self.upstreamIndex]
            self.logger.warning(
                "invalid WebSocket handshake from the backend",
                metadata: ["upstream": "\(upstream.name)", "request_id": "\(self.requestID)", "error": "\(why)"])
            self.answer(
                .badGateway("the backend's answer to the WebSocket upgrade is invalid: \(why)", reason: "websocket_bad_handshake"))
        case .switched(let fields, _):
            guard let clientChannel = http1.channel, clientChannel.isActive else {
                backend.close(promise: nil)
                return
            }
            let tunnel = WebSocketTunnel(
                client: clientChannel, backend: backend, backendSide: handler, exchange: self, routeIndex: routeIndex,
                configuration: configuration, registry: self.pools.tunnels, cutoffs: .empty)
            guard let handOver = http1.handOver(to: tunnel.clientSide) else {
                backend.close(promise: nil)
                return
            }
            handler.tunnel = tunnel
            self.pools.tunnels.add(tunnel, cutoffs: self.runtime.cutoffs)
            self.runtime.metrics.webSockets.opened()
            var head = clientChannel.allocator.buffer(capacity: 256)
            head.writeString("HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n")
            for (name, value) in fields {
                head.writeString(name + ": " + value + "\r\n")
            }
            head.writeString("\r\n")
            clientChannel.write(head, promise: nil)
            if let leftover {
                tunnel.fromBackend(leftover)
            }
            clientChannel.flush()
            if let bytes = handOver.unparsed {
                tunnel.fromClient(bytes)
                backend.flush()
            }
        }
    }

    /// Whether the token the authorizer accepted came from a cookie (or the site's login cookie): only then
    /// could another site's page have made the browser send it. Asked of upgrade requests alone.
    private func tokenCameInCookie(_ route: GatewayRoute) -> Bool {
        guard route.tokens != nil else { return false }
        if case .token(_, .cookie) = route.extractor.extract(method: self.head.method, uri: self.head.uri, fields: self.head.fields, body: nil) {
            return true
        }
        return false
    }

    /// The request's one `Origin` is among the allowed (RFC 6454 serialization, compared lower-cased and
    /// whole). A cookie-borne upgrade without one is refused too: browsers always send it on WebSocket.
    static func originAllowed(_ head: ClientRequestHead, _ allowed: [String]) -> Bool {
        let origins = head.fields.values(name: "origin")
        guard origins.count == 1 else { return false }
        let origin = origins[0].trimmingCharacters(in: .whitespaces).lowercased()
        return allowed.contains(origin)
    }

    /// The tunnel of this exchange ended: its request is counted and logged now, with how long it was open,
    /// the bytes each way and why it ended.
    func webSocketTunnelEnded(reason: WebSocketTunnel.CloseReason, bytesFromClient: Int, bytesFromBackend: Int) {
        self.receivedBodyBytes = bytesFromClient
        self.sentBodyBytes = bytesFromBackend
        self.runtime.metrics.webSockets.closed(reason)
        let nanoseconds = (NIODeadline.now() - self.start).nanoseconds
        self.runtime.metrics.recordRequest(
            route: self.routeIndex, unsafeMethod: false, status: 101, reason: "-", nanoseconds: nanoseconds,
            statusIsTheGateways: false)
        guard self.runtime.accessLog else { return }
        var record = self.accessLogRecord(status: 101, reason: "-", nanoseconds: nanoseconds)
        record.mode = "websocket"
        var metadata = record.metadata
        metadata["close_reason"] = .string(reason.rawValue)
        self.logger.info("request", metadata: metadata)
    }
}

extension GatewayAnswer {
    /// 403: a cookie-borne WebSocket upgrade from a page whose origin the route does not allow (cross-site
    /// WebSocket hijacking: the browser sends the cookie with any site's upgrade, and the same-origin policy
    /// does not apply to WebSocket).
    static func webSocketOriginRefused() -> Self {
        GatewayAnswer(
            status: .forbidden,
            error: "invalid_request",
            description: "a WebSocket authenticated by a cookie is not accepted from this origin",
            reasonCode: "websocket_origin"
        )
    }

    /// 400: an `Upgrade: websocket` request that breaks RFC 6455 §4.1.
    static func webSocketInvalidUpgrade(_ description: String) -> Self {
        GatewayAnswer(
            status: .badRequest, error: "invalid_request", description: description, closeConnection: true,
            reasonCode: "websocket_bad_upgrade")
    }
}

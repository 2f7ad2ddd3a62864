//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import TokengateTLS

/// `GET https://…` for key sets and provider metadata, on the gateway's own TLS (``TLSHandler`` over OpenSSL,
/// as the token page's whoami call), with a limit on everything a provider controls.
///
/// One deadline covers the connect, the handshake and the whole response; a body past `maxBytes` (announced or
/// sent) ends the call; redirects are not followed (a 3xx is a failure naming its status: a key set that moved
/// is an operator's change to make, not one a network position should be able to make). The peer's certificate
/// is verified against the system store or the entry's `ca_file`, and its name against the URL's host.
struct KeySetHTTPClient: Sendable {
    let tlsContext: TLSClientContext
    let timeout: TimeAmount
    let maxBytes: Int

    /// One answer: status 200, the `Cache-Control` value, the body.
    struct Document: Sendable {
        var cacheControl: String?
        var body: [UInt8]
    }

    /// Why a fetch failed, in words that name the URL's host and the rule, never a body.
    struct Failure: Error, CustomStringConvertible, Sendable {
        var description: String
        /// The HTTP status when the server answered with one other than 200.
        var status: Int?
    }

    init(caFile: String?, timeout: Duration, maxBytes: Int) throws {
        self.tlsContext = try TLSClientContext(trustRootsPath: caFile, verifyPeer: true, alpnProtocols: ["http/1.1"])
        self.timeout = TimeAmount(timeout)
        self.maxBytes = maxBytes
    }

    func get(_ url: URLComponents, on eventLoop: any EventLoop, logger: Logger) -> EventLoopFuture<Document> {
        guard url.scheme == "https", let host = url.host, !host.isEmpty else {
            return eventLoop.makeFailedFuture(Failure(description: "not an https URL"))
        }
        let port = url.port ?? 443
        let path = (url.percentEncodedPath.isEmpty ? "/" : url.percentEncodedPath)
            + (url.percentEncodedQuery.map { "?" + $0 } ?? "")
        let promise = eventLoop.makePromise(of: Document.self)
        let deadline = NIODeadline.now() + self.timeout
        let tlsContext = self.tlsContext
        let maxBytes = self.maxBytes
        let timeout = self.timeout
        ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(TLSHandler(context: tlsContext, serverHostname: host, logger: logger))
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(KeySetResponseHandler(maxBytes: maxBytes, promise: promise))
                }
            }
            .connect(host: host, port: port)
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    var headers = HTTPHeaders()
                    headers.add(name: "host", value: port == 443 ? Self.hostField(host) : "\(Self.hostField(host)):\(port)")
                    headers.add(name: "accept", value: "application/jwk-set+json, application/json")
                    headers.add(name: "user-agent", value: "tokengate")
                    headers.add(name: "connection", value: "close")
                    let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
                    channel.write(HTTPClientRequestPart.head(head), promise: nil)
                    channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                    let timer = channel.eventLoop.scheduleTask(deadline: deadline) {
                        promise.fail(Failure(description: "no complete answer within \(timeout.nanoseconds / 1_000_000) ms"))
                    }
                    promise.futureResult.whenComplete { _ in
                        timer.cancel()
                        channel.close(promise: nil)
                    }
                case .failure(let error):
                    promise.fail(Failure(description: "cannot connect to \(host):\(port): \(error)"))
                }
            }
        return promise.futureResult
    }

    /// An IPv6 literal goes in brackets in `Host` (RFC 9110 §7.2); `URLComponents` gives it without them.
    private static func hostField(_ host: String) -> String {
        host.contains(":") ? "[\(host)]" : host
    }
}

/// Collects one response; anything but a complete 200 within the limits fails the promise.
final class KeySetResponseHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let maxBytes: Int
    private let promise: EventLoopPromise<KeySetHTTPClient.Document>
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []

    init(maxBytes: Int, promise: EventLoopPromise<KeySetHTTPClient.Document>) {
        self.maxBytes = maxBytes
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            guard head.status == .ok else {
                let kind = (300..<400).contains(Int(head.status.code)) ? " (redirects are not followed)" : ""
                self.fail(context, "answered \(head.status.code)\(kind)", status: Int(head.status.code))
                return
            }
            if let length = head.headers.first(name: "content-length").flatMap(Int.init), length > self.maxBytes {
                self.fail(context, "the answer is \(length) bytes; at most \(self.maxBytes) are read")
                return
            }
            self.head = head
        case .body(var buffer):
            guard self.head != nil else { return }
            guard self.body.count + buffer.readableBytes <= self.maxBytes else {
                self.fail(context, "the answer is larger than \(self.maxBytes) bytes")
                return
            }
            self.body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            let cacheControl = head.headers[canonicalForm: "cache-control"].joined(separator: ",")
            self.promise.succeed(.init(cacheControl: cacheControl.isEmpty ? nil : cacheControl, body: self.body))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.promise.fail(KeySetHTTPClient.Failure(description: "the connection closed before the answer ended"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.fail(context, "\(error)")
    }

    private func fail(_ context: ChannelHandlerContext, _ cause: String, status: Int? = nil) {
        self.head = nil
        self.promise.fail(KeySetHTTPClient.Failure(description: cause, status: status))
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension KeySetResponseHandler: Sendable {}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import TokengateGateway
import TokengateHTTP

/// A small backend for the dev default and the tests: answers every request with a JSON echo of what it
/// saw — method, path, the identity headers the gateway added, and how many body bytes arrived — so a
/// newcomer's `curl` shows what tokengate forwards, and tests can check it.
///
/// A few paths behave differently on purpose, for tests of the gateway's failure handling:
/// `/slow?ms=N` answers after N ms; `/big?bytes=N` sends N bytes; `/abort` sends half a response and
/// closes; `/status/N` answers with status N; `/chunked?parts=N&bytes=M` sends N parts of M bytes without a
/// length (chunked).
public final class DemoBackend: Sendable {
    public let channel: any Channel
    private let counter: RequestCounter

    private init(channel: any Channel, counter: RequestCounter) {
        self.channel = channel
        self.counter = counter
    }

    /// How many request heads the backend has received: tests check that a refused request never
    /// reached it.
    public var requestsReceived: Int { self.counter.value }

    /// Starts the backend on `host:port` (port 0 picks a free one).
    public static func start(host: String = "127.0.0.1", port: Int, group: any EventLoopGroup) async throws -> DemoBackend {
        let counter = RequestCounter()
        let channel = try await DemoHTTPServer.bind(host: host, port: port, group: group) {
            DemoBackendHandler(counter: counter)
        }
        return DemoBackend(channel: channel, counter: counter)
    }

    public var port: Int { self.channel.localAddress?.port ?? 0 }

    public func stop() async throws {
        try await self.channel.close()
    }
}

package final class DemoBackendHandler: ChannelInboundHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias OutboundOut = HTTPServerResponsePart

    private let counter: RequestCounter
    private var head: HTTPRequestHead?
    private var bodyBytes = 0
    private var bodyPrefix: [UInt8] = []

    package init(counter: RequestCounter) {
        self.counter = counter
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.counter.increment()
            self.head = head
            self.bodyBytes = 0
            self.bodyPrefix = []
        case .body(let buffer):
            self.bodyBytes += buffer.readableBytes
            if self.bodyPrefix.count < 4096 {
                self.bodyPrefix += buffer.readableBytesView.prefix(4096 - self.bodyPrefix.count)
            }
        case .end:
            guard let head = self.head else { return }
            self.respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = String(head.uri.split(separator: "?", maxSplits: 1).first ?? "")
        let query = head.uri.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
        let parameter = { (name: String) -> Int? in
            query.split(separator: "&").first { $0.hasPrefix(name + "=") }.flatMap { Int($0.dropFirst(name.count + 1)) }
        }
        if path == "/slow" {
            let delay = parameter("ms") ?? 1000
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(delay))) {
                self.writeEcho(head: head, path: path, status: .ok, context: context)
            }
            return
        }
        if path == "/big" {
            let size = parameter("bytes") ?? 1_000_000
            var headers = HTTPHeaders()
            headers.add(name: "content-length", value: String(size))
            context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            var remaining = size
            let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 64 * 1024)
            while remaining > 0 {
                let slice = chunk.getSlice(at: 0, length: min(remaining, chunk.readableBytes))!
                context.write(self.wrapOutboundOut(.body(.byteBuffer(slice))), promise: nil)
                remaining -= slice.readableBytes
            }
            context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        if path == "/chunked" {
            // No length: the body goes chunked (or, to an HTTP/1.0 peer, until the close), in `parts` parts
            // of `bytes` bytes each.
            let parts = min(parameter("parts") ?? 3, 1000)
            let size = min(parameter("bytes") ?? 10, 1 << 20)
            context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok))), promise: nil)
            for part in 0..<parts {
                let byte = UInt8(ascii: "a") + UInt8(part % 26)
                context.write(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(repeating: byte, count: size)))), promise: nil)
            }
            context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        if path == "/drip" {
            // A stream that goes quiet, as server-sent events do between events: `first` bytes at once, then a
            // part of `bytes` bytes every `ms` ms, `parts` times, then the end (chunked).
            let first = min(parameter("first") ?? 0, 64 << 20)
            let parts = min(parameter("parts") ?? 3, 1000)
            let size = min(parameter("bytes") ?? 10, 1 << 20)
            let interval = TimeAmount.milliseconds(Int64(min(parameter("ms") ?? 1000, 60_000)))
            context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok))), promise: nil)
            if first > 0 {
                context.write(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(repeating: UInt8(ascii: "f"), count: first)))), promise: nil)
            }
            context.flush()
            let loop = context.eventLoop.assumeIsolated()
            func drip(_ left: Int) {
                loop.scheduleTask(in: interval) {
                    guard left > 0 else {
                        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
                        return
                    }
                    context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(repeating: UInt8(ascii: "d"), count: size)))), promise: nil)
                    drip(left - 1)
                }
            }
            drip(parts)
            return
        }
        if path == "/abort" {
            var headers = HTTPHeaders()
            headers.add(name: "content-length", value: "1000")
            context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "partial")))), promise: nil)
            context.close(promise: nil)
            return
        }
        if path.hasPrefix("/status/"), let code = Int(path.dropFirst("/status/".count)) {
            self.writeEcho(head: head, path: path, status: HTTPResponseStatus(statusCode: code), context: context)
            return
        }
        self.writeEcho(head: head, path: path, status: .ok, context: context)
    }

    private func writeEcho(head: HTTPRequestHead, path: String, status: HTTPResponseStatus, context: ChannelHandlerContext) {
        var fields: [String] = [
            "\"method\":\(Self.quote(head.method.rawValue))",
            "\"path\":\(Self.quote(path))",
            "\"body_bytes\":\(self.bodyBytes)",
        ]
        var headerFields: [String] = []
        for (name, value) in head.headers {
            headerFields.append("[\(Self.quote(name.lowercased())),\(Self.quote(value))]")
        }
        fields.append("\"headers\":[\(headerFields.joined(separator: ","))]")
        if let body = String(validating: self.bodyPrefix, as: UTF8.self) {
            fields.append("\"body\":\(Self.quote(body))")
        }
        if let user = head.headers.first(name: "x-tokengate-user") {
            fields.append("\"user\":\(Self.quote(user))")
        }
        let json = "{" + fields.joined(separator: ",") + "}\n"
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: String(json.utf8.count))
        context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: json)))), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
    }

    private static func quote(_ value: String) -> String {
        JSONString.quote(value)
    }
}

@available(*, unavailable)
extension DemoBackendHandler: Sendable {}

/// A thread-safe count of requests, shared by the backend's connections.
package final class RequestCounter: Sendable {
    private let count = NIOLockedValueBox(0)

    package init() {}

    package func increment() {
        self.count.withLockedValue { $0 += 1 }
    }

    package var value: Int { self.count.withLockedValue { $0 } }
}

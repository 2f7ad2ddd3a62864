//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A backend that answers each request head with bytes a test scripts, however wrong: for what the gateway
/// does with responses a real server would not send.
///
/// Each connection handles its requests one at a time, as a backend does: a reply with bytes to come
/// ``Reply/later`` answers nothing else on its connection before they went out, so a request the gateway sends
/// meanwhile gets its answer behind them (the late bytes come first on the wire, where the gateway would read
/// them as that request's response).
final class ScriptedBackend: Sendable {
    /// What the backend sends for one request head.
    struct Reply: Sendable {
        var response: String
        /// Bytes sent `delay` after ``response`` (the body of a `HEAD` answer the backend sends anyway, say).
        var later: (delay: TimeAmount, bytes: String)?
        /// The connection closes after the reply (after ``later`` when there is one).
        var close = false
    }

    /// What to send for the `index`-th request head the backend received (over all connections), and whether
    /// to close the connection afterwards.
    typealias Script = @Sendable (_ index: Int, _ head: String) -> (response: String, close: Bool)
    /// ``Script`` with bytes that may come later.
    typealias ReplyScript = @Sendable (_ index: Int, _ head: String) -> Reply

    let channel: any Channel
    private let counters: NIOLockedValueBox<(requests: Int, connections: Int)>

    var port: Int { self.channel.localAddress!.port! }
    var requests: Int { self.counters.withLockedValue { $0.requests } }
    var connections: Int { self.counters.withLockedValue { $0.connections } }

    private init(channel: any Channel, counters: NIOLockedValueBox<(requests: Int, connections: Int)>) {
        self.channel = channel
        self.counters = counters
    }

    static func start(group: any EventLoopGroup, script: @escaping Script) async throws -> ScriptedBackend {
        try await Self.start(group: group) { index, head in
            let (response, close) = script(index, head)
            return Reply(response: response, close: close)
        }
    }

    static func start(group: any EventLoopGroup, replies: @escaping ReplyScript) async throws -> ScriptedBackend {
        let counters = NIOLockedValueBox((requests: 0, connections: 0))
        let channel = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                counters.withLockedValue { $0.connections += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Handler(counters: counters, script: replies))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return ScriptedBackend(channel: channel, counters: counters)
    }

    func stop() async throws {
        try await self.channel.close()
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let counters: NIOLockedValueBox<(requests: Int, connections: Int)>
        let script: ReplyScript
        var received = ""
        /// A reply's ``Reply/later`` bytes have not gone out yet: the next request waits.
        var waitingForLater = false

        init(counters: NIOLockedValueBox<(requests: Int, connections: Int)>, script: @escaping ReplyScript) {
            self.counters = counters
            self.script = script
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            self.received += String(buffer: self.unwrapInboundIn(data))
            self.answer(context: context)
        }

        private func answer(context: ChannelHandlerContext) {
            // Bodiless requests only: a head is a request.
            while !self.waitingForLater, let end = self.received.range(of: "\r\n\r\n") {
                let head = String(self.received[..<end.lowerBound])
                self.received = String(self.received[end.upperBound...])
                let index = self.counters.withLockedValue {
                    $0.requests += 1
                    return $0.requests - 1
                }
                let reply = self.script(index, head)
                context.writeAndFlush(self.wrapOutboundOut(ByteBuffer(string: reply.response)), promise: nil)
                if let later = reply.later {
                    self.waitingForLater = true
                    context.eventLoop.assumeIsolated().scheduleTask(in: later.delay) {
                        guard context.channel.isActive else { return }
                        context.writeAndFlush(self.wrapOutboundOut(ByteBuffer(string: later.bytes)), promise: nil)
                        self.waitingForLater = false
                        if reply.close {
                            context.close(promise: nil)
                        } else {
                            self.answer(context: context)
                        }
                    }
                    return
                }
                if reply.close {
                    context.close(promise: nil)
                    return
                }
            }
        }
    }
}

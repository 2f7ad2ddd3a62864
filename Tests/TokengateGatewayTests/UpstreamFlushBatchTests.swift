//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOEmbedded
import Testing

@testable import TokengateGateway

/// Upstream writes leave at the end of the loop's tick, together, and never get lost on the way.
@Suite struct UpstreamFlushBatchTests {
    /// An upstream handler on its own channel.
    private struct Upstream {
        let channel: EmbeddedChannel
        let handler: UpstreamResponseHandler

        /// Writes `text` and asks for a flush, as an exchange does.
        func send(_ text: String, promise: EventLoopPromise<Void>? = nil) {
            self.channel.write(ByteBuffer(string: text), promise: promise)
            self.handler.flush()
        }

        /// The next write that reached the network, if any.
        func sent() throws -> String? {
            try self.channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) }
        }
    }

    /// `count` upstream handlers on one loop, sharing one batch.
    private func makeUpstreams(_ count: Int) throws -> (EmbeddedEventLoop, [Upstream]) {
        let loop = EmbeddedEventLoop()
        let batch = UpstreamFlushBatch(eventLoop: loop)
        let upstreams = try (0..<count).map { _ in
            let handler = UpstreamResponseHandler(flushBatch: batch)
            let channel = EmbeddedChannel(handler: handler, loop: loop)
            try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
            return Upstream(channel: channel, handler: handler)
        }
        return (loop, upstreams)
    }

    @Test func writesOfOneTickLeaveTogetherWhenTheTickEnds() throws {
        let (loop, upstreams) = try self.makeUpstreams(2)
        let (first, second) = (upstreams[0], upstreams[1])

        first.send("one")
        second.send("two")
        // More written and flushed again in the same tick: still one flush, carrying both writes.
        first.send("three")
        #expect(try first.sent() == nil)
        #expect(try second.sent() == nil)

        loop.run()  // The tick's tasks: the batch.
        #expect(try first.sent() == "one")
        #expect(try first.sent() == "three")
        #expect(try second.sent() == "two")

        // The next tick starts a new batch.
        second.send("four")
        #expect(try second.sent() == nil)
        loop.run()
        #expect(try second.sent() == "four")
        _ = try first.channel.finish()
        _ = try second.channel.finish()
    }

    /// Until the tick's flush, what was written has not reached the backend: a response head that arrives in that
    /// tick (a backend answering before it read the body's end) is early, and its connection is not reused
    /// (``ProxyExchangeStateMachine/upstreamReceivedHead(_:requestMayBeUnsent:)``).
    @Test func writesWaitingForTheTicksFlushMayBeUnsent() throws {
        let (loop, upstreams) = try self.makeUpstreams(1)
        let upstream = upstreams[0]
        #expect(!upstream.handler.requestMayBeUnsent)
        upstream.send("the body's end")
        #expect(upstream.handler.requestMayBeUnsent, "written, its flush waiting for the end of the tick")
        loop.run()
        #expect(try upstream.sent() == "the body's end")
        #expect(!upstream.handler.requestMayBeUnsent, "flushed, the socket took it")
        _ = try upstream.channel.finish()
    }

    /// A connection that closes before the end of the tick is skipped (its handler is out of the pipeline)
    /// and the other connections' writes still leave.
    @Test func aConnectionClosedBeforeTheTickEndsIsSkipped() throws {
        let (loop, upstreams) = try self.makeUpstreams(2)
        let (closing, staying) = (upstreams[0], upstreams[1])

        closing.send("never flushed")
        staying.send("kept")
        try closing.channel.close().wait()

        loop.run()
        #expect(try staying.sent() == "kept")
        _ = try staying.channel.finish()
    }

    /// A flush that sets off another request in the same pass (a failed write closing a connection, the
    /// exchange retrying on another) registers while the batch runs: it goes out in that same pass.
    @Test func aFlushRegisteredWhileTheBatchRunsGoesOutInTheSamePass() throws {
        let (loop, upstreams) = try self.makeUpstreams(2)
        let (first, second) = (upstreams[0], upstreams[1])

        let written = loop.makePromise(of: Void.self)
        written.futureResult.assumeIsolated().whenSuccess {
            second.send("second")
        }
        first.send("first", promise: written)

        loop.run()
        #expect(try first.sent() == "first")
        #expect(try second.sent() == "second")
        _ = try first.channel.finish()
        _ = try second.channel.finish()
    }

    /// Without a batch (handler tests), a flush is immediate, as before.
    @Test func withoutABatchAFlushIsImmediate() throws {
        let handler = UpstreamResponseHandler()
        let channel = EmbeddedChannel(handler: handler)
        try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        channel.write(ByteBuffer(string: "now"), promise: nil)
        handler.flush()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "now"))
        _ = try channel.finish()
    }
}

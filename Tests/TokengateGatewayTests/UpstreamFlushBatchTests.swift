//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOEmbedded
import Testing

@testable import TokengateGateway

/// Upstream writes leave at the end of the loop's tick, together, and never get lost on the way.
@Suite struct UpstreamFlushBatchTests {
    /// An upstream handler on its own channel, on `loop`, sharing `batch`.
    private func makeUpstream(
        loop: EmbeddedEventLoop,
        batch: UpstreamFlushBatch
    ) throws -> (EmbeddedChannel, UpstreamResponseHandler) {
        let handler = UpstreamResponseHandler(flushBatch: batch)
        let channel = EmbeddedChannel(handler: handler, loop: loop)
        try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        return (channel, handler)
    }

    @Test func writesOfOneTickLeaveTogetherWhenTheTickEnds() throws {
        let loop = EmbeddedEventLoop()
        let batch = UpstreamFlushBatch(eventLoop: loop)
        let (first, firstHandler) = try self.makeUpstream(loop: loop, batch: batch)
        let (second, secondHandler) = try self.makeUpstream(loop: loop, batch: batch)

        first.write(ByteBuffer(string: "one"), promise: nil)
        firstHandler.flush()
        second.write(ByteBuffer(string: "two"), promise: nil)
        secondHandler.flush()
        // More written and flushed again in the same tick: still one flush, carrying both writes.
        first.write(ByteBuffer(string: "three"), promise: nil)
        firstHandler.flush()
        #expect(try first.readOutbound(as: ByteBuffer.self) == nil)
        #expect(try second.readOutbound(as: ByteBuffer.self) == nil)

        loop.run()  // The tick's tasks: the batch.
        #expect(try first.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "one"))
        #expect(try first.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "three"))
        #expect(try second.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "two"))

        // The next tick starts a new batch.
        second.write(ByteBuffer(string: "four"), promise: nil)
        secondHandler.flush()
        #expect(try second.readOutbound(as: ByteBuffer.self) == nil)
        loop.run()
        #expect(try second.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "four"))
        _ = try first.finish()
        _ = try second.finish()
    }

    /// A connection that closes before the end of the tick is skipped (its handler is out of the pipeline)
    /// and the other connections' writes still leave.
    @Test func aConnectionClosedBeforeTheTickEndsIsSkipped() throws {
        let loop = EmbeddedEventLoop()
        let batch = UpstreamFlushBatch(eventLoop: loop)
        let (closing, closingHandler) = try self.makeUpstream(loop: loop, batch: batch)
        let (staying, stayingHandler) = try self.makeUpstream(loop: loop, batch: batch)

        closing.write(ByteBuffer(string: "never flushed"), promise: nil)
        closingHandler.flush()
        staying.write(ByteBuffer(string: "kept"), promise: nil)
        stayingHandler.flush()
        try closing.close().wait()

        loop.run()
        #expect(try staying.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "kept"))
        _ = try staying.finish()
    }

    /// A flush that sets off another request in the same pass (a failed write closing a connection, the
    /// exchange retrying on another) registers while the batch runs: it goes out in that same pass.
    @Test func aFlushRegisteredWhileTheBatchRunsGoesOutInTheSamePass() throws {
        let loop = EmbeddedEventLoop()
        let batch = UpstreamFlushBatch(eventLoop: loop)
        let (first, firstHandler) = try self.makeUpstream(loop: loop, batch: batch)
        let (second, secondHandler) = try self.makeUpstream(loop: loop, batch: batch)

        let written = loop.makePromise(of: Void.self)
        first.write(ByteBuffer(string: "first"), promise: written)
        written.futureResult.assumeIsolated().whenSuccess {
            second.write(ByteBuffer(string: "second"), promise: nil)
            secondHandler.flush()
        }
        firstHandler.flush()

        loop.run()
        #expect(try first.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "first"))
        #expect(try second.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "second"))
        _ = try first.finish()
        _ = try second.finish()
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

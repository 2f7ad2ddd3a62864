//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import FloorWork
import NIOCore
import TokengateEventLoop
import TokengateTLS

#if canImport(Glibc)
import Glibc
#endif

/// One client's keep-alive connection to the backend: request heads go out in one write per tick, responses
/// come back cut at their `Content-Length` and go to the client as they came.
///
/// Heads are copied into ``outbound``, a buffer this connection keeps (its capacity is reused by every later
/// request, so a request allocates nothing), and written when the tick ends: every client read of a tick has
/// then been handled, so the backend — on the proxy's core in the benchmark — is woken once per batch, not once
/// per request (the one scheduling choice the NIO floor keeps too).
final class FloorUpstreamConnection: EpollEventHandler {
    private enum State {
        /// `connect` is in progress; heads wait in ``outbound``.
        case connecting
        case connected
        case closed
    }

    /// Bytes asked of each backend read: a few responses of the bench's size, or the head of a larger one.
    static let readSize = 16 * 1024

    private var socket: Socket
    private var state = State.connecting
    /// The client this connection serves. Unowned: the client holds this connection and closes it (taking it
    /// out of the loop) before it goes itself, so no call of this object can outlive it.
    private unowned(unsafe) let client: FloorClientConnection
    private var registration: LoopRegistration?
    private var outbound: ByteBuffer
    private var flushRequested = false
    private var splitter = FloorMessageSplitter()

    private let buffers: FloorBuffers

    private init(
        socket: consuming Socket,
        client: FloorClientConnection,
        buffers: FloorBuffers,
        allocator: ByteBufferAllocator
    ) {
        self.socket = socket
        self.client = client
        self.buffers = buffers
        self.outbound = allocator.buffer(capacity: 1024)
    }

    /// Starts a connection to `backend` for `client` and registers it with `loop`.
    static func start(
        to backend: sockaddr_in,
        for client: FloorClientConnection,
        buffers: FloorBuffers,
        loop: EpollEventLoop
    ) throws(SystemCallError) -> FloorUpstreamConnection {
        let socket = try Socket.connect(to: backend)
        let descriptor = socket.descriptor
        let upstream = FloorUpstreamConnection(socket: socket, client: client, buffers: buffers, allocator: loop.allocator)
        upstream.registration = try loop.register(upstream, socket: descriptor)
        return upstream
    }

    /// Queues a whole request head; it leaves at the end of the tick (or once connected).
    func send(_ head: ByteBuffer, loop: EpollEventLoop) {
        var head = head
        self.outbound.writeBuffer(&head)
        guard case .connected = self.state, !self.flushRequested, let registration = self.registration else { return }
        self.flushRequested = true
        loop.callAtTickEnd(registration)
    }

    // MARK: Events from the loop.

    func socketReady(_ events: SocketEvents, loop: EpollEventLoop) {
        switch self.state {
        case .connecting:
            guard !events.isDisjoint(with: [.writable, .failed]) else { return }
            guard self.socket.pendingError() == 0 else {
                self.client.upstreamEnded(loop: loop)
                return
            }
            self.state = .connected
            self.flush(loop: loop)
        case .connected:
            if events.contains(.writable), self.outbound.readableBytes > 0, !self.flushRequested {
                self.flush(loop: loop)
            }
        case .closed:
            return
        }
        if !events.isDisjoint(with: [.readable, .peerClosed, .failed]) {
            self.readAll(loop: loop)
        }
    }

    func tickEnded(loop: EpollEventLoop) {
        self.flushRequested = false
        self.flush(loop: loop)
    }

    func timerFired(tag: UInt32, loop: EpollEventLoop) {}

    /// Writes the queued heads; what the socket does not take waits for the next writable edge.
    private func flush(loop: EpollEventLoop) {
        guard case .connected = self.state, self.outbound.readableBytes > 0 else { return }
        switch self.socket.write(self.outbound) {
        case .bytes(let count):
            self.outbound.moveReaderIndex(forwardBy: count)
            if self.outbound.readableBytes == 0 { self.outbound.clear() }
        case .wouldBlock:
            break
        case .closed, .failed:
            self.client.upstreamEnded(loop: loop)
        }
    }

    /// Reads until a short read (see ``EpollEventLoop``), handing each whole response to the client.
    private func readAll(loop: EpollEventLoop) {
        while case .connected = self.state {
            var buffer = self.buffers.read.take(allocator: loop.allocator, minimumCapacity: Self.readSize)
            let room = buffer.writableBytes
            switch self.socket.read(into: &buffer, minimumBytes: Self.readSize) {
            case .bytes(let count):
                let client = self.client
                self.splitter.split(buffer, length: FloorHeadScan.responseLength) { response in
                    client.sendResponse(response, loop: loop)
                }
                self.buffers.read.giveBack(buffer)
                if count < room { return }
            case .wouldBlock:
                self.buffers.read.giveBack(buffer)
                return
            case .closed, .failed:
                self.buffers.read.giveBack(buffer)
                self.client.upstreamEnded(loop: loop)
                return
            }
        }
    }

    /// Closes the socket and frees the slot; called by the client as it closes.
    func close(loop: EpollEventLoop) {
        self.state = .closed
        if let registration = self.registration { loop.deregister(registration) }
        self.registration = nil
        self.socket.close()
    }
}

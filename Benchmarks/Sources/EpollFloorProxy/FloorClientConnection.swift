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

/// One client connection of the epoll floor proxy: TLS through the gateway's own ``TLSConnection`` (the `SSL*`
/// with its ByteBuffer BIO, over the system OpenSSL), each whole request head handed to its own keep-alive
/// ``FloorUpstreamConnection`` as it came, each response encrypted and written back as it came.
///
/// The same do-nothing work as `nio-floor-proxy`'s handlers — find a head's end, pass bytes, one socket write per
/// response, upstream writes batched per tick — on ``EpollEventLoop`` instead of NIO channels, so that the two
/// floors differ in their construction only. No token check, no parser, no limits, no timeouts but the TLS
/// handshake's (10 s, as the gateway's TLS handler), no pool shared between clients: bodiless requests only.
final class FloorClientConnection: EpollEventHandler {
    /// The TLS handler's default handshake deadline.
    static let handshakeTimeout: UInt64 = 10_000_000_000
    /// Bytes asked of each client socket read: one whole TLS record and its header.
    static let readSize = 16 * 1024 + 512
    private static let handshakeTimerTag: UInt32 = 1

    private var socket: Socket
    private let tls: TLSConnection
    private var stateMachine = FloorConnectionStateMachine()
    /// Ciphertext the socket has not taken yet (it wait for the next writable edge); nil nearly always.
    private var backlog: ByteBuffer?
    private var splitter = FloorMessageSplitter()
    private var upstream: FloorUpstreamConnection?
    private var registration: LoopRegistration?

    private let buffers: FloorBuffers

    private init(socket: consuming Socket, tls: TLSConnection, buffers: FloorBuffers) {
        self.socket = socket
        self.tls = tls
        self.buffers = buffers
    }

    /// Registers an accepted client with `loop`, starts its upstream connection to `backend` and arms the
    /// handshake deadline. On failure the client's socket is closed (by going away).
    static func start(
        _ socket: consuming Socket,
        context: TLSServerContext,
        backend: sockaddr_in,
        buffers: FloorBuffers,
        loop: EpollEventLoop
    ) throws(SystemCallError) {
        let descriptor = socket.descriptor
        guard let tls = TLSConnection(server: context, allocator: loop.allocator) else {
            throw SystemCallError("SSL_new", code: ENOMEM)
        }
        let client = FloorClientConnection(socket: socket, tls: tls, buffers: buffers)
        let registration = try loop.register(client, socket: descriptor)
        client.registration = registration
        do throws(SystemCallError) {
            client.upstream = try FloorUpstreamConnection.start(to: backend, for: client, buffers: buffers, loop: loop)
        } catch {
            client.close(loop: loop)
            throw error
        }
        loop.schedule(in: Self.handshakeTimeout, for: registration, tag: Self.handshakeTimerTag)
    }

    // MARK: Events from the loop.

    func socketReady(_ events: SocketEvents, loop: EpollEventLoop) {
        if self.backlog != nil, events.contains(.writable) {
            self.writeBacklog(loop: loop)
        }
        // A hang-up or an error is found by the read too (0 bytes, or the error): one path for every end.
        if !events.isDisjoint(with: [.readable, .peerClosed, .failed]) {
            self.readAll(loop: loop)
        }
    }

    func tickEnded(loop: EpollEventLoop) {}

    func timerFired(tag: UInt32, loop: EpollEventLoop) {
        self.run(self.stateMachine.handshakeTimedOut(), loop: loop)
    }

    /// Reads until the socket is empty: until a read fills less than it was given, which on an edge-triggered
    /// loop means no byte was left behind (see ``EpollEventLoop``).
    private func readAll(loop: EpollEventLoop) {
        while !self.stateMachine.isClosed {
            var buffer = self.buffers.read.take(allocator: loop.allocator, minimumCapacity: Self.readSize)
            let room = buffer.writableBytes
            switch self.socket.read(into: &buffer, minimumBytes: Self.readSize) {
            case .bytes(let count):
                self.tls.receive(buffer)
                self.run(self.stateMachine.bytesReceived(), loop: loop)
                self.buffers.read.giveBack(buffer)
                if count < room { return }
            case .wouldBlock:
                self.buffers.read.giveBack(buffer)
                return
            case .closed, .failed:
                self.buffers.read.giveBack(buffer)
                self.run(self.stateMachine.failed(), loop: loop)
                return
            }
        }
    }

    // MARK: Actions.

    /// The only code that acts on the state machine's decisions.
    private func run(_ action: FloorConnectionStateMachine.Action, loop: EpollEventLoop) {
        switch action {
        case .none:
            break
        case .continueHandshake:
            let result = self.tls.doHandshake()
            // The flight, or the alert that explains a failure, leaves before anything else happens.
            self.sendCiphertext(loop: loop)
            self.run(self.stateMachine.handshakeStepped(result), loop: loop)
        case .decode:
            self.decode(loop: loop)
        case .discardInput:
            self.tls.discardInbound()
        case .answerCloseNotifyAndClose:
            _ = self.tls.shutdown()
            self.sendCiphertext(loop: loop)
            self.close(loop: loop)
        case .close:
            self.close(loop: loop)
        }
    }

    /// `SSL_read` until OpenSSL needs more bytes (as the TLS handler does), then each whole request head goes
    /// upstream.
    private func decode(loop: EpollEventLoop) {
        var plaintext = self.buffers.plaintext.take(
            allocator: loop.allocator,
            minimumCapacity: self.tls.pendingInboundBytes + 1024
        )
        var closeNotify = false
        decoding: while true {
            switch self.tls.read(into: &plaintext) {
            case .bytes:
                if !self.tls.hasPendingInput { break decoding }
            case .wantMore:
                break decoding
            case .receivedCloseNotify:
                closeNotify = true
                break decoding
            case .failed:
                self.buffers.plaintext.giveBack(plaintext)
                self.sendCiphertext(loop: loop)
                self.run(self.stateMachine.failed(), loop: loop)
                return
            }
        }
        if plaintext.readableBytes > 0, let upstream = self.upstream {
            self.splitter.split(plaintext, length: FloorHeadScan.requestLength) { head in
                upstream.send(head, loop: loop)
            }
        }
        self.buffers.plaintext.giveBack(plaintext)
        // Session tickets and key updates may have produced records.
        self.sendCiphertext(loop: loop)
        if closeNotify {
            self.run(self.stateMachine.closeNotifyReceived(), loop: loop)
        }
    }

    /// Encrypts one whole response and writes it: one record and one socket write per response, as the NIO
    /// floor's `writeAndFlush` per response does.
    func sendResponse(_ response: ByteBuffer, loop: EpollEventLoop) {
        guard !self.stateMachine.isClosed else { return }
        self.tls.reserveOutbound(plaintextBytes: response.readableBytes)
        if case .failed = self.tls.write(response) {
            self.run(self.stateMachine.failed(), loop: loop)
            return
        }
        self.sendCiphertext(loop: loop)
    }

    /// Writes whatever ciphertext OpenSSL produced; what the socket does not take waits in ``backlog``.
    private func sendCiphertext(loop: EpollEventLoop) {
        guard let outbound = self.tls.takeOutbound() else { return }
        if self.backlog != nil {
            var outbound = outbound
            self.backlog!.writeBuffer(&outbound)
            return
        }
        switch self.socket.write(outbound) {
        case .bytes(let count):
            if count < outbound.readableBytes { self.backlog = outbound.getSlice(at: outbound.readerIndex + count, length: outbound.readableBytes - count) }
        case .wouldBlock:
            self.backlog = outbound
        case .closed, .failed:
            self.run(self.stateMachine.failed(), loop: loop)
        }
    }

    private func writeBacklog(loop: EpollEventLoop) {
        guard var backlog = self.backlog.take() else { return }
        switch self.socket.write(backlog) {
        case .bytes(let count):
            backlog.moveReaderIndex(forwardBy: count)
            if backlog.readableBytes > 0 { self.backlog = backlog }
        case .wouldBlock:
            self.backlog = backlog
        case .closed, .failed:
            self.run(self.stateMachine.failed(), loop: loop)
        }
    }

    /// Closes the client and its upstream connection, and frees both slots. Called once, by ``run(_:loop:)``
    /// (or on a failed start).
    func close(loop: EpollEventLoop) {
        if let registration = self.registration { loop.deregister(registration) }
        self.registration = nil
        self.socket.close()
        self.tls.discardInbound()
        self.backlog = nil
        self.upstream?.close(loop: loop)
        self.upstream = nil
    }

    /// The backend closed or failed: nothing else would answer this client's requests.
    func upstreamEnded(loop: EpollEventLoop) {
        self.run(self.stateMachine.failed(), loop: loop)
    }
}

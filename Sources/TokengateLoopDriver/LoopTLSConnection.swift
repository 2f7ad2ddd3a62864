//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import NIOCore
public import TokengateEventLoop
public import TokengateTLS

#if canImport(Glibc)
import Glibc
#endif

/// One TLS client connection on an ``EpollEventLoop``: the socket, its `SSL*` (``TLSConnection`` over
/// ByteBuffer BIOs, the same code the NIO data plane and the epoll floor proxy run), the handshake deadline,
/// and plaintext both ways.
///
/// The layer under the HTTP/1.1 driver on the loop: it knows records, not requests. Decrypted bytes go to
/// ``onPlaintext`` as they come (one call per socket read, after `SSL_read` took all it could); plaintext
/// written with ``send(_:loop:)`` is coalesced into as few records as fit and written once at the end of the
/// loop's tick, so the head and body of a response, or the answers to a pipelined batch, leave in one
/// `write`. Ciphertext the socket does not take waits in ``backlog`` for the next writable edge, and
/// ``isWritable`` says so, for the driver's backpressure.
///
/// Owns the socket (non-copyable: closed exactly once) and the TLS state; the owner's closures are dropped on
/// close, which breaks the cycle between the connection and whoever it calls.
public final class LoopTLSConnection: EpollEventHandler {
    /// Bytes asked of each socket read: one whole TLS record and its header.
    static let readSize = 16 * 1024 + 512
    private static let handshakeTimerTag: UInt32 = 1

    private var socket: Socket
    private let tls: TLSConnection
    private var stateMachine = LoopTLSStateMachine()
    private let handshakeTimeout: UInt64
    private var registration: LoopRegistration?
    /// Ciphertext written to the socket only in part; nil nearly always.
    private var backlog: ByteBuffer?
    /// Plaintext was encrypted this tick and waits for the tick's end to be written.
    private var flushScheduled = false
    /// Close (with close_notify) once the pending output is written: the owner's last response.
    private var closeAfterFlush = false
    /// The close_notify is in ``backlog``: close once the socket took it, not before (that would cut the
    /// response short).
    private var closeWhenDrained = false

    /// The handshake completed: the ALPN protocol and the server name are known.
    public var onEstablished: ((LoopTLSConnection, EpollEventLoop) -> Void)?
    /// Decrypted bytes from the client.
    public var onPlaintext: ((ByteBuffer, EpollEventLoop) -> Void)?
    /// The connection closed, for whatever reason (called once; never after a close the owner asked for).
    public var onClosed: ((EpollEventLoop) -> Void)?
    /// The socket took the backlog: the owner may write again.
    public var onWritable: ((EpollEventLoop) -> Void)?

    private init(socket: consuming Socket, tls: TLSConnection, handshakeTimeout: UInt64) {
        self.socket = socket
        self.tls = tls
        self.handshakeTimeout = handshakeTimeout
    }

    /// Registers an accepted client with `loop` under `context` (the listener's certificates, SNI, minimum
    /// version and ALPN) and arms the handshake deadline. On failure the socket is closed (by going away).
    ///
    /// - Parameter handshakeTimeout: nanoseconds (the listener's `tls.handshake_timeout`).
    public static func start(
        _ socket: consuming Socket,
        context: TLSServerContext,
        handshakeTimeout: UInt64,
        loop: EpollEventLoop
    ) throws(SystemCallError) -> LoopTLSConnection {
        let descriptor = socket.descriptor
        guard let tls = TLSConnection(server: context, allocator: loop.allocator) else {
            throw SystemCallError("SSL_new", code: ENOMEM)
        }
        let connection = LoopTLSConnection(socket: socket, tls: tls, handshakeTimeout: handshakeTimeout)
        let registration = try loop.register(connection, socket: descriptor)
        connection.registration = registration
        loop.schedule(in: handshakeTimeout, for: registration, tag: Self.handshakeTimerTag)
        return connection
    }

    /// The protocol ALPN settled on, once established.
    public var negotiatedProtocol: String? { self.tls.negotiatedProtocol }
    /// The SNI name the client asked for, once established.
    public var serverName: String? { self.tls.serverName }
    public var isOpen: Bool { self.stateMachine.isOpen }
    /// Whether the socket took everything written so far.
    public var isWritable: Bool { self.backlog == nil }

    // MARK: Events from the loop.

    public func socketReady(_ events: SocketEvents, loop: EpollEventLoop) {
        if self.backlog != nil, events.contains(.writable) {
            self.writeBacklog(loop: loop)
        }
        // A hang-up or an error is found by the read too (0 bytes, or the error): one path for every end.
        if !events.isDisjoint(with: [.readable, .peerClosed, .failed]) {
            self.readAll(loop: loop)
        }
    }

    public func tickEnded(loop: EpollEventLoop) {
        self.flushScheduled = false
        guard !self.stateMachine.isClosed else { return }
        if case .failed = self.tls.finishEncrypting() {
            self.run(self.stateMachine.closeRequested(), loop: loop, notify: true)
            return
        }
        self.sendCiphertext(loop: loop)
        if self.closeAfterFlush {
            self.closeAfterFlush = false
            _ = self.tls.shutdown()
            self.sendCiphertext(loop: loop)
            if self.backlog == nil {
                self.run(self.stateMachine.closeRequested(), loop: loop, notify: false)
            } else {
                self.closeWhenDrained = true
            }
        }
    }

    public func timerFired(tag: UInt32, loop: EpollEventLoop) {
        self.run(self.stateMachine.handshakeTimedOut(), loop: loop, notify: true)
    }

    /// Reads until a read fills less than it was given: on an edge-triggered loop no byte was left behind.
    private func readAll(loop: EpollEventLoop) {
        while !self.stateMachine.isClosed {
            var buffer = loop.allocator.buffer(capacity: Self.readSize)
            let room = buffer.writableBytes
            switch self.socket.read(into: &buffer, minimumBytes: Self.readSize) {
            case .bytes(let count):
                self.tls.receive(buffer)
                self.run(self.stateMachine.bytesReceived(), loop: loop, notify: true)
                if count < room { return }
            case .wouldBlock:
                return
            case .closed, .failed:
                self.run(self.stateMachine.closeRequested(), loop: loop, notify: true)
                return
            }
        }
    }

    // MARK: What the owner asks.

    /// Encrypts `plaintext` (coalesced with the tick's other small writes) and writes it at the tick's end.
    public func send(_ plaintext: ByteBuffer, loop: EpollEventLoop) {
        guard self.stateMachine.isOpen, !self.closeAfterFlush, !self.closeWhenDrained,
            let registration = self.registration
        else { return }
        if case .failed = self.tls.encrypt(plaintext) {
            self.run(self.stateMachine.closeRequested(), loop: loop, notify: true)
            return
        }
        if !self.flushScheduled {
            self.flushScheduled = true
            loop.callAtTickEnd(registration)
        }
    }

    /// Sends close_notify after what was sent and closes (at the tick's end). ``onClosed`` is not called.
    public func closeAfterSending(loop: EpollEventLoop) {
        guard !self.stateMachine.isClosed, let registration = self.registration else { return }
        self.closeAfterFlush = true
        if !self.flushScheduled {
            self.flushScheduled = true
            loop.callAtTickEnd(registration)
        }
    }

    /// Closes now, without close_notify (an aborted response must not look complete). ``onClosed`` is not called.
    public func abort(loop: EpollEventLoop) {
        self.run(self.stateMachine.closeRequested(), loop: loop, notify: false)
    }

    // MARK: Actions.

    /// The only code that acts on the state machine's decisions. `notify`: tell the owner about a close it did
    /// not ask for.
    private func run(_ action: LoopTLSStateMachine.Action, loop: EpollEventLoop, notify: Bool) {
        switch action {
        case .none:
            break
        case .continueHandshake:
            let result = self.tls.doHandshake()
            // The flight, or the alert that explains a failure, leaves before anything else happens.
            self.sendCiphertext(loop: loop)
            self.run(self.stateMachine.handshakeStepped(result), loop: loop, notify: notify)
        case .established:
            self.onEstablished?(self, loop)
            self.run(self.stateMachine.bytesReceived(), loop: loop, notify: notify)
        case .decode:
            self.decode(loop: loop)
        case .discardInput:
            self.tls.discardInbound()
        case .answerCloseNotifyAndClose:
            _ = self.tls.finishEncrypting()
            _ = self.tls.shutdown()
            self.sendCiphertext(loop: loop)
            self.close(loop: loop, notify: true)
        case .close:
            self.close(loop: loop, notify: notify)
        }
    }

    /// `SSL_read` until OpenSSL needs more bytes, then the plaintext goes to the owner in one piece.
    private func decode(loop: EpollEventLoop) {
        var plaintext = loop.allocator.buffer(capacity: self.tls.pendingInboundBytes + 1024)
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
                self.sendCiphertext(loop: loop)
                self.run(self.stateMachine.closeRequested(), loop: loop, notify: true)
                return
            }
        }
        if plaintext.readableBytes > 0 {
            self.onPlaintext?(plaintext, loop)
        }
        // Session tickets and key updates may have produced records.
        self.sendCiphertext(loop: loop)
        if closeNotify {
            self.run(self.stateMachine.closeNotifyReceived(), loop: loop, notify: true)
        }
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
            if count < outbound.readableBytes {
                self.backlog = outbound.getSlice(
                    at: outbound.readerIndex + count, length: outbound.readableBytes - count)
            }
        case .wouldBlock:
            self.backlog = outbound
        case .closed, .failed:
            self.run(self.stateMachine.closeRequested(), loop: loop, notify: true)
        }
    }

    private func writeBacklog(loop: EpollEventLoop) {
        guard var backlog = self.backlog.take() else { return }
        switch self.socket.write(backlog) {
        case .bytes(let count):
            backlog.moveReaderIndex(forwardBy: count)
            if backlog.readableBytes > 0 {
                self.backlog = backlog
            } else if self.closeWhenDrained {
                self.run(self.stateMachine.closeRequested(), loop: loop, notify: false)
            } else {
                self.onWritable?(loop)
            }
        case .wouldBlock:
            self.backlog = backlog
        case .closed, .failed:
            self.run(self.stateMachine.closeRequested(), loop: loop, notify: true)
        }
    }

    /// Frees the slot, closes the socket and drops the owner's closures. Called once, by ``run(_:loop:notify:)``.
    private func close(loop: EpollEventLoop, notify: Bool) {
        if let registration = self.registration { loop.deregister(registration) }
        self.registration = nil
        self.socket.close()
        self.tls.discardInbound()
        self.backlog = nil
        let onClosed = self.onClosed
        self.onEstablished = nil
        self.onPlaintext = nil
        self.onClosed = nil
        self.onWritable = nil
        if notify { onClosed?(loop) }
    }
}

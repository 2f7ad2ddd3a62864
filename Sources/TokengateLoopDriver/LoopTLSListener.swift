//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import TokengateEventLoop
public import TokengateTLS

#if canImport(Glibc)
import Glibc
#endif

/// One loop's listening socket for a TLS listener: its own `SO_REUSEPORT` socket on the shared address (the
/// kernel spreads connections across the loops' sockets), taking every pending connection on each readable
/// edge and starting a ``LoopTLSConnection`` for it with the listener's current ``context``.
///
/// The context is a property, not a constant: a reload that changes certificates hands the loop the new
/// context through its inbox, and connections accepted from then on use it (open ones keep theirs, as on the
/// NIO data plane).
public final class LoopTLSListener: EpollEventHandler {
    private let socket: Socket
    /// The listener's certificates, SNI names, minimum version and ALPN (`http/1.1` only on this loop).
    public var context: TLSServerContext
    /// Nanoseconds a client has to finish its handshake (`tls.handshake_timeout`).
    public var handshakeTimeout: UInt64
    /// Each accepted connection, registered and with its deadline armed: the owner sets its closures.
    private let onConnection: (LoopTLSConnection, EpollEventLoop) -> Void
    /// Why an accept or a start failed (out of descriptors, out of memory): the listener goes on.
    private let onFailure: (SystemCallError) -> Void

    public init(
        socket: consuming Socket,
        context: TLSServerContext,
        handshakeTimeout: UInt64,
        loop: EpollEventLoop,
        onConnection: @escaping (LoopTLSConnection, EpollEventLoop) -> Void,
        onFailure: @escaping (SystemCallError) -> Void
    ) throws(SystemCallError) {
        let descriptor = socket.descriptor
        self.socket = socket
        self.context = context
        self.handshakeTimeout = handshakeTimeout
        self.onConnection = onConnection
        self.onFailure = onFailure
        _ = try loop.register(self, socket: descriptor)
    }

    /// The bound address (its port, when bound to port 0).
    public func localAddress() throws(SystemCallError) -> sockaddr_in {
        try self.socket.localAddress()
    }

    public func socketReady(_ events: SocketEvents, loop: EpollEventLoop) {
        // Edge-triggered: accept until the queue is empty, or connections left in it wait for the next client.
        while true {
            do throws(SystemCallError) {
                guard let client = try self.socket.accept() else { return }
                let connection = try LoopTLSConnection.start(
                    client, context: self.context, handshakeTimeout: self.handshakeTimeout, loop: loop)
                self.onConnection(connection, loop)
            } catch {
                self.onFailure(error)
                return
            }
        }
    }

    public func tickEnded(loop: EpollEventLoop) {}

    public func timerFired(tag: UInt32, loop: EpollEventLoop) {}
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateEventLoop
import TokengateTLS

#if canImport(Glibc)
import Glibc
#endif

/// The listening socket: takes every pending connection on each readable edge and starts a
/// ``FloorClientConnection`` for it.
final class FloorListener: EpollEventHandler {
    private let socket: Socket
    private let context: TLSServerContext
    private let backend: sockaddr_in
    private let buffers = FloorBuffers()

    init(socket: consuming Socket, context: TLSServerContext, backend: sockaddr_in, loop: EpollEventLoop)
        throws(SystemCallError)
    {
        let descriptor = socket.descriptor
        self.socket = socket
        self.context = context
        self.backend = backend
        _ = try loop.register(self, socket: descriptor)
    }

    func socketReady(_ events: SocketEvents, loop: EpollEventLoop) {
        // Edge-triggered: accept until the queue is empty, or connections left in it wait for the next client.
        while true {
            do {
                guard let client = try self.socket.accept() else { return }
                try FloorClientConnection.start(
                    client, context: self.context, backend: self.backend, buffers: self.buffers, loop: loop)
            } catch {
                // Out of descriptors or memory: this connection is lost, the listener goes on.
                let line = "epoll-floor-proxy: \(error)\n"
                _ = line.withCString { Glibc.write(2, $0, strlen($0)) }
                return
            }
        }
    }

    func tickEnded(loop: EpollEventLoop) {}

    func timerFired(tag: UInt32, loop: EpollEventLoop) {}
}

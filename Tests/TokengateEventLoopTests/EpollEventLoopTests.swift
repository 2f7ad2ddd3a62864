//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import Testing
import TokengateEventLoop

#if canImport(Glibc)
import Glibc
#endif

/// The loop over real sockets on loopback: dispatch, edge-triggered reads, tick ends, deadlines, stale events.
/// Every test bounds its loop with a guard deadline that stops it and fails the test, so a bug hangs nothing.
@Suite struct EpollEventLoopTests {
    /// Records what the loop calls, and can act on it.
    final class Recorder: EpollEventHandler {
        var calls: [String] = []
        var onSocket: ((SocketEvents, EpollEventLoop) -> Void)?
        var onTickEnd: ((EpollEventLoop) -> Void)?
        var onTimer: ((UInt32, EpollEventLoop) -> Void)?

        func socketReady(_ events: SocketEvents, loop: EpollEventLoop) {
            self.calls.append("socket")
            self.onSocket?(events, loop)
        }

        func tickEnded(loop: EpollEventLoop) {
            self.calls.append("tickEnd")
            self.onTickEnd?(loop)
        }

        func timerFired(tag: UInt32, loop: EpollEventLoop) {
            self.calls.append("timer \(tag)")
            self.onTimer?(tag, loop)
        }
    }

    /// Stops the loop after `seconds` and records that it had to: the test failed to finish by itself.
    final class Guard: EpollEventHandler {
        var fired = false
        func socketReady(_ events: SocketEvents, loop: EpollEventLoop) {}
        func tickEnded(loop: EpollEventLoop) {}
        func timerFired(tag: UInt32, loop: EpollEventLoop) {
            self.fired = true
            loop.stop()
        }
    }

    /// A socket that only exists to give a handler a slot: a listener nobody connects to, never ready.
    static func idleSocket() throws -> Socket {
        try Socket.listen(on: sockaddr_in(ipv4: "127.0.0.1:0")!, backlog: 1)
    }

    static func guarded(_ loop: EpollEventLoop, socket: Int32, seconds: UInt64 = 10) throws -> Guard {
        let guardHandler = Guard()
        let registration = try loop.register(guardHandler, socket: socket)
        loop.schedule(in: seconds * 1_000_000_000, for: registration, tag: 0)
        return guardHandler
    }

    @Test func timersFireInDeadlineOrderAndAClosedHandlersTimerIsDropped() throws {
        let loop = try EpollEventLoop()
        let socket0 = try Self.idleSocket(), socket1 = try Self.idleSocket(), socket2 = try Self.idleSocket()
        let watchdog = try Self.guarded(loop, socket: socket2.descriptor)
        let first = Recorder()
        let gone = Recorder()
        let firstRegistration = try loop.register(first, socket: socket0.descriptor)
        let goneRegistration = try loop.register(gone, socket: socket1.descriptor)
        loop.schedule(in: 30_000_000, for: firstRegistration, tag: 3)
        loop.schedule(in: 10_000_000, for: firstRegistration, tag: 1)
        loop.schedule(in: 20_000_000, for: goneRegistration, tag: 2)
        loop.schedule(in: 20_000_000, for: firstRegistration, tag: 2)
        loop.deregister(goneRegistration)
        first.onTimer = { tag, loop in if tag == 3 { loop.stop() } }

        try loop.run()

        #expect(!watchdog.fired)
        #expect(first.calls.filter { $0.hasPrefix("timer") } == ["timer 1", "timer 2", "timer 3"])
        #expect(gone.calls.isEmpty)
    }

    @Test func aStaleRegistrationReachesNothingAfterItsSlotIsReused() throws {
        let loop = try EpollEventLoop()
        let socket0 = try Self.idleSocket(), socket1 = try Self.idleSocket(), socket2 = try Self.idleSocket()
        let watchdog = try Self.guarded(loop, socket: socket2.descriptor)
        let old = Recorder()
        let oldRegistration = try loop.register(old, socket: socket0.descriptor)
        loop.deregister(oldRegistration)
        let new = Recorder()
        let newRegistration = try loop.register(new, socket: socket1.descriptor)
        #expect(newRegistration.index == oldRegistration.index)
        #expect(newRegistration.generation != oldRegistration.generation)
        // A timer and a tick-end call asked under the old registration must not reach the new handler.
        loop.schedule(in: 1_000_000, for: oldRegistration, tag: 7)
        loop.callAtTickEnd(oldRegistration)
        loop.schedule(in: 5_000_000, for: newRegistration, tag: 8)
        new.onTimer = { _, loop in loop.stop() }
        loop.deregister(oldRegistration)  // a second deregister of a stale registration frees nothing

        try loop.run()

        #expect(!watchdog.fired)
        #expect(old.calls.isEmpty)
        #expect(new.calls.filter { $0.hasPrefix("timer") || $0 == "tickEnd" } == ["timer 8"])
        // The new handler keeps its slot: the next registration takes another one.
        let socket3 = try Self.idleSocket()
        let third = try loop.register(Recorder(), socket: socket3.descriptor)
        #expect(third.index != newRegistration.index)
    }

    /// The accepted side of the flow test: reads every byte each edge announced, answers at the end of the
    /// tick in which the whole payload arrived, and stops the loop at the client's end of stream.
    final class Receiver: EpollEventHandler {
        var socket: Socket
        let expected: Int
        var registration: LoopRegistration?
        var received = 0
        var reads = 0
        var sawEnd = false
        var answeredAtTickEnd = false

        init(socket: consuming Socket, expected: Int) {
            self.socket = socket
            self.expected = expected
        }

        func socketReady(_ events: SocketEvents, loop: EpollEventLoop) {
            while true {
                var buffer = loop.allocator.buffer(capacity: 16 * 1024)
                let room = buffer.writableBytes
                switch self.socket.read(into: &buffer, minimumBytes: room) {
                case .bytes(let count):
                    self.reads += 1
                    self.received += count
                    if self.received == self.expected, let registration = self.registration {
                        loop.callAtTickEnd(registration)
                    }
                    if count < room { return }  // the socket is empty: a later byte raises a new edge
                case .wouldBlock:
                    return
                case .closed:
                    self.sawEnd = true
                    loop.stop()
                    return
                case .failed:
                    loop.stop()
                    return
                }
            }
        }

        func tickEnded(loop: EpollEventLoop) {
            self.answeredAtTickEnd = true
            _ = self.socket.write(ByteBuffer(string: "received"))
        }

        func timerFired(tag: UInt32, loop: EpollEventLoop) {}
    }

    /// Takes the one connection the test makes.
    final class Acceptor: EpollEventHandler {
        let socket: Socket
        let expected: Int
        var receiver: Receiver?

        init(socket: consuming Socket, expected: Int) {
            self.socket = socket
            self.expected = expected
        }

        func socketReady(_ events: SocketEvents, loop: EpollEventLoop) {
            guard self.receiver == nil, let accepted = try? self.socket.accept() else { return }
            let descriptor = accepted.descriptor
            let receiver = Receiver(socket: accepted, expected: self.expected)
            receiver.registration = try? loop.register(receiver, socket: descriptor)
            self.receiver = receiver
        }

        func tickEnded(loop: EpollEventLoop) {}
        func timerFired(tag: UInt32, loop: EpollEventLoop) {}
    }

    /// The client of the flow test: writes the payload as the socket takes it, closes once answered.
    final class Sender: EpollEventHandler {
        var socket: Socket
        let payload: ByteBuffer
        var sent = 0
        var answer = ByteBuffer()

        init(socket: consuming Socket, payload: ByteBuffer) {
            self.socket = socket
            self.payload = payload
        }

        func socketReady(_ events: SocketEvents, loop: EpollEventLoop) {
            while events.contains(.writable), self.sent < self.payload.readableBytes {
                let rest = self.payload.getSlice(at: self.sent, length: self.payload.readableBytes - self.sent)!
                guard case .bytes(let count) = self.socket.write(rest) else { break }
                self.sent += count
            }
            if events.contains(.readable) {
                var buffer = loop.allocator.buffer(capacity: 1024)
                if case .bytes = self.socket.read(into: &buffer, minimumBytes: 1024) {
                    self.answer.writeImmutableBuffer(buffer)
                    if self.answer.readableBytes == "received".utf8.count { self.socket.close() }
                }
            }
        }

        func tickEnded(loop: EpollEventLoop) {}
        func timerFired(tag: UInt32, loop: EpollEventLoop) {}
    }

    /// A listener, a client and the accepted connection on loopback: a payload bigger than one read arrives
    /// whole under edge-triggered reads, the answer leaves from the end of the tick, and the client's close
    /// reaches the accepted side as end of stream.
    @Test func bytesFlowBothWaysAndThePeersCloseIsSeen() throws {
        let loop = try EpollEventLoop()
        let listener = try Socket.listen(on: sockaddr_in(ipv4: "127.0.0.1:0")!, backlog: 16)
        let address = Self.boundAddress(of: listener.descriptor)
        let listenerDescriptor = listener.descriptor
        let payload = ByteBuffer(repeating: UInt8(ascii: "x"), count: 200_000)
        let acceptor = Acceptor(socket: listener, expected: payload.readableBytes)
        _ = try loop.register(acceptor, socket: listenerDescriptor)
        let client = try Socket.connect(to: address)
        let clientDescriptor = client.descriptor
        let sender = Sender(socket: client, payload: payload)
        _ = try loop.register(sender, socket: clientDescriptor)
        let guardSocket = try Self.idleSocket()
        let watchdog = try Self.guarded(loop, socket: guardSocket.descriptor)

        try loop.run()

        #expect(!watchdog.fired)
        let receiver = try #require(acceptor.receiver)
        #expect(receiver.received == payload.readableBytes)
        #expect(receiver.reads > 1)
        #expect(receiver.answeredAtTickEnd)
        #expect(String(buffer: sender.answer) == "received")
        #expect(receiver.sawEnd)
    }

    static func boundAddress(of descriptor: Int32) -> sockaddr_in {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return address
    }

    @Test func aConnectionRefusedIsReportedAsThePendingError() throws {
        let loop = try EpollEventLoop()
        // A port nobody listens on: bind one, take its number, close it.
        var probe = try Socket.listen(on: sockaddr_in(ipv4: "127.0.0.1:0")!, backlog: 1)
        let address = Self.boundAddress(of: probe.descriptor)
        probe.close()
        let socket = try Socket.connect(to: address)
        let guardSocket = try Self.idleSocket()
        let watchdog = try Self.guarded(loop, socket: guardSocket.descriptor)
        var error: Int32 = 0
        let connector = Recorder()
        connector.onSocket = { events, loop in
            error = socket.pendingError()
            if error != 0 || events.contains(.failed) { loop.stop() }
        }
        _ = try loop.register(connector, socket: socket.descriptor)

        try loop.run()

        #expect(!watchdog.fired)
        #expect(error == ECONNREFUSED)
    }

    @Test func addressesParse() {
        #expect(sockaddr_in(ipv4: "127.0.0.1:8443")?.sin_port == UInt16(8443).bigEndian)
        #expect(sockaddr_in(ipv4: "10.1.2.3:0") != nil)
        #expect(sockaddr_in(ipv4: "127.0.0.1") == nil)
        #expect(sockaddr_in(ipv4: "127.0.0.1:65536") == nil)
        #expect(sockaddr_in(ipv4: "localhost:80") == nil)
        #expect(sockaddr_in(ipv4: "[::1]:80") == nil)
    }
}

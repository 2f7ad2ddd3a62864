//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing
import TokengateEventLoop

#if canImport(Glibc)
import Glibc
#endif

/// What one listener per event loop rests on, over real loopback sockets: `SO_REUSEPORT` listeners share an
/// address and the kernel spreads connections across them, a listener without it is refused that address, and
/// a loop's thread can be pinned to one CPU without pinning the rest of the process.
@Suite struct ListenerSpreadTests {
    static let loopback = sockaddr_in(ipv4: "127.0.0.1:0")!

    /// A blocking client connection to `address`, as a bare descriptor (closed by the caller).
    static func connectClient(to address: sockaddr_in) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = address
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(result == 0)
        return descriptor
    }

    @Test func reusePortListenersShareAnAddressAndEachGetsConnections() throws {
        let first = try Socket.listen(on: Self.loopback, backlog: 64, reusePort: true)
        let address = try first.localAddress()
        #expect(address.sin_port != 0)
        let second = try Socket.listen(on: address, backlog: 64, reusePort: true)
        #expect(try second.localAddress().sin_port == address.sin_port)

        // Blocking connects: each is in one listener's accept queue when `connect` returns.
        let clients = (0..<32).map { _ in Self.connectClient(to: address) }
        defer { for client in clients { close(client) } }
        var perListener = [0, 0]
        let deadline = time(nil) + 5
        while perListener[0] + perListener[1] < clients.count, time(nil) < deadline {
            var descriptors = [first.descriptor, second.descriptor].map {
                pollfd(fd: $0, events: Int16(POLLIN), revents: 0)
            }
            _ = poll(&descriptors, nfds_t(descriptors.count), 100)
            while let accepted = try first.accept() {
                #expect(accepted.descriptor >= 0)
                perListener[0] += 1
            }
            while let accepted = try second.accept() {
                #expect(accepted.descriptor >= 0)
                perListener[1] += 1
            }
        }
        #expect(perListener[0] + perListener[1] == 32)
        // The kernel hashes each connection's addresses to a listener: 32 connections all landing on one of
        // two listeners would mean there is no spread (one chance in 2^31 by luck).
        #expect(perListener[0] > 0)
        #expect(perListener[1] > 0)
    }

    @Test func aListenerWithoutReusePortIsRefusedTheAddress() throws {
        let first = try Socket.listen(on: Self.loopback, backlog: 8, reusePort: true)
        let address = try first.localAddress()
        do {
            _ = try Socket.listen(on: address, backlog: 8, reusePort: false)
            Issue.record("a second listener without SO_REUSEPORT was bound to the same address")
        } catch {
            #expect(error.code == EADDRINUSE)
        }
    }

    @Test func pinningBindsTheCallingThreadOnly() throws {
        let before = CPUAffinity.currentThreadCPUCount()
        #expect(before != nil)
        guard let cpu = (0..<1024).first(where: CPUAffinity.currentThreadMayRun(on:)) else {
            Issue.record("this thread may run on no CPU")
            return
        }
        let probe = PinProbe(cpu: cpu)
        // A thread of its own: pinning the test runner's thread would pin the tests that follow.
        var thread = pthread_t()
        let created = pthread_create(
            &thread, nil,
            { argument in
                Unmanaged<PinProbe>.fromOpaque(argument!).takeUnretainedValue().run()
                return nil
            }, Unmanaged.passUnretained(probe).toOpaque())
        #expect(created == 0)
        guard created == 0 else { return }
        pthread_join(thread, nil)
        #expect(probe.error == nil)
        #expect(probe.count == 1)
        #expect(!probe.mayRunElsewhere)
        #expect(CPUAffinity.currentThreadCPUCount() == before)
    }

    @Test func pinningToACPUThatDoesNotExistFails() {
        #expect(throws: SystemCallError.self) { try CPUAffinity.pinCurrentThread(to: 4096) }
        #expect(throws: SystemCallError.self) { try CPUAffinity.pinCurrentThread(to: -1) }
    }
}

/// Pins the thread it runs on and records what the kernel says afterwards.
private final class PinProbe: @unchecked Sendable {
    let cpu: Int
    var count: Int?
    var mayRunElsewhere = true
    var error: SystemCallError?

    init(cpu: Int) {
        self.cpu = cpu
    }

    func run() {
        do {
            try CPUAffinity.pinCurrentThread(to: self.cpu)
            self.count = CPUAffinity.currentThreadCPUCount()
            self.mayRunElsewhere = (0..<1024).contains { $0 != self.cpu && CPUAffinity.currentThreadMayRun(on: $0) }
        } catch {
            self.error = error
        }
    }
}

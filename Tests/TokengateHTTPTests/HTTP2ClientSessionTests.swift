//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
@testable import TokengateHTTP

#if canImport(Glibc)
import Glibc
#endif

/// The client session against real HTTP/2 servers no one here wrote: grpcio's (scripts/grpc/echo_server.py,
/// h2c with prior knowledge) for requests, streaming both ways, trailers and multiplexing, and a backend built
/// on Python's h2 that floods PINGs (scripts/h2-attacks/ping_flood_backend.py).
@Suite("HTTP/2 client session", .serialized)
struct HTTP2ClientSessionTests {
    @Test("a unary gRPC call: head, message and trailers, TE and authorization through")
    func unary() throws {
        let server = try PythonPeer("scripts/grpc/echo_server.py")
        defer { server.stop() }
        var client = try Driver(port: server.port)
        let stream = client.session.submitRequest(Self.grpcRequest("Unary", port: server.port), hasBody: true)
        #expect(stream == 1)
        client.session.sendData(stream: stream, Self.frame(Array("hello".utf8)))
        client.session.endRequest(stream: stream)
        let events = try client.run { $0.contains { if case .closed(stream, _, _) = $0 { true } else { false } } }

        let head = Self.heads(events, stream)
        #expect(head.count == 1)
        #expect(head.first?.0 == 200)
        #expect(head.first?.2 == false)
        #expect(head.first?.1.contains(HTTP2ClientField("x-seen-authorization", "Bearer test-token")) == true)
        #expect(Self.body(events, stream) == Self.frame(Array("hello".utf8)))
        let trailers = Self.trailers(events, stream) ?? []
        #expect(trailers.contains(HTTP2ClientField("grpc-status", "0")))
        #expect(trailers.contains(HTTP2ClientField("x-echo-trailer", "done")))
        #expect(events.last == .closed(stream: stream, code: 0, reason: nil))
    }

    @Test("a bidirectional stream: each message answered before the next is sent, then the trailers")
    func bidi() throws {
        let server = try PythonPeer("scripts/grpc/echo_server.py")
        defer { server.stop() }
        var client = try Driver(port: server.port)
        let stream = client.session.submitRequest(Self.grpcRequest("Bidi", port: server.port), hasBody: true)
        var received: [UInt8] = []
        for word in ["one", "two", "three"] {
            let message = Self.frame(Array(word.utf8))
            client.session.sendData(stream: stream, message)
            let expected = received + message
            let events = try client.run { events in
                received.count + Self.body(events, stream).count >= expected.count
            }
            received += Self.body(events, stream)
            #expect(received == expected)
        }
        client.session.endRequest(stream: stream)
        let events = try client.run { $0.contains { if case .closed(stream, _, _) = $0 { true } else { false } } }
        let trailers = Self.trailers(events, stream) ?? []
        #expect(trailers.contains(HTTP2ClientField("grpc-status", "0")))
    }

    @Test("twenty calls at once on one connection, server-streaming and client-streaming mixed")
    func multiplexed() throws {
        let server = try PythonPeer("scripts/grpc/echo_server.py")
        defer { server.stop() }
        var client = try Driver(port: server.port)
        var expected: [Int32: [UInt8]] = [:]
        for index in 0..<20 {
            let word = Array("m\(index)".utf8)
            let serverStreaming = index.isMultiple(of: 2)
            let method = serverStreaming ? "ServerStream" : "ClientStream"
            let id = client.session.submitRequest(Self.grpcRequest(method, port: server.port), hasBody: true)
            #expect(id > 0)
            client.session.sendData(stream: id, Self.frame(word))
            if serverStreaming {
                expected[id] = Self.frame(word) + Self.frame(word) + Self.frame(word)
            } else {
                client.session.sendData(stream: id, Self.frame(Array("+".utf8)))
                expected[id] = Self.frame(word + Array("+".utf8))  // The server joins the messages.
            }
            client.session.endRequest(stream: id)
        }
        let events = try client.run { events in
            events.filter { if case .closed = $0 { true } else { false } }.count == expected.count
        }
        for (id, body) in expected {
            #expect(events.contains(.closed(stream: id, code: 0, reason: nil)))
            #expect(Self.body(events, id) == body)
        }
    }

    @Test("6 MiB up in 24 messages and 6 MiB back: both flow-control directions, windows handed back as read")
    func largeBodies() throws {
        let server = try PythonPeer("scripts/grpc/echo_server.py")
        defer { server.stop() }
        var client = try Driver(port: server.port)
        let stream = client.session.submitRequest(Self.grpcRequest("ClientStream", port: server.port), hasBody: true)
        var joined: [UInt8] = []
        for index in 0..<24 {
            let payload = [UInt8](repeating: UInt8(index), count: 256 * 1024)
            joined += payload
            client.session.sendData(stream: stream, Self.frame(payload))
        }
        client.session.endRequest(stream: stream)
        let events = try client.run { $0.contains { if case .closed(stream, _, _) = $0 { true } else { false } } }
        #expect(events.contains(.closed(stream: stream, code: 0, reason: nil)))
        let body = Self.body(events, stream)
        #expect(body.count == joined.count + 5)
        #expect(body.dropFirst(5).elementsEqual(joined))
        #expect(Self.trailers(events, stream)?.contains(HTTP2ClientField("grpc-status", "0")) == true)
    }

    @Test("a trailers-only refusal from the backend arrives as a head that ends the stream")
    func trailersOnly() throws {
        let server = try PythonPeer("scripts/grpc/echo_server.py")
        defer { server.stop() }
        var client = try Driver(port: server.port)
        let stream = client.session.submitRequest(Self.grpcRequest("Deny", port: server.port), hasBody: true)
        client.session.sendData(stream: stream, Self.frame([1]))
        client.session.endRequest(stream: stream)
        let events = try client.run { $0.contains { if case .closed(stream, _, _) = $0 { true } else { false } } }
        let head = Self.heads(events, stream).first
        let trailers = Self.trailers(events, stream)
        // grpcio sends its trailers-only answer either as one end-stream head or as a head and trailers.
        let status = (head?.2 == true ? head?.1 : trailers)?.first { $0.name == "grpc-status" }?.value
        #expect(head?.0 == 200)
        #expect(status == "7")
    }

    @Test("a backend that floods PINGs ends the session with a flood verdict")
    func pingFlood() throws {
        let server = try PythonPeer("scripts/h2-attacks/ping_flood_backend.py")
        defer { server.stop() }
        var client = try Driver(port: server.port)
        let stream = client.session.submitRequest(
            [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"), (":path", "/")], hasBody: false)
        #expect(stream == 1)
        var verdict: NGHTTP2ClientSession.Failure?
        do {
            _ = try client.run { _ in false }
        } catch let failure as NGHTTP2ClientSession.Failure {
            verdict = failure
        }
        #expect(verdict == .flood(.ping))
    }

    // MARK: Helpers

    static func grpcRequest(_ method: String, port: Int) -> [(String, String)] {
        [
            (":method", "POST"), (":scheme", "http"), (":authority", "127.0.0.1:\(port)"),
            (":path", "/tokengate.test.Echo/\(method)"), ("content-type", "application/grpc"), ("te", "trailers"),
            ("authorization", "Bearer test-token"),
        ]
    }

    /// A gRPC length-prefixed message, uncompressed.
    static func frame(_ payload: [UInt8]) -> [UInt8] {
        let count = UInt32(payload.count)
        return [0, UInt8(count >> 24), UInt8(count >> 16 & 0xff), UInt8(count >> 8 & 0xff), UInt8(count & 0xff)] + payload
    }

    static func body(_ events: [HTTP2ClientEvent], _ stream: Int32) -> [UInt8] {
        var body: [UInt8] = []
        for case .data(stream, let bytes) in events { body += bytes }
        return body
    }

    static func heads(_ events: [HTTP2ClientEvent], _ stream: Int32) -> [(Int, [HTTP2ClientField], Bool)] {
        var heads: [(Int, [HTTP2ClientField], Bool)] = []
        for case .head(stream, let status, let fields, let end) in events { heads.append((status, fields, end)) }
        return heads
    }

    static func trailers(_ events: [HTTP2ClientEvent], _ stream: Int32) -> [HTTP2ClientField]? {
        for case .trailers(stream, let fields) in events { return fields }
        return nil
    }
}

/// Drives a session over a blocking loopback socket: writes what the session has, reads what arrives, until
/// the events so far satisfy the condition (or 10 s pass, which fails the test).
struct Driver {
    let session: NGHTTP2ClientSession
    let socket: Int32
    private var events: [HTTP2ClientEvent] = []

    struct Timeout: Error {}
    struct Closed: Error {}

    init(port: Int, configuration: NGHTTP2ClientSession.Configuration = .init()) throws {
        self.session = try NGHTTP2ClientSession(configuration: configuration)
        self.socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(self.socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw Closed() }
    }

    /// Runs until `done(events since the last call)`; returns those events.
    mutating func run(until done: ([HTTP2ClientEvent]) -> Bool) throws -> [HTTP2ClientEvent] {
        let deadline = Date().addingTimeInterval(10)
        self.events = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let output = try self.session.nextOutput()
            var written = 0
            while written < output.count {
                let count = output.withUnsafeBytes { send(self.socket, $0.baseAddress! + written, output.count - written, Int32(MSG_NOSIGNAL)) }
                guard count > 0 else { throw Closed() }
                written += count
            }
            self.events += self.session.takeEvents()
            if done(self.events) { return self.events }
            guard Date() < deadline else { throw Timeout() }
            var poller = pollfd(fd: self.socket, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 200) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(self.socket, $0.baseAddress!, $0.count, 0) }
            guard count > 0 else { throw Closed() }
            let received = try buffer.withUnsafeBytes { try self.session.receive(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            // Passed on at once: the window goes back (without this a response over 1 MiB would stall).
            for case .data(let stream, let bytes) in received { self.session.consume(stream: stream, bytes: bytes.count) }
            self.events += received
        }
    }
}

/// A Python peer from scripts/: started with the repository root as working directory, its port read from the
/// "PORT n" line it prints; stopped by closing its stdin and then terminating it.
final class PythonPeer {
    let process = Process()
    let input = Pipe()
    let port: Int

    init(_ script: String) throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let output = Pipe()
        self.process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        self.process.arguments = ["python3", root.appendingPathComponent(script).path]
        self.process.standardInput = self.input
        self.process.standardOutput = output
        try self.process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("PORT "), let port = Int(text.dropFirst(5).prefix { $0.isNumber }) else {
            self.process.terminate()
            throw Driver.Closed()
        }
        self.port = port
    }

    func stop() {
        try? self.input.fileHandleForWriting.close()
        self.process.terminate()
        self.process.waitUntilExit()
    }
}

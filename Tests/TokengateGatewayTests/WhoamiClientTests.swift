//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
import TokengateConfig
import TokengateHTTP
import TokengateTestSupport

@testable import TokengateGateway

/// The token page's whoami subrequests are capped: a flood of token-page requests must not become a flood of
/// connections to the RP.
@Suite struct WhoamiClientTests {
    /// Accepts connections and never answers (a slow RP).
    private final class Silent: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
    }

    @Test func pastMaxInFlightTheRPIsNotAskedAndSlotsComeBack() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Silent()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(server.localAddress?.port)
        let client = try WhoamiClient(
            configuration: WhoamiConfiguration(
                url: "http://127.0.0.1:\(port)/whoami", userHeader: "x-user", timeout: .milliseconds(500), maxInFlight: 2
            )
        )
        let loop = group.next()
        let logger = Logger(label: "test")
        let first = client.ask(cookies: "s=1", on: loop, logger: logger)
        let second = client.ask(cookies: "s=2", on: loop, logger: logger)
        let third = try await client.ask(cookies: "s=3", on: loop, logger: logger).get()
        #expect(third == .busy, "the third call while two are under way is refused at once")
        #expect(try await first.get() == .failed, "the silent RP times out")
        #expect(try await second.get() == .failed)
        // Both slots are free again: the next call goes to the RP (and times out) instead of being refused.
        let fourth = try await client.ask(cookies: "s=4", on: loop, logger: logger).get()
        #expect(fourth == .failed)
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// Answers every request with these bytes, then closes (an RP whose framework sends Latin-1 headers).
    private final class Scripted: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let response: [UInt8]
        init(_ response: [UInt8]) { self.response = response }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(NIOAny(context.channel.allocator.buffer(bytes: self.response)), promise: nil)
        }
    }

    private func withServer(
        _ handler: @escaping @Sendable () -> any ChannelHandler & Sendable,
        _ body: (Int, any EventLoop) async throws -> Void
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(handler()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        do {
            try await body(try #require(server.localAddress?.port), group.next())
        } catch {
            try await server.close()
            try await group.shutdownGracefully()
            throw error
        }
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// A user id that is not UTF-8 reaches the responder as NIO decodes it (U+FFFD for the bytes that are not), and
    /// is refused with 502 instead of minting a token for the mangled id, which `josé` and `josè` would share.
    @Test func aUserIDThatIsNotUTF8IsRefusedNotMangled() async throws {
        let latin1: [UInt8] = Array("HTTP/1.1 200 OK\r\nX-User: al".utf8) + [0xE9] + Array("ice\r\nContent-Length: 0\r\n\r\n".utf8)
        try await self.withServer({ Scripted(latin1) }) { port, loop in
            let settings = WhoamiConfiguration(url: "http://127.0.0.1:\(port)/whoami", userHeader: "x-user")
            let client = try WhoamiClient(configuration: settings)
            let result = try await client.ask(cookies: "s=1", on: loop, logger: Logger(label: "test")).get()
            guard case .answered(200, let values, _) = result, values.count == 1 else {
                Issue.record("unexpected \(result)")
                return
            }
            #expect(values[0].unicodeScalars.contains("\u{FFFD}"), "NIO's decoding changed: \(values)")
            #expect(TokenPageResponder.userID(values[0]) == .failure(.notUTF8))
        }
    }

    /// Why a call failed is logged (a warning, throttled, with a count), never with the cookies: before, a dead or
    /// slow RP showed only as `token_page_whoami_failed` in the access log.
    @Test func failuresAreLoggedWithTheirCause() async throws {
        let recorded = RecordedLogLines()
        try await self.withServer({ Silent() }) { port, loop in
            let settings = WhoamiConfiguration(
                url: "http://127.0.0.1:\(port)/whoami", userHeader: "x-user", timeout: .milliseconds(300))
            let client = try WhoamiClient(configuration: settings)
            let started = NIODeadline.now()
            #expect(try await client.ask(cookies: "secret-session=1", on: loop, logger: recorded.logger()).get() == .failed)
            #expect(NIODeadline.now() - started < .milliseconds(900))
        }
        let refusedPort = try GatewayIntegrationTests.unusedPort()
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let refused = try WhoamiClient(
            configuration: WhoamiConfiguration(url: "http://127.0.0.1:\(refusedPort)/whoami", userHeader: "x-user"))
        #expect(try await refused.ask(cookies: "secret-session=1", on: loop, logger: recorded.logger()).get() == .failed)
        let lines = recorded.all.filter { $0.message == "token page login check failed" }
        #expect(lines.count == 2, "\(recorded.all)")
        #expect(lines.first?.metadata["error"] == "no complete answer within 300 ms", "\(lines)")
        #expect(lines.last?.metadata["error"]?.hasPrefix("cannot connect to 127.0.0.1:\(refusedPort)") == true, "\(lines)")
        #expect(lines.allSatisfy { $0.level == .warning && !$0.text.contains("secret-session") })
    }

    /// After failures were logged, the first usable answer says the login check works again, once: the last
    /// warning must not stand as if the RP were still failing (a review found no such line).
    @Test func aUsableAnswerAfterFailuresIsLoggedOnce() throws {
        let recorded = RecordedLogLines()
        let client = try WhoamiClient(configuration: WhoamiConfiguration(url: "http://rp.example/whoami", userHeader: "x-user"))
        let start = NIODeadline.now()
        client.reportAnswered(logger: recorded.logger(), now: start)
        #expect(recorded.all.isEmpty, "nothing failed: nothing to say")
        client.reportFailure("cannot connect", logger: recorded.logger(), now: start)
        client.reportAnswered(logger: recorded.logger(), now: start + .seconds(2))
        client.reportAnswered(logger: recorded.logger(), now: start + .seconds(4))
        let lines = recorded.all.map(\.message)
        #expect(lines == ["token page login check failed", "token page login check works again"], "\(lines)")
    }

    /// `max_in_flight` is for the whole gateway: clients of two token page routes, or of two configuration
    /// generations (a reload while calls are under way), share one count. Before, each had its own.
    @Test func clientsSharingTheProcessCountShareTheCap() async throws {
        try await self.withServer({ Silent() }) { port, loop in
            let settings = WhoamiConfiguration(
                url: "http://127.0.0.1:\(port)/whoami", userHeader: "x-user", timeout: .milliseconds(300), maxInFlight: 2)
            let shared = ManagedAtomic<Int>(0)
            let before = try WhoamiClient(configuration: settings, callsInFlight: shared)
            let after = try WhoamiClient(configuration: settings, callsInFlight: shared)
            let logger = Logger(label: "test")
            let first = before.ask(cookies: "s=1", on: loop, logger: logger)
            let second = before.ask(cookies: "s=2", on: loop, logger: logger)
            #expect(try await after.ask(cookies: "s=3", on: loop, logger: logger).get() == .busy)
            _ = try await (first.get(), second.get())
            #expect(shared.load(ordering: .relaxed) == 0)
        }
    }

    @Test func busyBecomesA503WithAReasonCode() {
        let answer = TokenPageResponder.loginCheckBusy
        #expect(answer.status == .serviceUnavailable)
        #expect(answer.reasonCode == "token_page_whoami_busy")
    }
}

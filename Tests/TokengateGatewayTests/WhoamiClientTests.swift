//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
import TokengateConfig

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

    @Test func busyBecomesA503WithAReasonCode() {
        let answer = TokenPageResponder.loginCheckBusy
        #expect(answer.status == .serviceUnavailable)
        #expect(answer.reasonCode == "token_page_whoami_busy")
    }
}

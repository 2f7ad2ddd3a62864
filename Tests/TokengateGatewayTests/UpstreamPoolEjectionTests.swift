//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOPosix
import Testing
import TokengateDemo

@testable import TokengateGateway

/// Passive ejection in one pool, over real sockets: which target ``UpstreamPool/acquire(after:)`` tries says
/// whether the first one is ejected.
@Suite struct UpstreamPoolEjectionTests {
    /// Which target a retry after target 1 got a connection to, or `nil` when the connect failed. The search
    /// starts at target 0 and reaches target 1 only when target 0 is ejected.
    private static func connectedTarget(_ pool: UpstreamPool) async throws -> Int? {
        nonisolated(unsafe) let pool = pool  // Only touched on its loop, inside the submitted closure.
        let future = pool.eventLoop.flatSubmit {
            pool.acquire(after: 1, requestID: "test").map { connection -> Int? in
                pool.release(connection, reusable: false)
                return connection.targetIndex
            }.flatMapErrorThrowing { error -> Int? in
                guard error is UpstreamPool.ConnectFailure else { throw error }
                return nil
            }
        }
        return try await future.get()
    }

    @Test func aSuccessfulConnectResetsTheFailuresInARow() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let live = try await DemoBackend.start(port: 0, group: group)
        let flakyPort = try GatewayIntegrationTests.unusedPort()
        let settings = UpstreamSettings(
            name: "api",
            targets: [
                .init(host: "127.0.0.1", port: flakyPort, useTLS: false, display: "http://127.0.0.1:\(flakyPort)"),
                .init(host: "127.0.0.1", port: live.port, useTLS: false, display: "http://127.0.0.1:\(live.port)"),
            ],
            connectTimeout: .seconds(1),
            responseTimeout: .seconds(1),
            idleTimeout: .seconds(60),
            maxConnectionsPerTarget: 8,
            retries: 1,
            failuresBeforeEjection: 2,
            ejectionTime: .hours(1),
            tlsContext: nil
        )
        let loop = group.next()
        let pool = UpstreamPool(
            settings: settings,
            eventLoop: loop,
            logger: Logger(label: "test"),
            connectFailures: MetricsRegistry().counter("test_connect_failures_total", help: "test"),
            failureLog: UpstreamConnectFailureLog(upstream: "api", targets: settings.targets.map(\.display), logger: Logger(label: "test")),
            flushBatch: UpstreamFlushBatch(eventLoop: loop)
        )

        #expect(try await Self.connectedTarget(pool) == nil, "first failure: not ejected yet")
        // The target comes up: a connect succeeds, and the failure before it no longer counts.
        let flaky = try await DemoBackend.start(port: flakyPort, group: group)
        #expect(try await Self.connectedTarget(pool) == 0)
        try await flaky.stop()
        #expect(try await Self.connectedTarget(pool) == nil, "one failure since the success: not ejected")
        #expect(try await Self.connectedTarget(pool) == nil, "second failure in a row: ejected now")
        #expect(try await Self.connectedTarget(pool) == 1, "the ejected target is skipped")

        try await live.stop()
        try await group.shutdownGracefully()
    }
}

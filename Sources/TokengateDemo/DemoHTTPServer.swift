//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import NIOPosix

/// The listener the demo servers share: a plain HTTP/1.1 server on `host:port` whose connections each get
/// the handler `makeHandler` returns.
package enum DemoHTTPServer {
    package static func bind(
        host: String,
        port: Int,
        group: any EventLoopGroup,
        makeHandler: @escaping @Sendable () -> any ChannelHandler
    ) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(makeHandler())
                }
            }
            .bind(host: host, port: port).get()
    }
}

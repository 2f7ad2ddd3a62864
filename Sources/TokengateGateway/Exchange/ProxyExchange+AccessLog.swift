//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CoreMetrics
import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

// MARK: Metrics and the access log: one line per request; never a token, never a query string.

extension ProxyExchange {
    func log(status: UInt, reason: String) {
        // The exchange is over: what it held for its request body goes back.
        self.cancelBodyDeadline()
        self.releaseTokenBodyMemory()
        let nanoseconds = (NIODeadline.now() - self.start).nanoseconds
        self.runtime.metrics.recordRequest(
            route: self.routeIndex,
            unsafeMethod: TokenExtractor.isUnsafe(self.head.method),
            status: status,
            reason: reason,
            nanoseconds: nanoseconds,
            statusIsTheGateways: !self.machine.clientHasBackendHead
        )
        guard self.runtime.accessLog else { return }
        let path = AccessLogPath.text(for: self.head.uri)
        let latency = nanoseconds / 1000
        // Plain `.string` values: an interpolated one goes through `DefaultStringInterpolation` per member.
        var metadata: Logger.Metadata = [
            "request_id": .string(self.requestID),
            "route": .string(self.routeName),
            "method": .string(self.head.method.rawValue),
            "path": .string(path),
            "status": .string(String(status)),
            "reason": .string(reason),
            "latency_us": .string(String(latency)),
        ]
        if let client = self.traffic.client.text {
            metadata["client"] = .string(client)
        }
        if let identity = self.identity {
            metadata["user"] = .string(identity.subject)
            metadata["token_kind"] = .string(identity.kind.rawValue)
        }
        if self.upstreamHead != nil {
            metadata["upstream"] = .string(self.runtime.upstreams[self.upstreamIndex].name)
        }
        self.logger.info("request", metadata: metadata)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import NIOHTTP1
import TokengateTokens
import TokengateHTTP

// MARK: Metrics and the access log: one line per request; never a token, never a query string.

extension ProxyExchange {
    func log(status: UInt, reason: String) {
        // The exchange is over: what it held for its request body goes back.
        self.cancelBodyDeadline()
        self.releaseTokenBodyMemory()
        let nanoseconds = (NIODeadline.now() - self.start).nanoseconds
        if self.forwardAuth != nil {
            self.runtime.metrics.checks.record(route: self.routeName, status: status, reason: reason, nanoseconds: nanoseconds)
        } else {
            self.recordRequest(status: status, reason: reason, nanoseconds: nanoseconds)
        }
        guard self.runtime.accessLog else { return }
        self.logger.info("request", metadata: self.accessLogRecord(status: status, reason: reason, nanoseconds: nanoseconds).metadata)
    }

    private func recordRequest(status: UInt, reason: String, nanoseconds: Int64) {
        self.runtime.metrics.recordRequest(
            route: self.routeIndex,
            unsafeMethod: TokenExtractor.isUnsafe(self.head.method),
            status: status,
            reason: reason,
            nanoseconds: nanoseconds,
            statusIsTheGateways: !self.machine.clientHasBackendHead
        )
    }

    /// The request's access-log line (``AccessLogRecord``); `client` is the traffic policy's client address
    /// (``ClientAddress``), the same value the IP rules, the rate limits and `X-Forwarded-For` use.
    func accessLogRecord(status: UInt, reason: String, nanoseconds: Int64) -> AccessLogRecord {
        var record = AccessLogRecord(status: status, reason: reason)
        record.requestID = self.requestID
        record.client = self.traffic.client.text
        record.host = self.head.fields.first(name: "host")
        record.method = self.head.method.rawValue
        record.target = self.head.uri
        record.protocolName = AccessLogRecord.protocolName(self.head.version)
        record.route = self.routeName
        if self.forwardAuth != nil {
            record.mode = "check"
        }
        record.bytesIn = self.receivedBodyBytes
        record.bytesOut = self.sentBodyBytes
        record.durationMicroseconds = nanoseconds / 1000
        record.userAgent = self.head.fields.first(name: "user-agent")
        if let identity = self.identity {
            record.user = identity.subject
            record.tokenKind = identity.kind.rawValue
            record.issuer = identity.issuer
        }
        if self.upstreamHead != nil {
            let upstream = self.runtime.upstreams[self.upstreamIndex]
            record.upstream = upstream.name
            if let target = self.respondingTarget, target < upstream.targets.count {
                record.upstreamAddress = upstream.targets[target].display
            }
            record.upstreamMicroseconds = self.upstreamWait.map { $0 / 1000 }
        }
        return record
    }
}

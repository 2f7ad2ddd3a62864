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

// MARK: Answers written by the gateway itself.

extension ProxyExchange {
    /// Writes `answer` and finishes the exchange (or waits for the request's end, which the codec drops).
    func answer(_ answer: GatewayAnswer) {
        let ending = self.machine.answered(draining: self.client.isDraining)
        if ending.releaseConnection {
            self.closeConnection()
        }
        var answer = answer
        if ending.closeConnection {
            answer.closeConnection = true
        }
        if !self.client.closesConnectionOnAnswer {
            answer.closeConnection = false
        }
        answer.addedFields += self.traffic.responseFields  // The route's CORS fields: a page may read the refusal.
        if GatewayAnswer.isGRPC(version: self.head.version, contentType: self.head.fields.first(name: "content-type")) {
            self.client.write(.head(answer.grpcTrailersOnlyHead(version: self.head.version, hsts: self.runtime.hsts)))
            self.client.writeEnd(nil, closing: answer.closeConnection)
            self.log(status: answer.status.code, reason: answer.reasonCode)
            self.client.setRequestReadingPaused(false)
            self.client.exchangeCompleted(closeConnection: answer.closeConnection, requestEnded: ending.requestEnded)
            return
        }
        let body = answer.jsonBody
        let head = answer.responseHead(version: self.head.version, contentLength: body.utf8.count, hsts: self.runtime.hsts)
        self.client.write(.head(head))
        if answer.hasBody {
            self.client.write(.body(.byteBuffer(self.client.allocator.buffer(string: body))))
            self.sentBodyBytes = body.utf8.count
        }
        self.client.writeEnd(nil, closing: answer.closeConnection)
        self.log(status: answer.status.code, reason: answer.reasonCode)
        self.client.setRequestReadingPaused(false)
        self.client.exchangeCompleted(closeConnection: answer.closeConnection, requestEnded: ending.requestEnded)
    }
}

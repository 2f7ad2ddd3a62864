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
    /// Whether the last answer asked the connection to close.
    var answerClosed: Bool {
        self.client.closesConnectionOnAnswer && (self.closeRequested || self.client.isDraining || self.answerForcedClose)
    }

    private var answerForcedClose: Bool {
        // An answer before the request ended, with body bytes still to come, closes: the gateway will not
        // read an unbounded body it has already refused.
        !self.requestEnded && self.hasBody
    }

    /// Writes `answer` and finishes the exchange (or waits for the request's end, which the codec drops).
    func answer(_ answer: GatewayAnswer) {
        self.cancelResponseTimer()
        if case .forwarding(let connection) = self.state {
            self.release(connection, reusable: false)
        }
        var answer = answer
        if self.answerClosed {
            answer.closeConnection = true
        }
        if !self.client.closesConnectionOnAnswer {
            answer.closeConnection = false
        }
        let body = answer.jsonBody
        let head = answer.responseHead(version: self.head.version, contentLength: body.utf8.count, hsts: self.runtime.hsts)
        self.client.write(.head(head))
        self.client.write(.body(.byteBuffer(self.client.allocator.buffer(string: body))))
        self.client.writeEnd(nil, closing: answer.closeConnection)
        self.log(status: answer.status.code, reason: answer.reasonCode)
        self.client.setRequestReadingPaused(false)
        if self.requestEnded {
            self.state = .finished
            self.client.exchangeCompleted(closeConnection: answer.closeConnection, requestEnded: true)
        } else {
            self.state = .answered
            self.client.exchangeCompleted(closeConnection: answer.closeConnection, requestEnded: false)
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CoreMetrics
import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateTokens

// MARK: The token page: answered here, never forwarded.

extension ProxyExchange {
    func serveTokenPage(_ page: TokenPageRoute) {
        self.state = .answerPending
        // NIO's head, made once (a `String` per field) for the page's two steps.
        let head = self.head.nioHead
        let action = page.responder.respond(
            to: head, cutoffs: self.runtime.cutoffs.load(), now: self.runtime.now(),
            nowMilliseconds: self.runtime.nowMilliseconds())
        self.run(action, page: page) { result, now, nowMilliseconds in
            page.responder.respond(to: head, whoami: result, now: now, nowMilliseconds: nowMilliseconds)
        }
    }

    /// Does what the token page decided: writes its answer, or asks the RP who is logged in and writes what
    /// `afterWhoami` makes of the answer (the page's second step, for a `GET` or a confirmation alike).
    private func run(
        _ action: TokenPageAction,
        page: TokenPageRoute,
        afterWhoami: @escaping (TokenPageWhoamiResult, Int64, Int64) -> TokenPageAnswer
    ) {
        switch action {
        case .answer(let answer):
            self.writeTokenPage(answer)
        case .askWhoami(_, let cookies):
            guard let whoami = page.whoami else {
                self.writeTokenPage(afterWhoami(.failed, self.runtime.now(), self.runtime.nowMilliseconds()))
                return
            }
            whoami.ask(cookies: cookies, on: self.client.eventLoop, logger: self.logger).assumeIsolated().whenSuccess {
                result in
                guard case .answerPending = self.state else { return }  // The client went away meanwhile.
                let answer = afterWhoami(result, self.runtime.now(), self.runtime.nowMilliseconds())
                if let diagnostic = answer.diagnostic {
                    whoami.reportFailure("the answer cannot be used: \(diagnostic)", logger: self.logger)
                } else if case .answered = result {
                    whoami.reportAnswered(logger: self.logger)
                }
                self.writeTokenPage(answer)
            }
        }
    }

    /// `POST` to the token page with `confirm` in its query: a click on the confirmation page's "continue"
    /// (``TokenPageConfirmationRequest``). Where the form came from (`Sec-Fetch-Site`, `Origin`) and the body's
    /// type and announced length are checked first; the body, at most
    /// ``TokenPageConfirmationRequest/maximumBody`` bytes, is read like a redemption's, and at its end
    /// ``receivedEnd(_:)`` hands it to ``confirmTokenPage(_:body:)``.
    func readTokenPageConfirmation(route routeIndex: Int) {
        let length = self.head.fields.withFirstValue(name: "content-length") { FieldBytes.decimal($0) } ?? nil
        // Two `Content-Type` fields are two readings of one body: refused, not the first one taken.
        let contentType = self.head.fields.count(name: "content-type") == 1 ? TokenExtractor.contentType(self.head.fields) : nil
        if let problem = TokenPageResponder.confirmationHeadProblem(
            fetchSites: self.head.fields.values(name: "sec-fetch-site"),
            origins: self.head.fields.values(name: "origin"),
            host: self.head.fields.first(name: "host"),
            contentType: contentType,
            contentLength: length
        ) {
            self.state = .answerPending
            self.writeTokenPage(problem)
            return
        }
        let limit = TokenPageConfirmationRequest.maximumBody
        self.beginReadingBody(route: routeIndex, initial: min(length ?? 0, limit), limit: limit)
    }

    /// The confirmation's whole body arrived: the login is checked again (the RP asked again in `whoami` mode),
    /// then the value.
    func confirmTokenPage(_ page: TokenPageRoute, body: [UInt8]) {
        self.state = .answerPending
        let head = self.head.nioHead
        let action = page.responder.confirm(
            head: head, body: body, cutoffs: self.runtime.cutoffs.load(), now: self.runtime.now(),
            nowMilliseconds: self.runtime.nowMilliseconds())
        self.run(action, page: page) { result, now, nowMilliseconds in
            page.responder.confirm(head: head, body: body, whoami: result, now: now, nowMilliseconds: nowMilliseconds)
        }
    }

    /// `POST` to the token page: a PKCE code redemption. Its form body is read like a body searched for a token
    /// (the same pace, the same memory budget), but capped at ``TokenPageRedemptionRequest/maximumBody``; at its
    /// end ``receivedEnd(_:)`` hands it to the responder.
    func readTokenPageRedemption(route routeIndex: Int) {
        let length = self.head.fields.withFirstValue(name: "content-length") { FieldBytes.decimal($0) } ?? nil
        // Two `Content-Type` fields are two readings of one body: refused, not the first one taken.
        let contentType = self.head.fields.count(name: "content-type") == 1 ? TokenExtractor.contentType(self.head.fields) : nil
        if let problem = TokenPageResponder.redemptionHeadProblem(contentType: contentType, contentLength: length) {
            self.state = .answerPending
            self.writeTokenPage(problem)
            return
        }
        let limit = TokenPageRedemptionRequest.maximumBody
        let initial = min(length ?? 0, limit)
        self.beginReadingBody(route: routeIndex, initial: initial, limit: limit)
    }

    /// Starts reading a body the gateway needs whole (a token in a form or JSON body, a code redemption): takes
    /// `initial` bytes of the token-body memory for its buffer first (`503` when they are not there), then
    /// reads at the body's pace, answering an `Expect: 100-continue` now that the body is wanted.
    func beginReadingBody(route routeIndex: Int, initial: Int, limit: Int) {
        guard self.holdTokenBodyMemory(initial) else {
            self.answer(.tokenBodyMemoryFull())
            return
        }
        self.state = .readingBody(route: routeIndex, body: self.client.allocator.buffer(capacity: initial), limit: limit)
        self.startBodyDeadline()
        self.sendContinueIfExpected()
    }

    /// Writes a token page answer. Its headers and body may carry the token (`Set-Cookie`, `Location`, the
    /// page): only the reason code and the user go to the log.
    func writeTokenPage(_ answer: TokenPageAnswer) {
        var head = answer.responseHead(version: self.head.version)
        let close = self.answerClosed
        if close {
            head.headers.replaceOrAdd(name: "connection", value: "close")
        }
        if let hsts = self.runtime.hsts {
            head.headers.replaceOrAdd(name: "strict-transport-security", value: hsts)
        }
        self.client.write(.head(head))
        if !answer.body.isEmpty {
            self.client.write(.body(.byteBuffer(self.client.allocator.buffer(bytes: answer.body))))
        }
        self.client.writeEnd(nil, closing: close)
        if let user = answer.user {
            self.identity = VerifiedToken(subject: user, kind: .api, issuedAt: self.runtime.now(), keyID: nil, expiresAt: nil)
        }
        self.log(status: answer.status.code, reason: answer.reasonCode)
        self.state = self.requestEnded ? .finished : .answered
        self.client.exchangeCompleted(closeConnection: close, requestEnded: self.requestEnded)
    }
}

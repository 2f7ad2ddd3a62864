//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateHTTP
import TokengateTokens

// MARK: A front proxy's check (`forward_auth` listener): the proxied request's checks, an answer, no upstream.

extension ProxyExchange {
    /// The check request's head arrived. The original request is rebuilt from it (``ForwardAuthRequest``) and
    /// takes its place as ``head``; from there it is checked, routed and authorized as a proxied request is, by
    /// the same code, and answered by ``answerCheckPassed(identity:)`` where a proxied request would be forwarded.
    func beginCheck(_ check: ForwardAuthCheck) {
        guard check.peerTrusted else {
            self.answer(.untrustedPeer())
            return
        }
        switch ForwardAuthRequest.original(of: self.head, headers: check.headers, pathPrefix: check.pathPrefix) {
        case .refused(let answer):
            self.answer(answer)
            return
        case .request(let original):
            self.head = original
        }
        // The client as the traffic policy sees it: the front proxy, or the address its `X-Forwarded-For`
        // reports when it is one of `trusted_proxies`.
        self.resolveClientAddress()
        if let answer = self.checkLimits() {
            self.answer(answer)
            return
        }
        self.routeAndAuthorize()
    }

    /// `200` with no body and the identity fields a proxied request's backend gets, for the front proxy to copy
    /// onto the request it forwards (none on a public route: the proxy's copy then clears the client's own).
    func answerCheckPassed(identity: VerifiedToken?) {
        var headers = HTTPHeaders()
        headers.reserveCapacity(8)
        headers.add(name: "content-length", value: "0")
        headers.add(name: "cache-control", value: "no-store")
        if let identity {
            // The same fields, values and checks as ``RequestRewriter/write(_:into:)``: a subject or key id with a
            // line break or NUL byte is never written.
            guard ProxyFieldRules.isSafeFieldValue(identity.subject), identity.keyID.map(ProxyFieldRules.isSafeFieldValue) ?? true else {
                self.answer(.malformedHTTP("a header field value holds a line break or a NUL byte"))
                return
            }
            headers.add(name: "x-tokengate-user", value: identity.subject)
            headers.add(name: "x-tokengate-token-kind", value: identity.kind.rawValue)
            headers.add(name: "x-tokengate-issued-at", value: String(identity.issuedAt))
            if let keyID = identity.keyID {
                headers.add(name: "x-tokengate-key-id", value: keyID)
            }
        }
        let ending = self.machine.answered(draining: self.client.isDraining)
        let close = ending.closeConnection && self.client.closesConnectionOnAnswer
        if close {
            headers.add(name: "connection", value: "close")
        }
        self.client.write(.head(HTTPResponseHead(version: self.head.version, status: .ok, headers: headers)))
        self.client.writeEnd(nil, closing: close)
        self.log(status: 200, reason: "-")
        self.client.setRequestReadingPaused(false)
        self.client.exchangeCompleted(closeConnection: close, requestEnded: ending.requestEnded)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengateHTTP
import TokengateTokens

// MARK: The traffic policy's hooks: the client address, then the decisions before and after authorization.

extension ProxyExchange {
    /// Finds the request's client address (``ClientAddress``), first thing: every line of the access log has it.
    func resolveClientAddress() {
        let policy = self.runtime.traffic
        if policy.trustedProxies.isEmpty {
            self.traffic.client = ClientAddress(text: self.client.clientAddress, forwardedFor: self.client.clientAddress)
        } else {
            self.traffic.client = ClientAddress.resolve(
                peer: self.client.clientAddress,
                forwardedFor: self.head.fields.values(name: "x-forwarded-for"),
                trusted: policy.trustedProxies
            )
        }
    }

    /// The decisions made once the route is known, before any token is looked at, in this order: the
    /// listener's IP rules (403), the token page's guard (429), the route's IP rules (403), its rate limits by
    /// client and for the whole route (429), a CORS preflight (answered here), and the failed-token guard of a
    /// route that takes tokens (429). `nil` lets the request go on to authorization.
    func admitByTrafficPolicy(route routeIndex: Int) -> GatewayAnswer? {
        let policy = self.runtime.traffic
        if !policy.listenersAreOpen, self.client.listenerIndex < policy.listeners.count {
            let rules = policy.listeners[self.client.listenerIndex]
            if !rules.isEmpty, !rules.permits(self.traffic.clientBytes()) {
                return .addressRefused()
            }
        }
        let isTokenPage = self.runtime.routes[routeIndex].tokenPage != nil
        if isTokenPage, let limiter = policy.tokenPage, let wait = limiter.take(self.traffic.clientKey()) {
            return .tooManyRequests(retryAfter: wait, reason: "rate_limit_token_page")
        }
        guard routeIndex < policy.routes.count else { return nil }
        let route = policy.routes[routeIndex]
        if !route.isEmpty {
            if !route.ipRules.isEmpty, !route.ipRules.permits(self.traffic.clientBytes()) {
                return .addressRefused()
            }
            let cors = route.cors
            // Set before the limits, so that a page may read its 429 too.
            if let cors {
                self.traffic.responseFields = cors.responseFields(for: self.head.fields)
            }
            for keyed in route.requestLimits {
                let key: BucketKey
                switch keyed.key {
                case .client: key = self.traffic.clientKey()
                case .route: key = .route
                case .user: continue  // After authorization (``admitVerifiedUser(_:route:)``).
                }
                if let wait = keyed.limiter.take(key) {
                    return .tooManyRequests(retryAfter: wait, reason: "rate_limit_\(keyed.key.rawValue)")
                }
            }
            if let cors, self.head.method == .OPTIONS {
                let fields = self.head.fields
                switch cors.preflight(
                    origins: fields.values(name: "origin"),
                    requestMethod: fields.values(name: "access-control-request-method"),
                    requestHeaders: fields.values(name: "access-control-request-headers")
                ) {
                case .notPreflight:
                    break
                case .allowed(let answerFields):
                    self.traffic.responseFields = []  // The preflight's own fields say it all.
                    return .corsPreflight(answerFields)
                case .refused:
                    self.traffic.responseFields = []
                    return .corsRefused()
                }
            }
        }
        if !isTokenPage, self.runtime.routes[routeIndex].tokens != nil, let limiter = policy.failedTokens,
            case let key = self.traffic.clientKey(), key.isAddress, let wait = limiter.check(key)
        {
            return .tooManyRequests(retryAfter: wait, reason: "rate_limit_failed_tokens")
        }
        return nil
    }

    /// After authorization refused the request: a token that failed its check spends from the client's
    /// failed-token bucket (a missing token does not: that is a browser's first visit, not a guess).
    func noteAuthorizationRefusal(_ answer: GatewayAnswer) {
        guard answer.error == "invalid_token", let limiter = self.runtime.traffic.failedTokens,
            case let key = self.traffic.clientKey(), key.isAddress
        else { return }
        limiter.spend(key)
    }

    /// After authorization let the request through as `identity`: the route's per-user limit.
    func admitVerifiedUser(_ identity: VerifiedToken?, route routeIndex: Int) -> GatewayAnswer? {
        let policy = self.runtime.traffic
        guard let identity, routeIndex < policy.routes.count else { return nil }
        for keyed in policy.routes[routeIndex].userLimits {
            if let wait = keyed.limiter.take(BucketKey(user: identity.subject)) {
                return .tooManyRequests(retryAfter: wait, reason: "rate_limit_user")
            }
        }
        return nil
    }
}

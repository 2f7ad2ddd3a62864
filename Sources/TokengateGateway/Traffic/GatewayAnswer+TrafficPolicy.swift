//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateHTTP

// MARK: The traffic policy's answers.

extension GatewayAnswer {
    /// 403: the client address is not allowed on this listener or route (`ip_rules`).
    static func addressRefused() -> Self {
        GatewayAnswer(
            status: .forbidden,
            error: "forbidden",
            description: "requests from this address are not accepted here",
            reasonCode: "ip_denied"
        )
    }

    /// 403: a CORS preflight from an origin, or for a method or header, the route's policy does not allow.
    static func corsRefused() -> Self {
        GatewayAnswer(
            status: .forbidden,
            error: "cors_refused",
            description: "this cross-origin request is not allowed by the route's CORS policy",
            reasonCode: "cors_refused"
        )
    }

    /// 204: a CORS preflight the route's policy allows, with its fields.
    static func corsPreflight(_ fields: [ResponseField]) -> Self {
        var answer = GatewayAnswer(status: .noContent, error: "", description: "", reasonCode: "cors_preflight")
        answer.addedFields = fields
        return answer
    }

    /// 429 with `Retry-After`: a rate limit's bucket is empty. `reason` names the limit (`rate_limit_client`, …).
    static func tooManyRequests(retryAfter seconds: Int, reason: String) -> Self {
        var answer = GatewayAnswer(
            status: .tooManyRequests,
            error: "rate_limited",
            description: "too many requests; retry after the time in Retry-After",
            reasonCode: reason
        )
        answer.addedFields = [ResponseField("retry-after", String(seconds))]
        return answer
    }
}

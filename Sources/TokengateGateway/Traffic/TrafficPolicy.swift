//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig
import TokengateHTTP

/// What the configuration says about who may send what, how often: the trusted proxies the client address
/// is found behind (``ClientAddress``), the listeners' and routes' IP rules, the routes' CORS policies and
/// rate limits, and the gateway-wide brute-force guards. Built with each configuration generation; a reload
/// starts every bucket afresh.
///
/// The decisions are made where the route is matched, before any token is looked at
/// (``ProxyExchange/admitByTrafficPolicy(route:)``), and end in the exchange's ordinary answer path.
final class TrafficPolicy: Sendable {
    /// A class: the request path reads it through one reference rather than copying its lists.
    final class Route: Sendable {
        let ipRules: IPRules
        let cors: CORSPolicy?
        let limits: [KeyedLimiter]
        /// The limits by client or for the whole route (taken before authorization), and those by user (after
        /// it): split once here, so neither pass walks the other's.
        let requestLimits: [KeyedLimiter]
        let userLimits: [KeyedLimiter]
        /// The route has nothing to check: the common route pays one branch.
        let isEmpty: Bool

        init(ipRules: IPRules, cors: CORSPolicy?, limits: [KeyedLimiter]) {
            self.ipRules = ipRules
            self.cors = cors
            self.limits = limits
            self.requestLimits = limits.filter { $0.key != .user }
            self.userLimits = limits.filter { $0.key == .user }
            self.isEmpty = ipRules.isEmpty && cors == nil && limits.isEmpty
        }
    }

    struct KeyedLimiter: Sendable {
        let key: RateLimit.Key
        let limiter: RateLimiter
    }

    let trustedProxies: [CIDR]
    /// By listener index.
    let listeners: [IPRules]
    /// By route index.
    let routes: [Route]
    /// `rate_limits.failed_tokens`, per client address.
    let failedTokens: RateLimiter?
    /// `rate_limits.token_page`, per client address.
    let tokenPage: RateLimiter?
    /// No listener has IP rules: the listener index is never looked at.
    let listenersAreOpen: Bool

    init(
        trustedProxies: [CIDR] = [],
        listeners: [IPRules] = [],
        routes: [Route] = [],
        failedTokens: RateLimiter? = nil,
        tokenPage: RateLimiter? = nil
    ) {
        self.trustedProxies = trustedProxies
        self.listeners = listeners
        self.routes = routes
        self.failedTokens = failedTokens
        self.tokenPage = tokenPage
        self.listenersAreOpen = listeners.allSatisfy(\.isEmpty)
    }

    /// - Parameter evicted: counts the buckets dropped to keep within `rate_limits.max_keys`.
    convenience init(_ configuration: GatewayConfiguration, evicted: @escaping @Sendable (Int) -> Void = { _ in }) {
        let settings = configuration.rateLimits
        func limiter(_ limit: RateLimit) -> RateLimiter {
            RateLimiter(perSecond: limit.perSecond, burst: limit.burst, maxKeys: settings.maxKeys, evicted: evicted)
        }
        self.init(
            trustedProxies: configuration.trustedProxies,
            listeners: configuration.listeners.map(\.ipRules),
            routes: configuration.routes.map { route in
                Route(
                    ipRules: route.ipRules,
                    cors: route.cors.map(CORSPolicy.init),
                    limits: route.rateLimits.map { KeyedLimiter(key: $0.key, limiter: limiter($0)) }
                )
            },
            failedTokens: settings.failedTokens.map(limiter),
            tokenPage: settings.tokenPage.map(limiter)
        )
    }

    /// The origins whose cookie tokens count on unsafe methods on a route (its CORS policy's, with
    /// credentials): the cross-site cookie rule's one exception.
    static func credentialedOrigins(_ route: RouteConfiguration) -> Set<String> {
        guard let cors = route.cors, cors.credentials else { return [] }
        return Set(cors.origins.filter { $0 != "*" })
    }
}

/// What one exchange keeps of the traffic policy: its client address, and the fields its response gets.
struct ExchangeTraffic {
    var client = ClientAddress(text: nil, forwardedFor: nil)
    /// The route's CORS fields for this request's origin, added to the backend's response and to the
    /// gateway's answers alike. Empty (no allocation) on a route without CORS.
    var responseFields: [ResponseField] = []
    /// The client address's bytes and bucket key, read once when a rule or a bucket first needs them.
    private var bytesRead = false
    private var cachedBytes: [UInt8]?
    private var cachedKey: BucketKey?

    init() {}

    mutating func clientBytes() -> [UInt8]? {
        if !self.bytesRead {
            self.cachedBytes = self.client.bytes
            self.bytesRead = true
        }
        return self.cachedBytes
    }

    /// The client's bucket key (``BucketKey/init(client:)``): without an address, the one shared key.
    mutating func clientKey() -> BucketKey {
        if let key = self.cachedKey { return key }
        let key = BucketKey(client: self.clientBytes())
        self.cachedKey = key
        return key
    }
}

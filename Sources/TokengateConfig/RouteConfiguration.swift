//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// One route: a host and path-prefix match, and what happens to requests that match.
public struct RouteConfiguration: Sendable, Equatable {
    /// Lower-cased host name without port; `nil` matches any host.
    public var host: String?
    /// Starts with `/`. Matching is a plain byte-prefix match on the request path (without query).
    public var pathPrefix: String
    public var kind: RouteKind
    /// The upstream's name for proxy routes; `nil` for token-page routes.
    public var upstream: String?
    public var accept: AcceptPolicy
    /// Where to look for a JWT, in order. Empty when ``accept`` is `.none`, on a token page, and on a route that
    /// reads only a site's login cookie (``sessionCookie``).
    public var sources: [TokenSource]
    public var forwardToken: ForwardTokenMode
    /// Overrides `limits.max_body_bytes` for this route.
    public var bodyLimit: Int?
    /// Narrows `tokens.algorithms` for this route.
    public var algorithms: [TokenAlgorithm]?
    /// Claims this route requires to be present (and then checked), on top of those checked when present.
    public var requiredClaims: [RequiredClaim]
    /// The site whose own login cookie this route also accepts, and where it is read (after ``sources``).
    public var sessionCookie: RouteSessionCookie?
    /// Overrides `limits.response_min_rate` for this route (0 turns the check off here: a route serving
    /// clients known to read slowly).
    public var responseMinRate: Int?
    /// Which client addresses may use the route (`ip_rules`), on top of the listener's.
    public var ipRules = IPRules()
    /// The route's cross-origin policy (`cors`); `nil` answers no preflight and adds no CORS header.
    public var cors: CORSConfiguration?
    /// The route's token buckets (`rate_limits`), each spent by every request that gets past the IP rules.
    public var rateLimits: [RateLimit] = []
    /// Scopes a token must grant on this route (`require_scopes`), in the order written: a token without one
    /// of them gets a 403 `insufficient_scope` naming them all.
    public var requiredScopes: [String]
    /// Claims handed to the backend as request headers (`forward_claims`), in the order written.
    public var forwardClaims: [ForwardedClaim]
    /// WebSocket upgrades this route accepts (`websocket`); `nil`: none.
    public var webSocket: WebSocketRouteConfiguration?
    /// The JWT issuers whose tokens this route accepts (`issuers`), by name; nil: ``defaultIssuers(topLevelKeys:jwtIssuers:)``.
    public var issuers: [String]?

    public init(
        host: String? = nil,
        pathPrefix: String,
        kind: RouteKind = .proxy,
        upstream: String?,
        accept: AcceptPolicy,
        sources: [TokenSource] = [.authorization],
        forwardToken: ForwardTokenMode = .strip,
        bodyLimit: Int? = nil,
        algorithms: [TokenAlgorithm]? = nil,
        requiredClaims: [RequiredClaim] = [],
        sessionCookie: RouteSessionCookie? = nil,
        responseMinRate: Int? = nil,
        requiredScopes: [String] = [],
        forwardClaims: [ForwardedClaim] = [],
        webSocket: WebSocketRouteConfiguration? = nil,
        issuers: [String]? = nil
    ) {
        self.host = host
        self.pathPrefix = pathPrefix
        self.kind = kind
        self.upstream = upstream
        self.accept = accept
        self.sources = sources
        self.forwardToken = forwardToken
        self.bodyLimit = bodyLimit
        self.algorithms = algorithms
        self.requiredClaims = requiredClaims
        self.sessionCookie = sessionCookie
        self.responseMinRate = responseMinRate
        self.requiredScopes = requiredScopes
        self.forwardClaims = forwardClaims
        self.webSocket = webSocket
        self.issuers = issuers
    }
}

/// One entry of a route's `forward_claims`: a payload claim and the request header its value goes in.
public struct ForwardedClaim: Sendable, Hashable {
    public var claim: String
    /// As written; the gateway sends it lower-cased, and removes the client's fields of this name.
    public var header: String

    public init(claim: String, header: String) {
        self.claim = claim
        self.header = header
    }
}

extension RouteConfiguration {
    /// The issuers a route accepts, by name: its own `issuers`, else the issuer of the top-level keys when there
    /// are any (a gateway's routes keep accepting what they accepted before an `issuers:` item was added), else
    /// every JWT issuer.
    public func acceptedIssuers(topLevelKeys: Bool, jwtIssuers: [String: JWTIssuerConfiguration]) -> [String] {
        if let issuers = self.issuers { return issuers }
        return topLevelKeys ? [JWTIssuerConfiguration.topLevelName] : jwtIssuers.keys.sorted()
    }

    /// Every place the route looks for a token: the JWT sources, then the session cookie's.
    public var allSources: [TokenSource] {
        self.sources + (self.sessionCookie?.sources ?? [])
    }

    /// The token page settings, when this is a `token_page` route.
    public var tokenPage: TokenPageConfiguration? {
        switch self.kind {
        case .proxy: nil
        case .tokenPage(let page): page
        }
    }
}

/// What a route does with a matching request.
public enum RouteKind: Sendable, Equatable {
    /// Check the token per the route's policy and forward to the upstream.
    case proxy
    /// Mint an api token for a logged-in user and hand it over (DESIGN §8). Never forwards.
    case tokenPage(TokenPageConfiguration)
}

/// Which kinds of token a route accepts. `.none` makes a public route: no token is looked for or required.
public struct AcceptPolicy: Sendable, Hashable, CustomStringConvertible {
    public var api: Bool
    public var session: Bool

    public init(api: Bool, session: Bool) {
        self.api = api
        self.session = session
    }

    public static let none = AcceptPolicy(api: false, session: false)
    public static let apiOnly = AcceptPolicy(api: true, session: false)
    public static let sessionOnly = AcceptPolicy(api: false, session: true)
    public static let apiAndSession = AcceptPolicy(api: true, session: true)

    /// Whether the route needs a token at all.
    public var acceptsTokens: Bool { self.api || self.session }

    public var description: String {
        switch (self.api, self.session) {
        case (false, false): "none"
        case (true, false): "[api]"
        case (false, true): "[session]"
        case (true, true): "[api, session]"
        }
    }
}

/// Where a token may be found (DESIGN §2).
public enum TokenSource: Hashable, Sendable, CustomStringConvertible {
    /// `Authorization: Bearer` (RFC 6750 §2.1).
    case authorization
    /// A named request header (name as written; compare case-insensitively).
    case header(String)
    /// A named cookie (case-sensitive, as cookies are).
    case cookie(String)
    /// A field of an `application/x-www-form-urlencoded` body (RFC 6750 §2.2).
    case form(String)
    /// A top-level string field of a JSON body.
    case json(String)

    /// Whether the gateway must read the body to find this token.
    public var isInBody: Bool {
        switch self {
        case .authorization, .header, .cookie: false
        case .form, .json: true
        }
    }

    public var description: String {
        switch self {
        case .authorization: "authorization"
        case .header(let name): "header:\(name)"
        case .cookie(let name): "cookie:\(name)"
        case .form(let field): "form:\(field)"
        case .json(let field): "json:\(field)"
        }
    }
}

/// Whether the token is removed before forwarding (header, cookie or body field). Default strip.
public enum ForwardTokenMode: String, Sendable, Equatable, CaseIterable {
    case strip
    case keep
}

/// A claim a route can require to be present.
public enum RequiredClaim: String, Sendable, Hashable, CaseIterable {
    case exp
    case nbf
    case iss
    case aud
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig
import TokengateTokens
import TokengateHTTP

/// A route as the request path uses it: the configured route with everything derived once at load
/// (the accepted kinds, the extractor, the upstream's index) so nothing is recomputed per request.
struct GatewayRoute: Sendable {
    /// A stable name for logs and metrics: the host (if any) and the path prefix.
    let name: String
    /// How the route checks tokens, or `nil` for a public route that takes no token.
    let tokens: RouteTokenCheck?
    let extractor: TokenExtractor
    /// Index into ``GatewayRuntime/upstreams``.
    let upstreamIndex: Int
    /// Strip the token before forwarding (`forward_token: strip`, the default).
    let stripToken: Bool
    /// Cookies never forwarded on this route, whatever the token: the token pages' delivery cookies
    /// (``GatewayRuntime/withheldCookies(_:route:)``). Empty when no token page is configured.
    let withheldCookies: [String]
    /// The most body bytes read to look for a token in a form or JSON body.
    let tokenBodyLimit: Int
    /// The most body bytes forwarded (`body_limit`, else `limits.max_body_bytes`); past it, 413 or an abort.
    let bodyLimit: Int
    /// Bytes per second a client must take while its response waits for it (`response_min_rate`, else the
    /// limit's); 0: no minimum.
    let responseMinRate: Int
    /// Set on a `token_page` route: the gateway answers it itself and never forwards.
    let tokenPage: TokenPageRoute?
}

/// What a route that takes tokens accepts: the kinds, and a verifier whose policy is the gateway's narrowed
/// by the route (`algorithms`, `require_claims`). A route without its own narrowing shares the gateway's
/// verifier; the key set is shared by all of them either way.
struct RouteTokenCheck: Sendable {
    let accept: AcceptedKinds
    let verifier: TokenVerifier
}

/// A `token_page` route's responder and, in whoami mode, the client for its login subrequest.
struct TokenPageRoute: Sendable {
    let responder: TokenPageResponder
    let whoami: WhoamiClient?
}

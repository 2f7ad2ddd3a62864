//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig
import TokengateHTTP
import TokengateSessionCookies
import TokengateTokens

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
    /// `forward_claims`' headers, lower-cased, in the order of the route verifier's
    /// ``VerificationPolicy/forwardedClaims`` (so of ``VerifiedToken/forwardedClaims``): written from the token,
    /// and the client's own fields of these names removed. Empty on nearly every route.
    var forwardedClaimHeaders: [String] = []
    /// The route's WebSocket tunnels (``WebSocketTunnel``); `nil`: upgrades are not carried.
    var webSocket: WebSocketRouteConfiguration? = nil
}

/// What a route that takes tokens accepts: the kinds, and a verifier whose policy is the gateway's narrowed
/// by the route (`algorithms`, `require_claims`). A route without its own narrowing shares the gateway's
/// verifier; the key set is shared by all of them either way.
struct RouteTokenCheck: Sendable {
    let accept: AcceptedKinds
    /// The JWT verifier. `nil` on a route that reads only a site's login cookie (no JWT source), and while no
    /// key is usable: every key entry is fetched and none has keys yet (or any more) — then ``remoteKeys`` is set.
    let verifier: TokenVerifier?
    /// The site's login cookie the route also accepts (`session_cookie:`), or nil.
    let sessionCookie: RouteSessionCookieCheck?
    /// The fetched key sets behind `verifier`, when some key entries are fetched.
    let remoteKeys: RemoteKeyRefetch?
    /// `require_scopes`, space-separated, for the `scope="…"` attribute of a 403 (RFC 6750 §3); nil without.
    let requiredScopes: String?
    /// Set on a gateway with `kind: jwt` issuers: the token's `iss` picks the verifier (``RouteIssuers``), and
    /// ``verifier`` and ``remoteKeys`` are unused. Nil on a gateway with one issuer, whose routes verify as
    /// they always have.
    let issuers: RouteIssuers?

    init(
        accept: AcceptedKinds,
        verifier: TokenVerifier?,
        sessionCookie: RouteSessionCookieCheck? = nil,
        remoteKeys: RemoteKeyRefetch? = nil,
        requiredScopes: String? = nil,
        issuers: RouteIssuers? = nil
    ) {
        self.accept = accept
        self.verifier = verifier
        self.sessionCookie = sessionCookie
        self.remoteKeys = remoteKeys
        self.requiredScopes = requiredScopes
        self.issuers = issuers
    }
}

/// A route's `session_cookie:` as the request path uses it: where the cookie is read, and the issuer's verifier,
/// its keys derived once at load and shared by every route that names the issuer.
struct RouteSessionCookieCheck: Sendable {
    let sources: [TokenSource]
    let verifier: SessionCookieVerifier
    /// cookie-session's `NAME.sig`, read from the `Cookie` header next to the value; nil for the other formats.
    let signatureCookie: String?
}

/// What a token whose `kid` no key has tells the fetched key sets: fetch now (each at most once per its
/// `refetch_interval`). The answer is `503` (try again) when the key may be in a set that is being fetched or
/// has no keys at the moment, `401` when the sets are current and the key is not in them.
struct RemoteKeyRefetch: Sendable {
    let sources: [RemoteKeySource]
    /// Some fetched entry had no keys when the generation was built.
    let someUnavailable: Bool

    func unknownKeyID(nowMilliseconds: Int64) -> Bool {
        var retry = self.someUnavailable
        for source in self.sources where source.refetchForUnknownKey(nowMilliseconds: nowMilliseconds) {
            retry = true
        }
        return retry
    }
}

/// A `token_page` route's responder and, in whoami mode, the client for its login subrequest.
struct TokenPageRoute: Sendable {
    let responder: TokenPageResponder
    let whoami: WhoamiClient?
    /// Where the device records of minted tokens are stored; nil when the cutoff store keeps none.
    var devices: DeviceRegistry? = nil
}

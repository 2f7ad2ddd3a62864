//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A `forward_auth:` listener: the check endpoint a front proxy (nginx `auth_request`, Caddy `forward_auth`,
/// Traefik ForwardAuth, Envoy `ext_authz`) asks about each request before it proxies the request itself.
///
/// The listener never forwards: it answers `200` with the identity headers, or the same `400`/`401`/`403` a
/// proxied request would get. It believes the forwarded method, target, host and scheme only from
/// ``trustedPeers``.
public struct ForwardAuthConfiguration: Sendable, Equatable {
    /// Which header shape the front proxy sends. One per listener, never guessed per request: a proxy passes
    /// the client's own headers on to the check, so a gateway that read whichever of `X-Original-URI` and
    /// `X-Forwarded-Uri` it found would let the client name the path that is checked.
    public var headers: ForwardAuthHeaders
    /// Peers (the front proxies) whose checks are answered; every other peer gets `403 untrusted_peer`.
    public var trustedPeers: [CIDR]
    /// `headers: envoy`: the prefix Envoy's `ext_authz` puts before the original path (`path_prefix` of its
    /// `http_service`). Empty for none. Not accepted with the other shapes.
    public var pathPrefix: String
    /// TLS on the check listener; required unless it listens on loopback.
    public var tls: TLSListenerConfiguration?

    public init(headers: ForwardAuthHeaders, trustedPeers: [CIDR], pathPrefix: String = "", tls: TLSListenerConfiguration? = nil) {
        self.headers = headers
        self.trustedPeers = trustedPeers
        self.pathPrefix = pathPrefix
        self.tls = tls
    }
}

/// `listen[].forward_auth.headers`: where the check request carries the original request's method, target,
/// host and scheme.
public enum ForwardAuthHeaders: String, Sendable, Equatable, CaseIterable {
    /// nginx `auth_request`: `X-Original-Method`, `X-Original-URI` and `X-Forwarded-Proto` as the `location`
    /// sets them with `proxy_set_header`, and the original `Host` (`proxy_set_header Host $host`).
    case nginx
    /// Caddy `forward_auth` and Traefik ForwardAuth: `X-Forwarded-Method`, `X-Forwarded-Uri`,
    /// `X-Forwarded-Host` and `X-Forwarded-Proto`.
    case forwarded
    /// Envoy `ext_authz` over HTTP: the check request is the original's method and path (after `path_prefix`)
    /// with its `Host`, and `X-Forwarded-Proto`.
    case envoy
}

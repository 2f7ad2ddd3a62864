//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A route's `websocket:` block: the route accepts WebSocket upgrades (RFC 6455) and carries each as a tunnel
/// to its backend. A route without it never tunnels: the gateway drops `Upgrade` and the backend sees a plain
/// request, and a backend's `101` there is a 502.
///
/// The limits bound what one tunnel may hold: a connection that moves no byte either way for `idle_timeout`
/// is closed, and every tunnel ends after `max_lifetime`, so a revoked or expired credential cannot ride an old
/// tunnel for ever even where no revocation reaches the gateway.
public struct WebSocketRouteConfiguration: Sendable, Hashable {
    /// Origins (`https://app.example`, lower-cased) a browser page may open the tunnel from when the token is a
    /// cookie. A cookie rides along with any site's page, so without this check any site the user visits could
    /// open a tunnel in their name (cross-site WebSocket hijacking). A token in a header or the query is not
    /// sent by the browser on its own and needs no origin.
    public var allowedOrigins: [String]
    public var idleTimeout: Duration
    public var maxLifetime: Duration
    /// The most tunnels open at once through one worker thread of the gateway for this route.
    public var maxTunnels: Int

    public static let defaultIdleTimeout = Duration.seconds(300)
    public static let defaultMaxLifetime = Duration.seconds(86_400)
    public static let defaultMaxTunnels = 10_000

    public init(
        allowedOrigins: [String] = [],
        idleTimeout: Duration = Self.defaultIdleTimeout,
        maxLifetime: Duration = Self.defaultMaxLifetime,
        maxTunnels: Int = Self.defaultMaxTunnels
    ) {
        self.allowedOrigins = allowedOrigins
        self.idleTimeout = idleTimeout
        self.maxLifetime = maxLifetime
        self.maxTunnels = maxTunnels
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateConfig
import TokengateTLS
import TokengateHTTP

/// One upstream as the forwarding code uses it: its backends and its timeouts, with the TLS client
/// context built once at load for `https://` targets.
struct UpstreamSettings: Sendable {
    struct Target: Sendable, Hashable {
        var host: String
        var port: Int
        var useTLS: Bool
        /// `scheme://host:port`, for logs (an upstream address is not a secret).
        var display: String
    }

    var name: String
    var targets: [Target]
    var connectTimeout: TimeAmount
    var responseTimeout: TimeAmount
    var idleTimeout: TimeAmount
    /// The most connections one event loop keeps open to one target; past it, other targets are tried,
    /// then the request gets 503. Sized for the concurrency a loop serves, not a small constant.
    var maxConnectionsPerTarget: Int
    /// Extra connection attempts a request gets after connect failures (`retries`). Any method: a failed
    /// connect sent nothing of the request.
    var retries: Int
    /// Connect failures in a row, on one event loop, after which a target is skipped
    /// (`ejection.consecutive_failures`).
    var failuresBeforeEjection: Int
    /// How long a target is skipped once ejected (`ejection.duration`).
    var ejectionTime: TimeAmount
    var tlsContext: TLSClientContext?
    /// `upstreams.*.tls.server_name`: the name sent as SNI and verified in the backend's certificate instead
    /// of each target's host (for backends addressed by IP, or behind a name their address does not carry).
    /// `nil`: the target's host.
    var tlsServerName: String? = nil
    /// `upstreams.*.keep_alive`: false sends every request on a connection of its own, with `Connection: close`,
    /// and never pools one (``UpstreamPool/release(_:reusable:)``): for a backend not trusted to frame its
    /// responses, whose late bytes could otherwise become the next user's response.
    var keepAlive = true
    /// `upstreams.*.secret_header`, its value read from its file when this runtime was built.
    var secretHeader: UpstreamSecretHeader? = nil
    /// `upstreams.*.health_check`; `nil`: targets are only ejected passively.
    var healthCheck: HealthCheckConfiguration? = nil
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A named set of backend addresses with its pool and timeout settings.
public struct UpstreamConfiguration: Sendable, Equatable {
    public var name: String
    /// At least one; all with the same scheme.
    public var targets: [UpstreamTarget]
    /// Default 2s.
    public var connectTimeout: Duration
    /// Time to the response head. Default 30s.
    public var responseTimeout: Duration
    /// An idle pooled connection is closed after this. Default 60s.
    public var idleTimeout: Duration
    /// Per event loop (each loop has its own pool). Default 512: sized for concurrency, not a small constant.
    public var maxConnectionsPerTarget: Int
    /// Extra attempts after a connect failure, for any method (a connection never made carried nothing of the
    /// request). Default 1.
    public var retries: Int
    /// Passive ejection of failing targets.
    public var ejection: EjectionConfiguration
    /// Present exactly when the targets are `https://` (defaults: system trust store, verification on).
    public var tls: UpstreamTLSConfiguration?
    /// `keep_alive`: connections serve request after request (pooled). False: one request per connection, sent
    /// with `Connection: close`, for backends not trusted to frame their responses. Default true.
    public var keepAlive: Bool

    public init(
        name: String,
        targets: [UpstreamTarget],
        connectTimeout: Duration = .seconds(2),
        responseTimeout: Duration = .seconds(30),
        idleTimeout: Duration = .seconds(60),
        maxConnectionsPerTarget: Int = 512,
        retries: Int = 1,
        ejection: EjectionConfiguration = EjectionConfiguration(),
        tls: UpstreamTLSConfiguration? = nil,
        keepAlive: Bool = true
    ) {
        self.name = name
        self.targets = targets
        self.connectTimeout = connectTimeout
        self.responseTimeout = responseTimeout
        self.idleTimeout = idleTimeout
        self.maxConnectionsPerTarget = maxConnectionsPerTarget
        self.retries = retries
        self.ejection = ejection
        self.tls = tls
        self.keepAlive = keepAlive
    }
}

/// One backend address: `http://host:port` or `https://host:port`, no path, no credentials.
public struct UpstreamTarget: Sendable, Hashable, CustomStringConvertible {
    public var scheme: UpstreamScheme
    /// A host name (lower-cased), an IPv4 address, or an IPv6 address without brackets.
    public var host: String
    public var port: Int

    public init(scheme: UpstreamScheme, host: String, port: Int) {
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    public var description: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "\(self.scheme.rawValue)://\(host):\(self.port)"
    }
}

public enum UpstreamScheme: String, Sendable, Hashable, CaseIterable {
    case http
    case https

    public var defaultPort: Int {
        switch self {
        case .http: 80
        case .https: 443
        }
    }
}

/// Client-side TLS towards `https://` targets.
public struct UpstreamTLSConfiguration: Sendable, Equatable {
    /// PEM bundle of trusted CAs; `nil` means the system trust store.
    public var caFile: ConfigPath?
    /// Certificate and host name verification. Default true; turning it off must be explicit.
    public var verify: Bool
    /// SNI and verification name when it differs from the target host.
    public var serverName: String?

    public init(caFile: ConfigPath? = nil, verify: Bool = true, serverName: String? = nil) {
        self.caFile = caFile
        self.verify = verify
        self.serverName = serverName
    }
}

/// Passive ejection: after `consecutiveFailures` connect failures in a row (counted per event loop, reset by a
/// successful connect) a target is skipped for `duration`.
public struct EjectionConfiguration: Sendable, Equatable {
    public var consecutiveFailures: Int
    public var duration: Duration

    public init(consecutiveFailures: Int = 5, duration: Duration = .seconds(30)) {
        self.consecutiveFailures = consecutiveFailures
        self.duration = duration
    }
}

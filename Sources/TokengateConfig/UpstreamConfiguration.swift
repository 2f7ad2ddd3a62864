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
    /// `secret_header`: a header with a secret the backend checks, so that it can tell the gateway's requests
    /// from anyone else's. `nil`: none.
    public var secretHeader: SecretHeaderConfiguration?
    /// `health_check`: active checks of every target. `nil`: only passive ejection.
    public var healthCheck: HealthCheckConfiguration?

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
        keepAlive: Bool = true,
        secretHeader: SecretHeaderConfiguration? = nil,
        healthCheck: HealthCheckConfiguration? = nil
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
        self.secretHeader = secretHeader
        self.healthCheck = healthCheck
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
    /// `client_certificate`: the certificate chain and key the gateway presents to backends that ask for one
    /// (mutual TLS). Read at start and on every reload, like the listeners' certificates.
    public var clientCertificate: CertificateConfiguration?

    public init(
        caFile: ConfigPath? = nil, verify: Bool = true, serverName: String? = nil,
        clientCertificate: CertificateConfiguration? = nil
    ) {
        self.caFile = caFile
        self.verify = verify
        self.serverName = serverName
        self.clientCertificate = clientCertificate
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

/// `upstreams.*.secret_header`: a field the gateway adds to every request to the upstream (and to its health
/// checks), whose value is read from `valueFile` at start and on every reload. Only the file's path is part of
/// the configuration: the value is never in it, in `check-config`'s output or in a log line.
public struct SecretHeaderConfiguration: Sendable, Equatable {
    /// The field name as configured (sent lower-cased over HTTP/1.1 it is the same field).
    public var name: String
    public var valueFile: ConfigPath

    public init(name: String, valueFile: ConfigPath) {
        self.name = name
        self.valueFile = valueFile
    }
}

/// `upstreams.*.health_check`: every target is asked `GET path` every `interval`, on a connection of its own;
/// `unhealthyThreshold` failed checks in a row take it out of the rotation, `healthyThreshold` passed checks in a
/// row bring it back.
public struct HealthCheckConfiguration: Sendable, Equatable {
    /// An origin-form request target (`/healthz`, `/status?full=0`).
    public var path: String
    public var interval: Duration
    /// For the whole check: connect, TLS handshake, and the response head. At most `interval`.
    public var timeout: Duration
    /// The statuses that pass, as ranges (`200`, `200-399`).
    public var expectedStatus: [ClosedRange<Int>]
    public var healthyThreshold: Int
    public var unhealthyThreshold: Int

    public init(
        path: String,
        interval: Duration = .seconds(5),
        timeout: Duration = .seconds(2),
        expectedStatus: [ClosedRange<Int>] = [200...399],
        healthyThreshold: Int = 2,
        unhealthyThreshold: Int = 3
    ) {
        self.path = path
        self.interval = interval
        self.timeout = timeout
        self.expectedStatus = expectedStatus
        self.healthyThreshold = healthyThreshold
        self.unhealthyThreshold = unhealthyThreshold
    }

    /// Whether a check answered with `status` passes.
    public func accepts(status: Int) -> Bool {
        self.expectedStatus.contains { $0.contains(status) }
    }
}

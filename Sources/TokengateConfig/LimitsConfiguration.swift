//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Limits on every input (sizes in bytes).
public struct LimitsConfiguration: Sendable, Equatable {
    /// Request line plus headers; over it: 431. Default 16 KiB.
    public var maxHeaderBytes: Int
    /// Over it: 414. Default 8 KiB.
    public var maxURIBytes: Int
    /// Request body forwarded, unless a route's `body_limit` says otherwise; over it: 413. Default 10 MiB.
    public var maxBodyBytes: Int
    /// How much body is buffered to find a form or JSON token. Default 64 KiB.
    public var maxTokenBodyBytes: Int
    /// Open client connections across all listeners. Default 10000.
    public var maxConnections: Int
    /// An idle client connection is closed after this. Default 60s.
    public var idleTimeout: Duration
    /// Time allowed for a request head to arrive. Default 10s.
    public var requestHeaderTimeout: Duration
    /// Graceful shutdown waits this long for in-flight requests. Default 30s.
    public var drainTimeout: Duration

    public init(
        maxHeaderBytes: Int = 16 * 1024,
        maxURIBytes: Int = 8 * 1024,
        maxBodyBytes: Int = 10 * 1024 * 1024,
        maxTokenBodyBytes: Int = 64 * 1024,
        maxConnections: Int = 10_000,
        idleTimeout: Duration = .seconds(60),
        requestHeaderTimeout: Duration = .seconds(10),
        drainTimeout: Duration = .seconds(30)
    ) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxURIBytes = maxURIBytes
        self.maxBodyBytes = maxBodyBytes
        self.maxTokenBodyBytes = maxTokenBodyBytes
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
        self.requestHeaderTimeout = requestHeaderTimeout
        self.drainTimeout = drainTimeout
    }
}

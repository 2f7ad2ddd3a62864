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
    /// A request body gets this long, plus a second for every ``requestBodyMinRate`` bytes it has sent, plus the
    /// time the gateway held its reading back; past that: 408. Default 20s.
    public var requestBodyTimeout: Duration
    /// Bytes per second a request body must keep up, averaged from its start, once ``requestBodyTimeout`` is
    /// spent; 0 turns the check off. Default 512.
    public var requestBodyMinRate: Int
    /// The most memory all requests together may hold in bodies read to find a form or JSON token (each up to
    /// ``maxTokenBodyBytes``); past it: 503. Default 64 MiB.
    public var tokenBodyMemory: Int

    public init(
        maxHeaderBytes: Int = 16 * 1024,
        maxURIBytes: Int = 8 * 1024,
        maxBodyBytes: Int = 10 * 1024 * 1024,
        maxTokenBodyBytes: Int = 64 * 1024,
        maxConnections: Int = 10_000,
        idleTimeout: Duration = .seconds(60),
        requestHeaderTimeout: Duration = .seconds(10),
        drainTimeout: Duration = .seconds(30),
        requestBodyTimeout: Duration = .seconds(20),
        requestBodyMinRate: Int = 512,
        tokenBodyMemory: Int = 64 * 1024 * 1024
    ) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxURIBytes = maxURIBytes
        self.maxBodyBytes = maxBodyBytes
        self.maxTokenBodyBytes = maxTokenBodyBytes
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
        self.requestHeaderTimeout = requestHeaderTimeout
        self.drainTimeout = drainTimeout
        self.requestBodyTimeout = requestBodyTimeout
        self.requestBodyMinRate = requestBodyMinRate
        self.tokenBodyMemory = tokenBodyMemory
    }
}

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
    /// Response bytes one client connection may hold waiting for its client beyond what every connection
    /// buffers anyway (64 KiB): a backend's response that fits is read to its end, so the backend connection
    /// goes back to the pool while a slow client still reads. Default 256 KiB.
    public var responseBufferPerConnection: Int
    /// The most all connections together may hold of ``responseBufferPerConnection``; a connection that finds
    /// none left keeps backpressure on its backend instead. Default 64 MiB.
    public var responseBufferTotal: Int
    /// Bytes per second a client must take while response bytes wait for it, once ``responseSendTimeout`` of
    /// such waiting is spent; 0 turns the check off. Routes may set their own (`response_min_rate`). Default 1 KiB.
    public var responseMinRate: Int
    /// The waiting a response is allowed before ``responseMinRate`` applies (plus a second per that many bytes
    /// taken while waiting). Default 20s.
    public var responseSendTimeout: Duration

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
        tokenBodyMemory: Int = 64 * 1024 * 1024,
        responseBufferPerConnection: Int = 256 * 1024,
        responseBufferTotal: Int = 64 * 1024 * 1024,
        responseMinRate: Int = 1024,
        responseSendTimeout: Duration = .seconds(20)
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
        self.responseBufferPerConnection = responseBufferPerConnection
        self.responseBufferTotal = responseBufferTotal
        self.responseMinRate = responseMinRate
        self.responseSendTimeout = responseSendTimeout
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// HTTP/2 on TLS listeners (offered through ALPN `h2`).
public struct HTTP2Configuration: Sendable, Equatable {
    /// Offer `h2` in ALPN. Default true.
    public var enabled: Bool
    /// SETTINGS_MAX_CONCURRENT_STREAMS. Default 100.
    public var maxConcurrentStreams: Int
    /// SETTINGS_INITIAL_WINDOW_SIZE. Default 65535.
    public var initialWindowSize: Int

    public init(enabled: Bool = true, maxConcurrentStreams: Int = 100, initialWindowSize: Int = 65_535) {
        self.enabled = enabled
        self.maxConcurrentStreams = maxConcurrentStreams
        self.initialWindowSize = initialWindowSize
    }
}

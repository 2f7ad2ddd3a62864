//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateConfig
import TokengateHTTP

extension HTTP2ServerConfiguration {
    /// The gateway's configuration mapped onto the codec's: `http2:` for the protocol settings, `limits:`
    /// for the header size (the same budget an HTTP/1.1 request gets for its header section and URI) and
    /// the timeouts.
    init(_ http2: HTTP2Configuration, limits: LimitsConfiguration, accessLog: Bool, hsts: HSTSConfiguration) {
        self.init()
        self.accessLog = accessLog
        self.hsts = hsts.headerValue
        self.maxConcurrentStreams = http2.maxConcurrentStreams
        self.initialWindowSize = http2.initialWindowSize
        self.connectionWindowSize = max(1 << 20, http2.initialWindowSize)
        self.maxHeaderListSize = limits.maxHeaderBytes + limits.maxURIBytes + 1_024
        self.idleTimeout = TimeAmount(limits.idleTimeout)
        self.headerReadTimeout = TimeAmount(limits.requestHeaderTimeout)
        self.responseBufferPerConnection = limits.responseBufferPerConnection
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1

/// The request logic's side of one HTTP/2 stream: what ``HTTP2ServerCodec`` tells it.
///
/// A protocol because the codec serves two kinds of consumers that share nothing: the gateway's request
/// logic (shared with HTTP/1.1) and the test responders. Every call happens on the connection's event loop,
/// never while libnghttp2 is on the stack: the codec queues what nghttp2's callbacks report and delivers it
/// afterwards, so a handler may call any ``HTTP2ServerStream`` method from inside these calls.
package protocol HTTP2StreamHandler: AnyObject {
    /// The request, HTTP/1-shaped: first `.head` (`:method`, `:path` as the URI, `:authority` as the `Host`
    /// header, version 2.0), then `.body` parts, then `.end` with the trailers if any. Every `.body` part's
    /// bytes must eventually be reported with ``HTTP2ServerStream/consumed(bytes:)``: until then the client
    /// gets no WINDOW_UPDATE for them.
    func received(_ part: ClientRequestPart)

    /// The stream ended before both sides finished it: the client reset it, nghttp2 reset it for a
    /// protocol error, or the connection went away. Stop the work started for it (cancel the upstream
    /// request); writes from now on are dropped. Not called after the handler's own
    /// ``HTTP2ServerStream/reset(code:)``, nor after a response end once the request ended too.
    func streamReset(_ code: HTTP2ErrorCode)

    /// ``HTTP2ServerStream/isWritable`` changed: the client reads too slowly (false) or caught up (true).
    func writabilityChanged(_ writable: Bool)

    /// The server's drain ended with this stream under way; the connection closes next (``GatewayDrainEndedEvent``).
    func drainEnded()
}

/// Called once per new stream, when its request headers are complete and valid; returns the handler
/// that receives the request.
package typealias HTTP2StreamHandlerFactory = (HTTP2ServerStream) -> any HTTP2StreamHandler

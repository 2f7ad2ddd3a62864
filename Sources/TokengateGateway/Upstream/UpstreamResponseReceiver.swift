//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateHTTP

/// The client side of one exchange, as seen by the upstream connection that serves it.
///
/// The HTTP/1.1 connection handler is one conformer; each HTTP/2 stream is the other. Both live on the
/// upstream connection's event loop, so these calls are plain synchronous calls.
protocol UpstreamResponseReceiver: AnyObject {
    func upstreamReceived(_ part: UpstreamResponsePart)
    /// The upstream finished a read batch: a good moment to flush the client.
    func upstreamReadComplete()
    /// The upstream connection failed or closed while this exchange used it.
    func upstreamFailed(_ error: any Error)
    func upstreamWritabilityChanged(isWritable: Bool)
    /// The backend did not start its response within the upstream's response timeout.
    func upstreamTimedOut()
}

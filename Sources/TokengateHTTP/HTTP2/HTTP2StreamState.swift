//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// What ``HTTP2ServerCodec`` keeps for one stream besides nghttp2's own stream: the request being
/// collected, the response waiting to be submitted or pulled, and the flow-control bookkeeping.
///
/// A class (owned by the codec's stream table, never shared) so that nghttp2's callbacks can update it in
/// place while the table is being read: a struct in a dictionary would be copied, body queue and all, on
/// every mutation through a lookup.
package final class HTTP2StreamState {
    let id: Int32
    let handle: HTTP2ServerStream
    /// The request logic's handler; created when the request head is complete, `nil` before, for a
    /// request the codec answered itself, and after the handler reset the stream.
    var handler: (any HTTP2StreamHandler)?

    /// The stream's protocol state: where the request and the response are. The codec asks it, and runs the
    /// actions its inputs return; the properties below are only the storage those actions use.
    var machine = HTTP2StreamStateMachine()

    // MARK: Request (inbound)

    var request: HTTP2RequestHeadBuilder
    /// Trailers being collected (a second header block, with END_STREAM).
    var trailers: HTTPHeaders?
    var trailerListSize = 0
    /// Request body bytes handed to the handler and not yet reported consumed. On close, whatever is left
    /// is given back to the connection window, or a client could shrink it for good by resetting streams.
    var unconsumed = 0
    /// Bytes reported consumed, to pass to `nghttp2_session_consume` on the next round.
    var consumePending = 0
    /// When the client last sent this stream something (its HEADERS, a DATA frame), or was last given window
    /// to send more: what ``HTTP2ServerCodec``'s request body check measures a stall from. A round's start
    /// time, stored, never read from the clock per frame.
    var lastInboundAt: NIODeadline

    // MARK: Response (outbound)

    /// The head's block, until it is submitted.
    var pendingHead: HTTP2HeaderBlock?
    var body: CircularBuffer<ByteBuffer>
    var queuedBytes = 0
    /// Bytes of the configuration's ``HTTP2ServerConfiguration/responseBuffers`` this stream holds on top of
    /// ``HTTP2ServerConfiguration/maxQueuedBytesPerStream``; back once its queue is empty or it closes.
    var granted = 0
    /// The trailers' block, until they are submitted.
    var pendingTrailers: HTTP2HeaderBlock?

    // MARK: Bookkeeping

    /// Listed in the codec's dirty list for the next submit round (the list's membership, not protocol state).
    var dirty = false

    /// - Parameter body: an empty queue for the response body (``HTTP2StreamSpares/takeBody()``).
    package init(
        id: Int32,
        handle: HTTP2ServerStream,
        headerListLimit: Int,
        maxHeaderFields: Int,
        body: CircularBuffer<ByteBuffer>,
        openedAt: NIODeadline
    ) {
        self.id = id
        self.handle = handle
        self.lastInboundAt = openedAt
        self.request = HTTP2RequestHeadBuilder(limit: headerListLimit, maxFields: maxHeaderFields)
        self.body = body
    }
}

@available(*, unavailable)
extension HTTP2StreamState: Sendable {}

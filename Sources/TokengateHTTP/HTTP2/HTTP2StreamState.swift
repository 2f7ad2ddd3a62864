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
    package let id: Int32
    package let handle: HTTP2ServerStream
    /// The request logic's handler; created when the request head is complete, `nil` before, for a
    /// request the codec answered itself, and after the handler reset the stream.
    package var handler: (any HTTP2StreamHandler)?

    // MARK: Request (inbound)

    package var request: HTTP2RequestHeadBuilder
    /// Trailers being collected (a second header block, with END_STREAM).
    package var trailers: HTTPHeaders?
    package var trailerListSize = 0
    /// The codec answered the request itself (431, 400): its body is dropped and counted as consumed.
    package var answeredByCodec = false
    /// END_STREAM received.
    package var remoteEnded = false
    /// Request body bytes handed to the handler and not yet reported consumed. On close, whatever is left
    /// is given back to the connection window, or a client could shrink it for good by resetting streams.
    package var unconsumed = 0
    /// Bytes reported consumed, to pass to `nghttp2_session_consume` on the next round.
    package var consumePending = 0
    /// When the client last sent this stream something (its HEADERS, a DATA frame), or was last given window
    /// to send more: what ``HTTP2ServerCodec``'s request body check measures a stall from. A round's start
    /// time, stored, never read from the clock per frame.
    package var lastInboundAt: NIODeadline

    // MARK: Response (outbound)

    /// The request was a `HEAD`: the response has no content (RFC 9110 §9.3.2), so body writes are dropped, as
    /// HTTP/1.1's serializer drops them. A gateway answer (401, 404, …) comes with its JSON body whatever the
    /// method; sent as DATA on a `HEAD` stream, clients (curl, nghttp2) reset the stream as a protocol error.
    package var answersWithoutContent = false
    /// `100 Continue` to submit next round (the request said `expect: 100-continue` and the gateway wants its
    /// body); dropped once the final head is written.
    package var continueDue = false
    /// A head was written (queued or submitted).
    package var headWritten = false
    /// The head's block, until it is submitted.
    package var pendingHead: HTTP2HeaderBlock?
    package var body: CircularBuffer<ByteBuffer>
    package var queuedBytes = 0
    package var endWritten = false
    package var pendingTrailers: HTTP2HeaderBlock?
    /// The data provider returned EOF without END_STREAM: the trailers are to be submitted next round.
    package var trailersDue = false
    /// The data provider returned NGHTTP2_ERR_DEFERRED: `nghttp2_session_resume_data` once there is more.
    package var deferred = false
    /// END_STREAM sent.
    package var localEnded = false
    package var writable = true
    /// An RST_STREAM to submit next round.
    package var resetRequested: HTTP2ErrorCode?

    // MARK: Bookkeeping

    /// nghttp2 closed the stream (on_stream_close); nothing more is submitted for it.
    package var closed = false
    /// Listed in the codec's dirty list for the next submit round.
    package var dirty = false

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

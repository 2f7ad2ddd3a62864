//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// Settings and limits of one ``HTTP2ServerCodec``.
package struct HTTP2ServerConfiguration: Sendable, Hashable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS. nghttp2 refuses streams beyond it with RST_STREAM REFUSED_STREAM
    /// (which counts towards ``HTTP2DoSHeuristics/Event/serverReset``).
    package var maxConcurrentStreams = 100
    /// SETTINGS_INITIAL_WINDOW_SIZE: how much request body a client may send on one stream before the
    /// consumer reports bytes consumed (``HTTP2ServerStream/consumed(bytes:)``).
    package var initialWindowSize = 65_535
    /// The connection-level receive window, announced with a WINDOW_UPDATE on stream 0 right after SETTINGS.
    /// At least `initialWindowSize` so that one slow stream cannot starve all the others.
    package var connectionWindowSize = 1 << 20
    /// The cap on one request's decoded header list (names + values + 32 per field, as RFC 9113 §6.5.2
    /// counts it; pseudo-headers included). Announced as SETTINGS_MAX_HEADER_LIST_SIZE; past it the request
    /// gets a 431 answer and is never handed to the request logic.
    package var maxHeaderListSize = 16_384 + 8_192 + 1_024
    /// More regular fields than this (pseudo-headers not counted, `cookie` fields once) get a 431: HTTP/1.1's
    /// fixed limit (``HTTP1RequestParser/Limits/maxFields``; the configuration has no key for it), so a
    /// request is refused or passed on alike over either protocol.
    package var maxHeaderFields = 256
    /// Response body bytes queued on one stream above which ``HTTP2ServerStream/isWritable`` turns false;
    /// it turns true again below half of this.
    package var maxQueuedBytesPerStream = 64 * 1024
    /// Where a stream whose client falls behind takes more room than ``maxQueuedBytesPerStream`` from
    /// (`limits.response_buffer_total`), so a response that fits is read from its backend to the end; `nil`: no
    /// stream gets more.
    package var responseBuffers: ResponseBufferBudget?
    /// The most the streams of one connection together take from ``responseBuffers``
    /// (`limits.response_buffer_per_connection`).
    package var responseBufferPerConnection = 0
    /// Bytes taken from nghttp2 into one network write before the codec checks the channel's writability.
    package var maxBytesPerFlush = 256 * 1024
    /// No open stream for this long: GOAWAY NO_ERROR, then close.
    package var idleTimeout = TimeAmount.seconds(60)
    /// No open stream for this long: the session's frame buffer pages go back to the kernel
    /// (``HTTP2SessionArena``), so an idle connection does not keep 4–16 KiB resident. Short, because it costs
    /// one madvise per idle period and nothing while streams are open.
    package var idlePageReleaseDelay = TimeAmount.seconds(1)
    /// The connection preface, and every header block once begun (HEADERS + CONTINUATIONs), must arrive
    /// completely within this; otherwise GOAWAY and close.
    package var headerReadTimeout = TimeAmount.seconds(10)
    /// How long the codec keeps reading (and dropping) after a terminating GOAWAY before it closes, so the
    /// GOAWAY is not destroyed by the RST a close with unread input causes.
    package var closeLinger = TimeAmount.milliseconds(250)
    /// How long after a graceful shutdown's notice (GOAWAY with last-stream-id 2^31-1) its final GOAWAY follows:
    /// longer than a client's round trip, so a request sent before the client read the notice is taken.
    package var shutdownNoticeTimeout = TimeAmount.seconds(1)
    package var dos = HTTP2DoSHeuristics.Limits()
    /// `log.access_log`: requests the codec answers itself (``HTTP2ServerCodec``'s 400s and 431s) get the
    /// same info line as HTTP/1.1's own rejections.
    package var accessLog = true
    /// `Strict-Transport-Security` for the answers the codec gives itself (`hsts:`), `nil` when turned off.
    package var hsts: String? = "max-age=31536000"

    package init() {}
}

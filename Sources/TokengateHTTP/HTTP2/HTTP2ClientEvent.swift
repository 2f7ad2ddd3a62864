//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// What one round of bytes from an HTTP/2 backend produced, in the order nghttp2 parsed it
/// (``NGHTTP2ClientSession/receive(_:)``). The upstream side acts on these after the round, never from inside
/// an nghttp2 callback.
package enum HTTP2ClientEvent: Sendable, Equatable {
    /// The final response head of a stream (interim 1xx heads are not reported). `endStream` for a
    /// head-only answer — gRPC's trailers-only refusals are one.
    case head(stream: Int32, status: Int, fields: [HTTP2ClientField], endStream: Bool)
    /// Response body bytes; the caller hands the window back with ``NGHTTP2ClientSession/consume(stream:bytes:)``
    /// once it has passed them on, which is how a slow client slows the backend.
    case data(stream: Int32, bytes: [UInt8])
    /// The response's trailers; they end the stream.
    case trailers(stream: Int32, fields: [HTTP2ClientField])
    /// The response body ended (END_STREAM on a DATA frame).
    case end(stream: Int32)
    /// The stream is gone. `code` 0 after a complete response; otherwise the RST_STREAM code (the backend's, or
    /// the gateway's own when it refused what the backend sent: `reason` says what).
    case closed(stream: Int32, code: UInt32, reason: HTTP2ClientStreamFailure?)
    /// The backend is going away: streams above `lastStream` were never processed (safe to retry), and no new
    /// stream may open on this connection.
    case goaway(lastStream: Int32, code: UInt32)
    /// The backend's SETTINGS: how many streams it accepts at once.
    case settings(maxConcurrentStreams: Int)
}

/// One response field, name lowercase as HTTP/2 carries it.
package struct HTTP2ClientField: Sendable, Equatable {
    package var name: String
    package var value: String

    package init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// Why the gateway reset a stream the backend answered on.
package enum HTTP2ClientStreamFailure: Sendable, Equatable {
    /// The response head or trailers went over the header list limit (bytes or fields).
    case headerListTooLarge
    /// The response had no valid `:status`.
    case malformedHead
}

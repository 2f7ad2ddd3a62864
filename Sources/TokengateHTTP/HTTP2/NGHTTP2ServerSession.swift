//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateNghttp2
internal import CTokengateShims

/// One server-side `nghttp2_session`: owns the `nghttp2_session*`, and every nghttp2 call the server side makes
/// on a session goes through one of its methods, as every OpenSSL call on a connection goes through
/// `TLSConnection`.
///
/// ### Ownership and lifetime
/// Created with the codec's callbacks and options (``init(userData:configuration:)``), deleted in `deinit` and
/// nowhere else. It holds the arena the session allocates from (``HTTP2SessionArena``): stored properties are
/// released after `deinit` has run, so the arena always outlives `nghttp2_session_del`. The session's user data
/// is the codec, unretained: the codec owns this object, so the pointer is valid whenever nghttp2 calls back.
///
/// ### Reentrancy
/// nghttp2 must never be entered from inside one of its own callbacks (``HTTP2ServerCodec`` states the rule).
/// Whoever holds a reference during a call keeps the session alive, so a handler that drops the codec's
/// reference mid-round cannot free the session under nghttp2: it is deleted when the round lets go of it.
final class NGHTTP2ServerSession {
    private let session: OpaquePointer
    /// The session's allocator; outlives the session (see the type's doc comment).
    let arena: HTTP2SessionArena

    /// Creates the server session, with its callbacks, options and allocator arena, and queues the server
    /// preface: SETTINGS, then the connection window when it is larger than the protocol's default.
    init(userData: UnsafeMutableRawPointer, configuration: HTTP2ServerConfiguration) throws(HTTP2SessionError) {
        var callbacks: OpaquePointer?
        var result = nghttp2_session_callbacks_new(&callbacks)
        guard result == 0, let callbacks else {
            throw HTTP2SessionError(call: "nghttp2_session_callbacks_new", code: result)
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, onBeginFrame)
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameReceived)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, onFrameSent)
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, onInvalidFrame)
        // No error callback: nghttp2's messages can quote header values (a token, a cookie) verbatim.

        var option: OpaquePointer?
        result = nghttp2_option_new(&option)
        guard result == 0, let option else { throw HTTP2SessionError(call: "nghttp2_option_new", code: result) }
        defer { nghttp2_option_del(option) }
        // WINDOW_UPDATEs only for bytes the request logic passed on (``consume(stream:bytes:)``).
        nghttp2_option_set_no_auto_window_update(option, 1)
        // HTTP messaging validation stays on: nghttp2_option_set_no_http_messaging is never called.
        // Stated explicitly rather than left to the defaults, which changed between releases:
        nghttp2_option_set_max_continuations(option, 8)
        nghttp2_option_set_max_outbound_ack(option, 1000)
        nghttp2_option_set_max_settings(option, 32)
        // A backstop only: HTTP2DoSHeuristics' clientReset limit is stricter and trips first, with
        // ENHANCE_YOUR_CALM and a log line; nghttp2's own ends the connection with INTERNAL_ERROR.
        nghttp2_option_set_stream_reset_rate_limit(option, 1000, 33)

        var session: OpaquePointer?
        // The arena first: the session allocates from it and must be deleted before it.
        let arena = try HTTP2SessionArena()
        result = nghttp2_session_server_new3(&session, callbacks, userData, option, arena.mem)
        arena.seal()
        guard result == 0, let session else {
            throw HTTP2SessionError(call: "nghttp2_session_server_new3", code: result)
        }

        var settings = [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: UInt32(clamping: configuration.maxConcurrentStreams)
            ),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                value: UInt32(clamping: configuration.initialWindowSize)
            ),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: UInt32(clamping: configuration.maxHeaderListSize)
            ),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
        ]
        result = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        if result == 0, configuration.connectionWindowSize > 65_535 {
            result = nghttp2_session_set_local_window_size(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(clamping: configuration.connectionWindowSize))
        }
        guard result == 0 else {
            nghttp2_session_del(session)  // Not yet owned: `deinit` does not run for an init that throws.
            throw HTTP2SessionError(call: "nghttp2_submit_settings", code: result)
        }
        self.session = session
        self.arena = arena
    }

    deinit {
        nghttp2_session_del(self.session)
    }

    // MARK: Bytes in and out

    /// Feeds received bytes; nghttp2 calls back (the codec's callbacks) while it parses them. Returns the bytes
    /// taken, or a negative nghttp2 error, fatal for the session.
    @inline(__always)
    func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        nghttp2_session_mem_recv(self.session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
    }

    /// The next serialized frames, valid until the next call into the session; an empty buffer when there is
    /// nothing to send, `nil` with `error` set on a fatal error.
    @inline(__always)
    func nextOutput(error: inout Int32) -> UnsafeRawBufferPointer? {
        var data: UnsafePointer<UInt8>?
        let count = nghttp2_session_mem_send(self.session, &data)
        if count < 0 {
            error = Int32(truncatingIfNeeded: count)
            return nil
        }
        return UnsafeRawBufferPointer(start: data, count: count)
    }

    /// nghttp2 expects more input (it has not ended the session).
    var wantsRead: Bool { nghttp2_session_want_read(self.session) != 0 }
    /// nghttp2 has frames to send.
    var wantsWrite: Bool { nghttp2_session_want_write(self.session) != 0 }

    // MARK: Flow control

    /// Gives `bytes` of a stream's window back (a WINDOW_UPDATE once enough has accumulated).
    func consume(stream id: Int32, bytes: Int) {
        nghttp2_session_consume(self.session, id, bytes)
    }

    /// Gives `bytes` of the connection's window back.
    func consumeConnection(bytes: Int) {
        nghttp2_session_consume_connection(self.session, bytes)
    }

    /// The receive window the client still has on the connection.
    var connectionWindow: Int32 { nghttp2_session_get_local_window_size(self.session) }

    /// The receive window the client still has on a stream.
    func window(stream id: Int32) -> Int32 {
        nghttp2_session_get_stream_local_window_size(self.session, id)
    }

    // MARK: Submitting

    /// Submits a response head, with a body to pull through ``pullResponseData`` when `withBody`, or trailers.
    func submit(_ block: HTTP2HeaderBlock, stream id: Int32, response: Bool, withBody: Bool) -> Int32 {
        block.withFlatFields { bytes, lengths, neverIndex in
            if response {
                CTokengateShims_nghttp2_submit_response(
                    self.session, id, bytes, lengths, neverIndex, block.count, withBody ? readResponseData : nil)
            } else {
                CTokengateShims_nghttp2_submit_trailer(self.session, id, bytes, lengths, neverIndex, block.count)
            }
        }
    }

    /// Submits an interim `100 Continue`.
    func submitContinue(stream id: Int32) -> Int32 {
        CTokengateShims_nghttp2_submit_continue(self.session, id)
    }

    /// Tells nghttp2 that a deferred stream has data to pull again.
    func resumeData(stream id: Int32) {
        nghttp2_session_resume_data(self.session, id)
    }

    /// Resets a stream (RST_STREAM with `code`).
    func resetStream(_ id: Int32, code: UInt32) {
        nghttp2_submit_rst_stream(self.session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, code)
    }

    /// Ends the session at once: GOAWAY with `code` and the last stream nghttp2 processed; nothing more is read.
    func terminate(code: UInt32) {
        nghttp2_session_terminate_session(self.session, code)
    }

    /// The highest stream id nghttp2 has taken a request on; 0 before the client's first request.
    var lastProcessedStreamID: Int32 { nghttp2_session_get_last_proc_stream_id(self.session) }

    /// A graceful GOAWAY: streams up to the last one processed are finished, no new one is accepted.
    func submitGoaway(code: UInt32) {
        let last = nghttp2_session_get_last_proc_stream_id(self.session)
        nghttp2_submit_goaway(self.session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, code, nil, 0)
    }

    /// The first half of a graceful shutdown (RFC 9113 §6.8): GOAWAY NO_ERROR with last-stream-id 2^31-1.
    /// Clients stop opening streams on the connection, yet one already on its way is still accepted, since
    /// the id names no stream as refused; the final ``submitGoaway(code:)`` follows at least a round trip later.
    /// Returns 0, or a negative nghttp2 error (a GOAWAY was submitted already).
    func submitShutdownNotice() -> Int32 {
        nghttp2_submit_shutdown_notice(self.session)
    }

    // MARK: Memory

    /// Hands the arena's pages back to the kernel when the session serializes no frame — it wants to read and
    /// has nothing to write — and returns the bytes released; never while nghttp2 is on the stack.
    func releasePagesIfIdle() -> Int {
        guard self.wantsRead, !self.wantsWrite else { return 0 }
        return self.arena.releasePages()
    }

    /// nghttp2's description of one of its error codes (never a header value).
    static func describe(_ code: Int32) -> String {
        String(cString: nghttp2_strerror(code))
    }
}

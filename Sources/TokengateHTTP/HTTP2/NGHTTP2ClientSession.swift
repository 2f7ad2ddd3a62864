//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateNghttp2
import NIOCore

/// One client-side `nghttp2_session` toward an HTTP/2 backend (h2c with prior knowledge, or h2 after TLS with
/// ALPN `h2`): owns the `nghttp2_session*`, and every nghttp2 call the upstream side makes goes through it.
///
/// Sans-I/O: bytes from the backend go in through ``receive(_:)``, which returns the ``HTTP2ClientEvent``s they
/// produced; frames to send come out of ``nextOutput()``. Requests are multiplexed as streams
/// (``submitRequest(_:hasBody:)``); request bodies are queued per stream (``sendData(stream:_:)``) and pulled by
/// nghttp2 as the backend's flow-control windows allow, and ended with or without trailers
/// (``endRequest(stream:trailers:)``). Receive windows are given back only for bytes the caller passed on
/// (``consume(stream:bytes:)``): nghttp2's automatic WINDOW_UPDATEs are off.
///
/// ### A backend that misbehaves
/// A flood of SETTINGS, PING, WINDOW_UPDATE, RST_STREAM or empty DATA frames trips ``HTTP2DoSHeuristics`` and
/// ends the session (``receive(_:)`` throws ``Failure/flood(_:)``); a response head or trailers over the header
/// list limit resets that stream only (``HTTP2ClientStreamFailure/headerListTooLarge``). nghttp2's own limits
/// (CONTINUATION count, outbound ACK queue, SETTINGS entries) are set explicitly.
///
/// ### Ownership and reentrancy
/// The session's user data is this object, unretained: it owns the session, so the pointer is valid whenever
/// nghttp2 calls back. Callbacks only record; nothing calls back into the caller from inside nghttp2.
package final class NGHTTP2ClientSession {
    /// The gateway's side of the connection's settings and limits.
    package struct Configuration: Sendable {
        /// The receive window per stream (SETTINGS_INITIAL_WINDOW_SIZE).
        package var initialWindowSize = 1 << 20
        /// The receive window of the whole connection.
        package var connectionWindowSize = 4 << 20
        /// The largest response head or trailer block, in HPACK-decoded bytes (name + value + 32 each).
        package var maxHeaderListSize = 64 * 1024
        /// The most fields in one response head or trailer block.
        package var maxHeaderFields = 200
        /// Rate limits on the control frames a backend sends.
        package var floodLimits = HTTP2DoSHeuristics.Limits()

        package init() {}
    }

    /// Why the session ended.
    package enum Failure: Error, Equatable {
        /// The backend sent control frames faster than ``Configuration/floodLimits`` allow.
        case flood(HTTP2DoSHeuristics.Event)
        /// nghttp2 refused the bytes (a protocol violation); its description, never a header value.
        case protocolError(String)
    }

    private var session: OpaquePointer!
    private let configuration: Configuration
    private var heuristics: HTTP2DoSHeuristics
    private var events: [HTTP2ClientEvent] = []
    private var tripped: HTTP2DoSHeuristics.Event?
    private var now = NIODeadline.now()

    /// A response block in progress, per stream.
    private var blocks: [Int32: (fields: [HTTP2ClientField], bytes: Int)] = [:]
    private var failures: [Int32: HTTP2ClientStreamFailure] = [:]
    /// Request bodies not yet taken by nghttp2, per stream.
    private var bodies: [Int32: OutgoingBody] = [:]
    /// Streams submitted and not closed yet.
    private var openStreams = 0

    private struct OutgoingBody {
        var queued: [UInt8] = []
        var sent = 0
        var ended = false
        var trailers: [(String, String)]?
        var deferred = false
    }

    /// Creates the client session and queues the client preface's SETTINGS: no push, the receive window and the
    /// header list limit.
    package init(configuration: Configuration = Configuration()) throws(HTTP2SessionError) {
        self.configuration = configuration
        self.heuristics = HTTP2DoSHeuristics(limits: configuration.floodLimits, now: .now())

        var callbacks: OpaquePointer?
        var result = nghttp2_session_callbacks_new(&callbacks)
        guard result == 0, let callbacks else {
            throw HTTP2SessionError(call: "nghttp2_session_callbacks_new", code: result)
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, clientOnBeginFrame)
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, clientOnBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, clientOnHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, clientOnFrameReceived)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, clientOnDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, clientOnStreamClose)
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, clientOnFrameSent)
        // No error callback: nghttp2's messages can quote header values verbatim.

        var option: OpaquePointer?
        result = nghttp2_option_new(&option)
        guard result == 0, let option else { throw HTTP2SessionError(call: "nghttp2_option_new", code: result) }
        defer { nghttp2_option_del(option) }
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_max_continuations(option, 8)
        nghttp2_option_set_max_outbound_ack(option, 1000)
        nghttp2_option_set_max_settings(option, 32)
        nghttp2_option_set_stream_reset_rate_limit(option, 1000, 33)

        var session: OpaquePointer?
        let userData = Unmanaged.passUnretained(self).toOpaque()
        result = nghttp2_session_client_new2(&session, callbacks, userData, option)
        guard result == 0, let session else {
            throw HTTP2SessionError(call: "nghttp2_session_client_new2", code: result)
        }
        self.session = session

        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                value: UInt32(clamping: configuration.initialWindowSize)),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: UInt32(clamping: configuration.maxHeaderListSize)),
        ]
        result = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        if result == 0, configuration.connectionWindowSize > 65_535 {
            result = nghttp2_session_set_local_window_size(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(clamping: configuration.connectionWindowSize))
        }
        guard result == 0 else { throw HTTP2SessionError(call: "nghttp2_submit_settings", code: result) }
    }

    deinit {
        nghttp2_session_del(self.session)
    }

    // MARK: Bytes in and out

    /// Feeds bytes read from the backend and returns what they produced. Throws when the session must end
    /// (flood, protocol violation); the caller then fails every open stream with a 502 and drops the connection.
    package func receive(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> [HTTP2ClientEvent] {
        self.now = .now()
        let result = nghttp2_session_mem_recv(
            self.session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        if let tripped = self.tripped {
            nghttp2_session_terminate_session(self.session, NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
            throw .flood(tripped)
        }
        if result < 0 {
            throw .protocolError(String(cString: nghttp2_strerror(Int32(truncatingIfNeeded: result))))
        }
        return self.takeEvents()
    }

    /// What nghttp2 recorded outside ``receive(_:)`` (a stream closed while sending).
    package func takeEvents() -> [HTTP2ClientEvent] {
        defer { self.events.removeAll(keepingCapacity: true) }
        return self.events
    }

    /// Every frame nghttp2 has to send now, serialized; empty when there is none.
    package func nextOutput() throws(Failure) -> [UInt8] {
        var output: [UInt8] = []
        self.now = .now()
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(self.session, &data)
            if count < 0 { throw .protocolError(String(cString: nghttp2_strerror(Int32(truncatingIfNeeded: count)))) }
            guard count > 0, let data else { return output }
            output.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
        }
    }

    /// nghttp2 still reads (no GOAWAY exchanged both ways, no fatal error).
    package var wantsRead: Bool { nghttp2_session_want_read(self.session) != 0 }
    /// nghttp2 has frames to send.
    package var wantsWrite: Bool { nghttp2_session_want_write(self.session) != 0 }

    /// How many more streams the backend accepts now (its SETTINGS_MAX_CONCURRENT_STREAMS less the open ones):
    /// a request beyond it waits in the caller's queue or goes to another connection.
    package var availableStreams: Int {
        Int(nghttp2_session_get_remote_settings(self.session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
            - self.openStreams
    }

    // MARK: Requests

    /// Opens a stream with the request's fields (pseudo-fields first: `:method`, `:scheme`, `:authority`,
    /// `:path`); returns its id, or a negative nghttp2 error (`NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE` once the ids
    /// run out: the caller opens a new connection). With `hasBody`, the body follows through ``sendData`` and
    /// ``endRequest``.
    package func submitRequest(_ fields: [(String, String)], hasBody: Bool) -> Int32 {
        let provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: clientReadRequestData)
        let id = Self.withNameValues(fields) { nva, count in
            guard hasBody else { return nghttp2_submit_request(self.session, nil, nva, count, nil, nil) }
            return withUnsafePointer(to: provider) { nghttp2_submit_request(self.session, nil, nva, count, $0, nil) }
        }
        guard id > 0 else { return id }
        self.openStreams += 1
        if hasBody { self.bodies[id] = OutgoingBody() }
        return id
    }

    /// Queues request body bytes on a stream.
    package func sendData(stream id: Int32, _ bytes: some Sequence<UInt8>) {
        guard var body = self.bodies[id], !body.ended else { return }
        body.queued.append(contentsOf: bytes)
        let resume = body.deferred
        body.deferred = false
        self.bodies[id] = body
        if resume { nghttp2_session_resume_data(self.session, id) }
    }

    /// Ends a request body, with trailers when the client sent any (gRPC clients do not; HTTP/1.1 chunked ones
    /// may).
    package func endRequest(stream id: Int32, trailers: [(String, String)]? = nil) {
        guard var body = self.bodies[id], !body.ended else { return }
        body.ended = true
        body.trailers = trailers?.isEmpty == true ? nil : trailers
        let resume = body.deferred
        body.deferred = false
        self.bodies[id] = body
        if resume { nghttp2_session_resume_data(self.session, id) }
    }

    /// Resets a stream (the client went away): RST_STREAM CANCEL.
    package func cancel(stream id: Int32) {
        nghttp2_submit_rst_stream(self.session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_CANCEL.rawValue)
    }

    /// Gives `bytes` of a stream's (and the connection's) receive window back, once they were passed on.
    package func consume(stream id: Int32, bytes: Int) {
        nghttp2_session_consume(self.session, id, bytes)
    }

    /// A graceful GOAWAY from the gateway's side (the connection is retired).
    package func goaway() {
        nghttp2_submit_goaway(
            self.session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, NGHTTP2_NO_ERROR.rawValue, nil, 0)
    }

    /// Builds an `nghttp2_nv` array over one contiguous copy of the fields; nghttp2 copies them again.
    private static func withNameValues<R>(
        _ fields: [(String, String)], _ body: (UnsafePointer<nghttp2_nv>, Int) -> R
    ) -> R {
        var storage: [UInt8] = []
        var spans: [(Int, Int, Int, Int)] = []
        for (name, value) in fields {
            let nameStart = storage.count
            storage.append(contentsOf: name.utf8)
            let valueStart = storage.count
            storage.append(contentsOf: value.utf8)
            spans.append((nameStart, valueStart - nameStart, valueStart, storage.count - valueStart))
        }
        storage.append(0)  // Never an empty buffer: its base address would be nil.
        return storage.withUnsafeMutableBufferPointer { raw in
            let base = raw.baseAddress!
            var nva = spans.enumerated().map { index, span in
                let (name, _) = fields[index]
                let sensitive = name == "authorization" || name == "cookie" || name == "proxy-authorization"
                return nghttp2_nv(
                    name: base + span.0, value: base + span.2, namelen: span.1, valuelen: span.3,
                    flags: UInt8(sensitive ? NGHTTP2_NV_FLAG_NO_INDEX.rawValue : NGHTTP2_NV_FLAG_NONE.rawValue))
            }
            return nva.withUnsafeMutableBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }

    // MARK: What the callbacks record

    fileprivate func beganFrame(_ header: nghttp2_frame_hd) -> Int32 {
        let flags = UInt32(header.flags)
        let event: HTTP2DoSHeuristics.Event?
        switch UInt32(header.type) {
        case NGHTTP2_DATA.rawValue:
            event = header.length == 0 && flags & NGHTTP2_FLAG_END_STREAM.rawValue == 0 ? .emptyData : nil
        case NGHTTP2_WINDOW_UPDATE.rawValue: event = .windowUpdate
        case NGHTTP2_PING.rawValue: event = flags & NGHTTP2_FLAG_ACK.rawValue == 0 ? .ping : nil
        case NGHTTP2_SETTINGS.rawValue: event = flags & NGHTTP2_FLAG_ACK.rawValue == 0 ? .settingsOrPriority : nil
        case NGHTTP2_PRIORITY.rawValue: event = .settingsOrPriority
        case NGHTTP2_RST_STREAM.rawValue: event = .clientReset
        default: event = nil
        }
        guard let event else { return 0 }
        switch self.heuristics.record(event, now: self.now) {
        case .proceed: return 0
        case .enhanceYourCalm(let tripped):
            self.tripped = tripped
            return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue
        }
    }

    /// A backend acknowledges the request bytes it reads with WINDOW_UPDATEs: each DATA frame sent earns some,
    /// so a large upload is not taken for a WINDOW_UPDATE flood.
    fileprivate func sentFrame(_ header: nghttp2_frame_hd) {
        if UInt32(header.type) == NGHTTP2_DATA.rawValue, header.length > 0 {
            self.heuristics.sentDataFrame(now: self.now)
        }
    }

    fileprivate func beganHeaders(stream id: Int32) {
        self.blocks[id] = ([], 0)
    }

    fileprivate func receivedField(stream id: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Int32 {
        guard var block = self.blocks[id] else { return 0 }
        block.bytes += name.count + value.count + 32
        guard block.bytes <= self.configuration.maxHeaderListSize,
            block.fields.count < self.configuration.maxHeaderFields
        else {
            self.blocks[id] = nil
            self.failures[id] = .headerListTooLarge
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue  // Resets this stream only.
        }
        block.fields.append(HTTP2ClientField(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        self.blocks[id] = block
        return 0
    }

    fileprivate func receivedFrame(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        let id = header.stream_id
        let endStream = UInt32(header.flags) & NGHTTP2_FLAG_END_STREAM.rawValue != 0
        switch UInt32(header.type) {
        case NGHTTP2_HEADERS.rawValue:
            guard let block = self.blocks.removeValue(forKey: id) else { return }
            if frame.pointee.headers.cat == NGHTTP2_HCAT_HEADERS, !block.fields.contains(where: { $0.name == ":status" }) {
                self.events.append(.trailers(stream: id, fields: block.fields))
                return
            }
            guard let status = block.fields.first(where: { $0.name == ":status" }).flatMap({ Int($0.value) }),
                (100...999).contains(status)
            else {
                self.failures[id] = .malformedHead
                nghttp2_submit_rst_stream(self.session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_PROTOCOL_ERROR.rawValue)
                return
            }
            guard status >= 200 else { return }  // Interim heads are not forwarded.
            let fields = block.fields.filter { !$0.name.hasPrefix(":") }
            self.events.append(.head(stream: id, status: status, fields: fields, endStream: endStream))
        case NGHTTP2_DATA.rawValue:
            if endStream { self.events.append(.end(stream: id)) }
        case NGHTTP2_GOAWAY.rawValue:
            self.events.append(.goaway(lastStream: frame.pointee.goaway.last_stream_id, code: frame.pointee.goaway.error_code))
        case NGHTTP2_SETTINGS.rawValue:
            guard UInt32(header.flags) & NGHTTP2_FLAG_ACK.rawValue == 0 else { return }
            let limit = nghttp2_session_get_remote_settings(self.session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
            self.events.append(.settings(maxConcurrentStreams: Int(limit)))
        default:
            return
        }
    }

    fileprivate func receivedData(stream id: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        self.events.append(.data(stream: id, bytes: Array(bytes)))
    }

    fileprivate func streamClosed(_ id: Int32, code: UInt32) {
        self.blocks[id] = nil
        self.bodies[id] = nil
        let failure = self.failures.removeValue(forKey: id)
        self.openStreams -= 1
        self.events.append(.closed(stream: id, code: code, reason: failure))
    }

    fileprivate func readRequestData(
        stream id: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard var body = self.bodies[id] else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        let available = body.queued.count - body.sent
        if available == 0 {
            guard body.ended else {
                body.deferred = true
                self.bodies[id] = body
                return Int(NGHTTP2_ERR_DEFERRED.rawValue)
            }
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            if let trailers = body.trailers {
                flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                _ = Self.withNameValues(trailers) { nva, count in nghttp2_submit_trailer(self.session, id, nva, count) }
            }
            self.bodies[id] = nil
            return 0
        }
        let count = min(available, length)
        body.queued.withUnsafeBufferPointer { queued in
            buffer.update(from: queued.baseAddress! + body.sent, count: count)
        }
        body.sent += count
        if body.sent == body.queued.count {
            body.queued.removeAll(keepingCapacity: true)
            body.sent = 0
        }
        self.bodies[id] = body
        return count
    }
}

// MARK: The C callbacks: each finds the session through its user data and records.

private func clientSession(_ userData: UnsafeMutableRawPointer?) -> NGHTTP2ClientSession {
    Unmanaged<NGHTTP2ClientSession>.fromOpaque(userData!).takeUnretainedValue()
}

private let clientOnBeginFrame: nghttp2_on_begin_frame_callback = { _, header, userData in
    clientSession(userData).beganFrame(header!.pointee)
}

private let clientOnBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
    clientSession(userData).beganHeaders(stream: frame!.pointee.hd.stream_id)
    return 0
}

private let clientOnHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
    clientSession(userData).receivedField(
        stream: frame!.pointee.hd.stream_id,
        name: UnsafeBufferPointer(start: name, count: nameLength),
        value: UnsafeBufferPointer(start: value, count: valueLength))
}

private let clientOnFrameReceived: nghttp2_on_frame_recv_callback = { _, frame, userData in
    clientSession(userData).receivedFrame(frame!)
    return 0
}

private let clientOnDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, stream, data, length, userData in
    clientSession(userData).receivedData(stream: stream, UnsafeBufferPointer(start: data, count: length))
    return 0
}

private let clientOnStreamClose: nghttp2_on_stream_close_callback = { _, stream, code, userData in
    clientSession(userData).streamClosed(stream, code: code)
    return 0
}

private let clientOnFrameSent: nghttp2_on_frame_send_callback = { _, frame, userData in
    clientSession(userData).sentFrame(frame!.pointee.hd)
    return 0
}

private let clientReadRequestData: nghttp2_data_source_read_callback = { _, stream, buffer, length, flags, _, userData in
    clientSession(userData).readRequestData(stream: stream, into: buffer!, length: length, flags: flags!)
}

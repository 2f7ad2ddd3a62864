//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateNghttp2
import Logging
import NIOCore
import NIOHTTP1

/// Why a session could not be made (out of memory, in practice).
package struct HTTP2SessionError: Error, CustomStringConvertible {
    package var call: String
    package var code: Int32
    package var description: String { "\(self.call) failed: \(NGHTTP2ServerSession.describe(self.code))" }
}

// MARK: What the callbacks record. They never call nghttp2 and never call a handler.

extension HTTP2ServerCodec {
    /// Every frame header, before its payload and before nghttp2 validates it: where floods are counted.
    func receivedFrameHeader(_ header: nghttp2_frame_hd) -> Int32 {
        self.awaitingPreface = false
        let flags = UInt32(header.flags)
        switch UInt32(header.type) {
        case NGHTTP2_HEADERS.rawValue, NGHTTP2_CONTINUATION.rawValue:
            // Whether the block ends with this frame: what lets the close of a stream whose block nghttp2
            // rejected end the block's timeout (``streamClosed(_:code:)``).
            self.headerBlockEndsInLastFrame = flags & NGHTTP2_FLAG_END_HEADERS.rawValue != 0
        default:
            // nghttp2 reads the header of a frame other than CONTINUATION only when no header block is in
            // progress (inside one, anything else is a connection error it handles itself): whatever block
            // began last has ended, accepted or not. A block nghttp2 rejected (an invalid field, RST_STREAM
            // PROTOCOL_ERROR) or one a callback refused (NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE) gets no
            // on_frame_recv, so this and the stream's close are the only signs that it is over.
            self.headerBlockStartedAt = nil
        }
        let event: HTTP2DoSHeuristics.Event?
        switch UInt32(header.type) {
        case NGHTTP2_DATA.rawValue:
            event = header.length == 0 && flags & NGHTTP2_FLAG_END_STREAM.rawValue == 0 ? .emptyData : nil
        case NGHTTP2_WINDOW_UPDATE.rawValue:
            event = .windowUpdate
        case NGHTTP2_PING.rawValue:
            event = flags & NGHTTP2_FLAG_ACK.rawValue == 0 ? .ping : nil
        case NGHTTP2_SETTINGS.rawValue:
            event = flags & NGHTTP2_FLAG_ACK.rawValue == 0 ? .settingsOrPriority : nil
        case NGHTTP2_PRIORITY.rawValue:
            event = .settingsOrPriority
        case NGHTTP2_RST_STREAM.rawValue:
            event = .clientReset
        default:
            event = nil
        }
        guard let event else { return 0 }
        switch self.heuristics.record(event, now: self.roundStartedAt) {
        case .proceed:
            return 0
        case .enhanceYourCalm(let tripped):
            // Stops mem_recv right here: the rest of the flood in this read is never parsed.
            self.calm = tripped
            return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue
        }
    }

    func beganHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let id = frame.pointee.hd.stream_id
        self.headerBlockStartedAt = self.roundStartedAt
        self.headerBlockStream = id
        if frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
            let stream = HTTP2StreamState(
                id: id,
                handle: HTTP2ServerStream(id: id, codec: self),
                headerListLimit: self.configuration.maxHeaderListSize,
                maxHeaderFields: self.configuration.maxHeaderFields,
                body: self.spares.takeBody(),
                openedAt: self.roundStartedAt
            )
            self.streamOpened(stream)
        } else if let stream = self.stream(id), stream.machine.beganTrailers() == .record {
            stream.trailers = HTTPHeaders()
            stream.trailerListSize = 0
        }
        return 0
    }

    /// One decoded field, as nghttp2's bytes (valid only during the call).
    ///
    /// Returning NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE makes nghttp2 queue RST_STREAM INTERNAL_ERROR for the
    /// stream and read the rest of the block without validating it or calling back (it still decodes it, to
    /// keep the HPACK table in step): the only way to stop paying for the fields of a list already refused.
    /// The reset is what the client sees; a 431 cannot follow (the reset is queued ahead of any response, and
    /// closes the stream when it is sent). NGHTTP2_ERR_CALLBACK_FAILURE stops `mem_recv` and the connection.
    func receivedHeader(_ frame: UnsafePointer<nghttp2_frame>, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Int32 {
        guard let stream = self.stream(frame.pointee.hd.stream_id) else { return 0 }
        if frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
            let wasOversized = stream.request.oversized
            let more = stream.request.add(name: name, value: value)
            if !wasOversized, stream.request.oversized, !self.countOversizedHeaderList() {
                return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue
            }
            return more ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        // Trailers: over the same cap, the stream is reset (nghttp2 sends RST_STREAM INTERNAL_ERROR) —
        // a 431 is no longer possible once the request was handed on.
        stream.trailerListSize += name.count + value.count + 32
        guard stream.trailerListSize <= self.configuration.maxHeaderListSize else {
            stream.trailers = nil
            guard self.countOversizedHeaderList() else { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        stream.trailers?.add(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
        return 0
    }

    /// Counts a header list over the limit (once per block) against ``HTTP2DoSHeuristics/Event/oversizedHeaderList``;
    /// false when the limit tripped (``calm`` is set: the caller stops nghttp2 with NGHTTP2_ERR_CALLBACK_FAILURE).
    private func countOversizedHeaderList() -> Bool {
        guard case .enhanceYourCalm(let tripped) = self.heuristics.record(.oversizedHeaderList, now: self.roundStartedAt)
        else { return true }
        self.calm = tripped
        return false
    }

    func receivedFrame(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let header = frame.pointee.hd
        let endStream = UInt32(header.flags) & NGHTTP2_FLAG_END_STREAM.rawValue != 0
        switch UInt32(header.type) {
        case NGHTTP2_HEADERS.rawValue:
            self.headerBlockStartedAt = nil
            guard let stream = self.stream(header.stream_id) else { return 0 }
            if frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                guard stream.machine.receivedHead(endStream: endStream) == .record else { return 0 }
                self.record(.requestHead(header.stream_id))
                if endStream {
                    self.record(.requestEnd(header.stream_id, nil))
                }
            } else if stream.machine.receivedTrailers(endStream: endStream) == .record {
                // Trailers (nghttp2 insists they end the stream).
                let trailers = stream.trailers
                stream.trailers = nil
                self.record(.requestEnd(header.stream_id, trailers))
            }
        case NGHTTP2_DATA.rawValue:
            if endStream, let stream = self.stream(header.stream_id), stream.machine.receivedEndStream() == .record {
                self.record(.requestEnd(header.stream_id, nil))
            }
        default:
            break
        }
        return 0
    }

    package func receivedData(stream id: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard let stream = self.stream(id), stream.machine.receivedData() == .record else {
            // Nobody will read it: only the connection window needs it back.
            self.connectionConsumePending += bytes.count
            return 0
        }
        stream.unconsumed += bytes.count
        stream.lastInboundAt = self.roundStartedAt
        // Consecutive chunks for the same stream become one body part.
        if let last = self.events.last, case .requestBody(id, var buffer) = last {
            self.events.removeLast()
            buffer.writeBytes(bytes)
            self.record(.requestBody(id, buffer))
        } else {
            var buffer = self.allocator.buffer(capacity: bytes.count)
            buffer.writeBytes(bytes)
            self.record(.requestBody(id, buffer))
        }
        return 0
    }

    package func streamClosed(_ id: Int32, code: UInt32) -> Int32 {
        if id == self.headerBlockStream, self.headerBlockEndsInLastFrame {
            // The block in progress was this stream's and its last frame (END_HEADERS) had begun: nghttp2
            // rejected the block and reset the stream, which it does only once it has read the block (the
            // RST_STREAM goes out after mem_recv returned). Without this, a rejected block would keep the
            // header read timeout running and end the whole connection, healthy streams and all. A block
            // rejected before its END_HEADERS frame began keeps the timeout until the next frame begins: the
            // client still owes nghttp2 CONTINUATION frames, and nothing else can be read until they come.
            self.headerBlockStartedAt = nil
        }
        guard let stream = self.stream(id) else { return 0 }
        stream.machine.closedByNghttp2()
        // Keeping the capacity: the state goes with the stream, and `removeAll()` would allocate a new, empty
        // backing store for every stream that closes.
        stream.body.removeAll(keepingCapacity: true)
        stream.queuedBytes = 0
        self.record(.streamClosed(id, HTTP2ErrorCode(code)))
        return 0
    }

    func sentFrame(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let header = frame.pointee.hd
        let endStream = UInt32(header.flags) & NGHTTP2_FLAG_END_STREAM.rawValue != 0
        switch UInt32(header.type) {
        case NGHTTP2_RST_STREAM.rawValue:
            // Every reset the gateway sends for a reason other than "no error" costs the client nothing to
            // provoke and may leave work running behind a closed stream (MadeYouReset): rate-limited.
            let code = frame.pointee.rst_stream.error_code
            if code != HTTP2ErrorCode.noError.rawValue,
                case .enhanceYourCalm(let tripped) = self.heuristics.record(.serverReset, now: self.roundStartedAt)
            {
                self.calm = tripped
                self.scheduleProcessing()
            }
        case NGHTTP2_GOAWAY.rawValue:
            self.sentGoaway(frame.pointee.goaway)
        case NGHTTP2_DATA.rawValue, NGHTTP2_HEADERS.rawValue:
            if UInt32(header.type) == NGHTTP2_DATA.rawValue, header.length > 0 {
                self.heuristics.sentDataFrame(now: self.roundStartedAt)
            }
            if endStream, let stream = self.stream(header.stream_id), stream.machine.sentEndStream() == .markDirty {
                // A complete response before the complete request: the client is asked to stop sending
                // (RFC 9113 §8.1), next round.
                self.markDirty(stream)
            }
        default:
            break
        }
        return 0
    }

    /// A GOAWAY went out. One with an error code ends the connection because of the client, and nghttp2 sends
    /// some on its own (a SETTINGS frame with too many entries, an HPACK table size update over the limit, a
    /// protocol error in a frame) while `mem_recv` still returns success: this callback is the only place
    /// the codec learns of those, so the warning is written here. A flood the codec's own limits caught was
    /// logged already (``actOnCalm``). The cause is nghttp2's debug data (its own fixed text, never the
    /// client's bytes), or what the codec recorded, or the code alone.
    private func sentGoaway(_ goaway: nghttp2_goaway) {
        let code = HTTP2ErrorCode(goaway.error_code)
        guard code != .noError, self.calm == nil else { return }
        var cause = self.goawayCause ?? ""
        if let data = goaway.opaque_data, goaway.opaque_data_len > 0 {
            let bytes = UnsafeBufferPointer(start: data, count: min(goaway.opaque_data_len, 200))
            cause = String(decoding: bytes.map { $0 >= 0x20 && $0 < 0x7f ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
        }
        if cause.isEmpty {
            cause = code == .compressionError ? "HPACK decoding failed (a malformed block or a table size update over the limit)" : "nghttp2 gave no reason"
        }
        self.logger.warning(
            "HTTP/2 connection ended with GOAWAY",
            metadata: ["code": "\(code)", "cause": "\(cause)", "last_stream": "\(goaway.last_stream_id)"]
        )
    }

    /// Records an event for the handlers and makes sure a round delivers it.
    package func record(_ event: Event) {
        self.events.append(event)
        self.scheduleProcessing()
    }
}

// MARK: The C callbacks: check the pointers, find the codec, call the Swift method.

private func codec(_ userData: UnsafeMutableRawPointer?) -> HTTP2ServerCodec? {
    userData.map { Unmanaged<HTTP2ServerCodec>.fromOpaque($0).takeUnretainedValue() }
}

func onBeginFrame(
    _ session: OpaquePointer?,
    _ header: UnsafePointer<nghttp2_frame_hd>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let header, let codec = codec(userData) else { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
    return codec.receivedFrameHeader(header.pointee)
}

func onBeginHeaders(
    _ session: OpaquePointer?,
    _ frame: UnsafePointer<nghttp2_frame>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, let codec = codec(userData) else { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
    return codec.beganHeaders(frame)
}

func onHeader(
    _ session: OpaquePointer?,
    _ frame: UnsafePointer<nghttp2_frame>?,
    _ name: UnsafePointer<UInt8>?,
    _ nameLength: Int,
    _ value: UnsafePointer<UInt8>?,
    _ valueLength: Int,
    _ flags: UInt8,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, let codec = codec(userData) else { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
    return codec.receivedHeader(
        frame,
        name: UnsafeRawBufferPointer(start: name, count: nameLength),
        value: UnsafeRawBufferPointer(start: value, count: valueLength)
    )
}

func onFrameReceived(
    _ session: OpaquePointer?,
    _ frame: UnsafePointer<nghttp2_frame>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, let codec = codec(userData) else { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
    return codec.receivedFrame(frame)
}

func onDataChunk(
    _ session: OpaquePointer?,
    _ flags: UInt8,
    _ streamID: Int32,
    _ data: UnsafePointer<UInt8>?,
    _ length: Int,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let codec = codec(userData) else { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
    return codec.receivedData(stream: streamID, UnsafeRawBufferPointer(start: data, count: length))
}

func onStreamClose(
    _ session: OpaquePointer?,
    _ streamID: Int32,
    _ errorCode: UInt32,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let codec = codec(userData) else { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
    return codec.streamClosed(streamID, code: errorCode)
}

func onFrameSent(
    _ session: OpaquePointer?,
    _ frame: UnsafePointer<nghttp2_frame>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, let codec = codec(userData) else { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
    return codec.sentFrame(frame)
}

func onInvalidFrame(
    _ session: OpaquePointer?,
    _ frame: UnsafePointer<nghttp2_frame>?,
    _ libraryError: Int32,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, let codec = codec(userData) else { return 0 }
    codec.logger.debug(
        "HTTP/2 invalid frame",
        metadata: [
            "type": "\(frame.pointee.hd.type)", "stream": "\(frame.pointee.hd.stream_id)",
            "nghttp2_error": "\(NGHTTP2ServerSession.describe(libraryError))",
        ]
    )
    return 0
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateNghttp2
import NIOCore

/// A session could not be made (out of memory, in practice).
struct BenchHTTP2SessionError: Error, CustomStringConvertible {
    var call: String
    var code: Int32
    var description: String { "\(self.call) failed: \(String(cString: nghttp2_strerror(self.code)))" }
}

// MARK: Session setup

extension BenchHTTP2Handler {
    /// Creates the client session with its callbacks and queues the client SETTINGS (nghttp2 sends the
    /// connection preface before them on the first `mem_send`).
    ///
    /// The session's user data is the handler, unretained: the handler owns the session and deletes it before
    /// it goes away, so the pointer is valid whenever nghttp2 can call back.
    func makeSession() throws(BenchHTTP2SessionError) -> OpaquePointer {
        var callbacks: OpaquePointer?
        var result = nghttp2_session_callbacks_new(&callbacks)
        guard result == 0, let callbacks else {
            throw BenchHTTP2SessionError(call: "nghttp2_session_callbacks_new", code: result)
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameReceived)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        // Response bodies are not looked at (and no data-chunk callback is needed for that): nghttp2's
        // automatic WINDOW_UPDATEs give the windows back. No error callback: its messages can quote headers.

        var session: OpaquePointer?
        result = nghttp2_session_client_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque())
        guard result == 0, let session else {
            throw BenchHTTP2SessionError(call: "nghttp2_session_client_new", code: result)
        }
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)
        ]
        result = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        guard result == 0 else {
            nghttp2_session_del(session)
            throw BenchHTTP2SessionError(call: "nghttp2_submit_settings", code: result)
        }
        return session
    }
}

// MARK: What the callbacks record. They never call nghttp2 and never call the owner.

extension BenchHTTP2Handler {
    func receivedHeader(stream id: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        // Only `:status` matters; nghttp2 validated the header block (HTTP messaging checks are on).
        guard name.count == 7, name.elementsEqual(":status".utf8), self.streams[id] != nil else { return }
        var status = 0
        for byte in value {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), status < 1000 else { return }
            status = status * 10 + Int(byte - UInt8(ascii: "0"))
        }
        self.streams[id]?.status = status
    }

    func receivedFrame(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        switch UInt32(header.type) {
        case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
            if UInt32(header.flags) & NGHTTP2_FLAG_END_STREAM.rawValue != 0, self.streams[header.stream_id] != nil {
                self.streams[header.stream_id]?.ended = true
            }
        case NGHTTP2_GOAWAY.rawValue:
            self.events.append(.goaway(code: frame.pointee.goaway.error_code))
        default:
            break
        }
    }

    func streamClosed(_ id: Int32, code: UInt32) {
        self.events.append(.streamClosed(id, code: code))
    }

    /// The request body's data provider (called by nghttp2 during `mem_send`): copies what is left, then EOF.
    func pullRequestBody(
        stream id: Int32,
        into destination: UnsafeMutablePointer<UInt8>,
        length: Int,
        flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard var body = self.streams[id]?.body else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        let count = min(length, body.readableBytes)
        if count > 0 {
            body.withUnsafeReadableBytes { bytes in
                UnsafeMutableRawPointer(destination).copyMemory(from: bytes.baseAddress!, byteCount: count)
            }
        }
        body.moveReaderIndex(forwardBy: count)
        if body.readableBytes == 0 {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            self.streams[id]?.body = nil
        } else {
            self.streams[id]?.body = body
        }
        return count
    }
}

// MARK: The C callbacks: check the pointers, find the handler, call the Swift method.

private func handler(_ userData: UnsafeMutableRawPointer?) -> BenchHTTP2Handler? {
    userData.map { Unmanaged<BenchHTTP2Handler>.fromOpaque($0).takeUnretainedValue() }
}

private func onHeader(
    _ session: OpaquePointer?,
    _ frame: UnsafePointer<nghttp2_frame>?,
    _ name: UnsafePointer<UInt8>?,
    _ nameLength: Int,
    _ value: UnsafePointer<UInt8>?,
    _ valueLength: Int,
    _ flags: UInt8,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, let handler = handler(userData) else { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
    handler.receivedHeader(
        stream: frame.pointee.hd.stream_id,
        name: UnsafeRawBufferPointer(start: name, count: nameLength),
        value: UnsafeRawBufferPointer(start: value, count: valueLength)
    )
    return 0
}

private func onFrameReceived(
    _ session: OpaquePointer?,
    _ frame: UnsafePointer<nghttp2_frame>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, let handler = handler(userData) else { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
    handler.receivedFrame(frame)
    return 0
}

private func onStreamClose(
    _ session: OpaquePointer?,
    _ streamID: Int32,
    _ errorCode: UInt32,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let handler = handler(userData) else { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
    handler.streamClosed(streamID, code: errorCode)
    return 0
}

/// The data provider every request body is pulled through (source.ptr is unused: the body is found by id).
func readRequestBody(
    _ session: OpaquePointer?,
    _ streamID: Int32,
    _ buffer: UnsafeMutablePointer<UInt8>?,
    _ length: Int,
    _ flags: UnsafeMutablePointer<UInt32>?,
    _ source: UnsafeMutablePointer<nghttp2_data_source>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int {
    guard let buffer, let flags, let handler = handler(userData) else {
        return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
    }
    return handler.pullRequestBody(stream: streamID, into: buffer, length: length, flags: flags)
}

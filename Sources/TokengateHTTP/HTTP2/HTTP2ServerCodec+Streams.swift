//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateNghttp2
import Logging
import CTokengateShims
import NIOCore
import NIOHTTP1

// MARK: What HTTP2ServerStream forwards: queue the write, mark the stream, let the next round submit it.

extension HTTP2ServerCodec {
    package func streamWriteHead(_ id: Int32, _ block: HTTP2HeaderBlock) {
        guard let stream = self.stream(id), !stream.closed, stream.resetRequested == nil, !stream.headWritten else {
            return
        }
        stream.headWritten = true
        stream.pendingHead = block
        self.markDirty(stream)
    }

    /// A backend's head, written into the storage of an earlier response's block when one is kept.
    package func streamWriteHead(_ id: Int32, fromUpstream head: UpstreamResponseHead, close: Bool, hsts: String?) {
        var block = self.spares.takeHeaderBlock() ?? HTTP2HeaderBlock()
        guard block.writeResponse(fromUpstream: head, close: close, hsts: hsts) else { return }  // 1xx: not forwarded.
        self.streamWriteHead(id, block)
    }

    /// Queues `100 Continue` for a stream whose final head is not written yet and whose request still sends.
    package func streamWriteContinue(_ id: Int32) {
        guard let stream = self.stream(id), !stream.closed, stream.resetRequested == nil, !stream.headWritten,
            !stream.remoteEnded
        else { return }
        stream.continueDue = true
        self.markDirty(stream)
    }

    package func streamWriteBody(_ id: Int32, _ buffer: ByteBuffer) {
        guard let stream = self.stream(id), !stream.closed, stream.resetRequested == nil, buffer.readableBytes > 0
        else { return }
        guard stream.headWritten, !stream.endWritten else {
            preconditionFailure("HTTP/2 stream \(id): a body part was written before the head or after the end")
        }
        if stream.answersWithoutContent { return }
        stream.body.append(buffer)
        stream.queuedBytes += buffer.readableBytes
        if stream.writable, stream.queuedBytes > self.configuration.maxQueuedBytesPerStream {
            stream.writable = false
            self.record(.writabilityChanged(id, false))
        }
        self.markDirty(stream)
    }

    package func streamWriteEnd(_ id: Int32, _ trailers: HTTPHeaders?) {
        guard let stream = self.stream(id), !stream.closed, stream.resetRequested == nil, !stream.endWritten else {
            return
        }
        guard stream.headWritten else {
            // An end without a head is a bug in the caller; the client must not see a half response.
            stream.resetRequested = .internalError
            self.markDirty(stream)
            return
        }
        stream.endWritten = true
        stream.pendingTrailers = trailers.flatMap { HTTP2HeaderBlock.trailers($0) }
        self.markDirty(stream)
    }

    package func streamReset(_ id: Int32, code: HTTP2ErrorCode) {
        guard let stream = self.stream(id), !stream.closed, stream.resetRequested == nil else { return }
        stream.handler = nil  // It asked: it is not told again.
        stream.resetRequested = code
        stream.body.removeAll(keepingCapacity: true)
        stream.queuedBytes = 0
        self.markDirty(stream)
    }

    package func streamConsumed(_ id: Int32, bytes: Int) {
        guard bytes > 0, let stream = self.stream(id) else { return }
        let count = min(bytes, stream.unconsumed)
        guard count > 0 else { return }
        stream.unconsumed -= count
        stream.consumePending += count
        self.markDirty(stream)
    }

    /// nghttp2's window getters only read the session, so this may be asked at any time.
    package func streamReceiveWindowShut(_ id: Int32) -> Bool {
        guard let session = self.session, self.stream(id) != nil else { return false }
        return nghttp2_session_get_local_window_size(session) <= 0
            || nghttp2_session_get_stream_local_window_size(session, id) <= 0
    }

    package func streamIsWritable(_ id: Int32) -> Bool {
        guard let stream = self.stream(id), !stream.closed, stream.resetRequested == nil else { return false }
        return stream.writable
    }

    /// Submits a response head (with or without a body to pull) or trailers through the C shim.
    package static func submit(
        _ block: HTTP2HeaderBlock,
        session: OpaquePointer,
        stream id: Int32,
        response: Bool,
        withBody: Bool
    ) -> Int32 {
        block.withFlatFields { bytes, lengths, neverIndex in
            if response {
                CTokengateShims_nghttp2_submit_response(
                    session, id, bytes, lengths, neverIndex, block.count, withBody ? readResponseData : nil
                )
            } else {
                CTokengateShims_nghttp2_submit_trailer(session, id, bytes, lengths, neverIndex, block.count)
            }
        }
    }

    /// The data provider's pull (called by nghttp2 during `mem_send`): copies up to `length` queued bytes.
    ///
    /// Nothing queued and no end yet → NGHTTP2_ERR_DEFERRED (the next write resumes the stream). All queued
    /// and the end written → EOF, with NO_END_STREAM when trailers follow (they are submitted next round:
    /// never from here).
    package func pullResponseData(
        stream id: Int32,
        into destination: UnsafeMutablePointer<UInt8>,
        length: Int,
        flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let stream = self.stream(id), !stream.closed else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        var written = 0
        while written < length, !stream.body.isEmpty {
            let index = stream.body.startIndex
            let count = stream.body[index].withUnsafeReadableBytes { source in
                let count = min(source.count, length - written)
                UnsafeMutableRawPointer(destination + written).copyMemory(from: source.baseAddress!, byteCount: count)
                return count
            }
            stream.body[index].moveReaderIndex(forwardBy: count)
            if stream.body[index].readableBytes == 0 {
                stream.body.removeFirst()
            }
            written += count
        }
        stream.queuedBytes -= written
        if !stream.writable, stream.queuedBytes <= self.configuration.maxQueuedBytesPerStream / 2 {
            stream.writable = true
            self.record(.writabilityChanged(id, true))
        }
        if stream.body.isEmpty, stream.endWritten {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            if stream.pendingTrailers != nil {
                flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                stream.trailersDue = true
                self.markDirty(stream)
            }
            return written
        }
        if written == 0 {
            stream.deferred = true
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
        return written
    }
}

/// nghttp2's data source read callback: finds the codec through the session's user data and the stream by
/// id (the provider's `source` is unused).
private func readResponseData(
    _ session: OpaquePointer?,
    _ streamID: Int32,
    _ buffer: UnsafeMutablePointer<UInt8>?,
    _ length: Int,
    _ flags: UnsafeMutablePointer<UInt32>?,
    _ source: UnsafeMutablePointer<nghttp2_data_source>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int {
    guard let buffer, let flags, let userData else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    let codec = Unmanaged<HTTP2ServerCodec>.fromOpaque(userData).takeUnretainedValue()
    return codec.pullResponseData(stream: streamID, into: buffer, length: length, flags: flags)
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateNghttp2
import Logging
internal import CTokengateShims
import NIOCore
import NIOHTTP1

// MARK: What HTTP2ServerStream forwards: queue the write, mark the stream, let the next round submit it.

extension HTTP2ServerCodec {
    package func streamWriteHead(_ id: Int32, _ block: HTTP2HeaderBlock) {
        guard let stream = self.stream(id) else { return }
        switch stream.machine.writeHead() {
        case .queue:
            stream.pendingHead = block
            self.markDirty(stream)
        case .drop:
            break
        case .reset:
            self.resetForIllegalWrite(stream, "a second response head")
        }
    }

    /// The handler wrote what the stream's state does not allow (its bug, never the client's doing): the
    /// machine turned it into RST_STREAM INTERNAL_ERROR, submitted next round; what was queued is dropped.
    private func resetForIllegalWrite(_ stream: HTTP2StreamState, _ what: StaticString) {
        self.logger.debug("HTTP/2 stream reset: \(what) was written", metadata: ["stream": "\(stream.id)"])
        stream.body.removeAll(keepingCapacity: true)
        stream.queuedBytes = 0
        self.markDirty(stream)
    }

    /// A backend's head, written into the storage of an earlier response's block when one is kept.
    package func streamWriteHead(
        _ id: Int32, fromUpstream head: UpstreamResponseHead, close: Bool, hsts: String?, added: [ResponseField] = []
    ) {
        var block = self.spares.takeHeaderBlock() ?? HTTP2HeaderBlock()
        guard block.writeResponse(fromUpstream: head, close: close, hsts: hsts, added: added) else { return }  // 1xx: not forwarded.
        self.streamWriteHead(id, block)
    }

    /// Queues `100 Continue` for a stream whose final head is not written yet and whose request still sends.
    package func streamWriteContinue(_ id: Int32) {
        guard let stream = self.stream(id), stream.machine.writeContinue() == .queue else { return }
        self.markDirty(stream)
    }

    package func streamWriteBody(_ id: Int32, _ buffer: ByteBuffer) {
        guard buffer.readableBytes > 0, let stream = self.stream(id) else { return }
        let queued = stream.queuedBytes + buffer.readableBytes
        if queued > self.configuration.maxQueuedBytesPerStream, stream.granted == 0 {
            self.takeGrant(stream)
        }
        switch stream.machine.writeBody(queuedBytes: queued, limit: self.configuration.maxQueuedBytesPerStream + stream.granted) {
        case .queue(let becameUnwritable):
            stream.body.append(buffer)
            stream.queuedBytes = queued
            if becameUnwritable {
                self.record(.writabilityChanged(id, false))
            }
            self.markDirty(stream)
        case .drop:
            break
        case .reset:
            self.resetForIllegalWrite(stream, "a body part before the head or after the end")
        }
    }

    package func streamWriteEnd(_ id: Int32, _ trailers: HTTPHeaders?) {
        guard let stream = self.stream(id) else { return }
        let block = trailers.flatMap { HTTP2HeaderBlock.trailers($0) }
        switch stream.machine.writeEnd(trailers: block != nil) {
        case .queue:
            stream.pendingTrailers = block
            self.markDirty(stream)
        case .drop:
            break
        case .reset:
            // The client must not see half a response.
            self.resetForIllegalWrite(stream, "an end before the head")
        }
    }

    package func streamReset(_ id: Int32, code: HTTP2ErrorCode) {
        guard let stream = self.stream(id), stream.machine.handlerReset(code) == .reset else { return }
        stream.handler = nil  // It asked: it is not told again.
        stream.body.removeAll(keepingCapacity: true)
        stream.queuedBytes = 0
        self.markDirty(stream)
    }

    /// ``HTTP2StreamStateMachine/withdrawHead()``: the queued head and body are dropped when it says so.
    package func streamWithdrawHead(_ id: Int32) -> Bool {
        guard let stream = self.stream(id), stream.machine.withdrawHead() else { return false }
        if let head = stream.pendingHead.take() {
            self.spares.giveBack(headerBlock: head)
        }
        stream.body.removeAll(keepingCapacity: true)
        stream.queuedBytes = 0
        return true
    }

    package func streamConsumed(_ id: Int32, bytes: Int) {
        guard bytes > 0, let stream = self.stream(id) else { return }
        let count = min(bytes, stream.unconsumed)
        guard count > 0 else { return }
        stream.unconsumed -= count
        stream.consumePending += count
        self.markDirty(stream)
    }

    /// A stream whose client fell behind (its queue passed ``HTTP2ServerConfiguration/maxQueuedBytesPerStream``)
    /// takes room from the response buffer budget: what is left of the connection's share, when the budget has it.
    private func takeGrant(_ stream: HTTP2StreamState) {
        guard let budget = self.configuration.responseBuffers else { return }
        let bytes = self.configuration.responseBufferPerConnection - self.grantedBytes
        guard bytes > 0, budget.take(bytes) else { return }
        stream.granted = bytes
        self.grantedBytes += bytes
    }

    /// The stream's grant goes back (its queue is empty, or it is gone).
    func giveBackGrant(_ stream: HTTP2StreamState) {
        guard stream.granted > 0 else { return }
        self.configuration.responseBuffers?.giveBack(stream.granted)
        self.grantedBytes -= stream.granted
        stream.granted = 0
    }

    /// Response bytes queued on stream `id` for its client (those nghttp2 has not taken yet, for the client's
    /// flow-control window or the connection's socket).
    package func streamQueuedBytes(_ id: Int32) -> Int {
        self.stream(id)?.queuedBytes ?? 0
    }

    /// nghttp2's window getters only read the session, so this may be asked at any time.
    package func streamReceiveWindowShut(_ id: Int32) -> Bool {
        guard let session = self.session, self.stream(id) != nil else { return false }
        return session.connectionWindow <= 0 || session.window(stream: id) <= 0
    }

    package func streamIsWritable(_ id: Int32) -> Bool {
        self.stream(id)?.machine.isWritable ?? false
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
        guard let stream = self.stream(id), !stream.machine.isClosed else {
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
        if stream.machine.bodyDrained(queuedBytes: stream.queuedBytes, limit: self.configuration.maxQueuedBytesPerStream + stream.granted) {
            self.record(.writabilityChanged(id, true))
        }
        if stream.queuedBytes == 0, stream.granted > 0 {
            self.giveBackGrant(stream)  // Writable already: an empty queue is below any limit.
        }
        switch stream.machine.pulled(copied: written, bodyIsEmpty: stream.body.isEmpty) {
        case .data:
            return written
        case .deferred:
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        case .endOfData:
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return written
        case .endOfDataBeforeTrailers:
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue | NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
            self.markDirty(stream)
            return written
        case .fail:
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
    }
}

/// nghttp2's data source read callback: finds the codec through the session's user data and the stream by
/// id (the provider's `source` is unused).
func readResponseData(
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

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// One HTTP/2 stream as the request logic sees it: a handle through which it writes the response.
///
/// The handle holds no state of its own: every call is forwarded to the ``HTTP2ServerCodec`` that created
/// it, which queues the write and submits it to nghttp2 on its next processing round (at once when called
/// from inside an ``HTTP2StreamHandler`` callback, otherwise on the next event-loop tick, so a burst of
/// writes becomes one network write). Once the stream is closed and removed, writes are dropped.
///
/// Must only be used on the connection's event loop.
package final class HTTP2ServerStream {
    /// The HTTP/2 stream identifier (odd, client-initiated).
    package let id: Int32
    /// The codec that made this handle, until it removes the stream (``detach()``). Strong, not `weak`: a weak
    /// reference gives the codec a side table, after which every retain and release of it — several in each
    /// of nghttp2's callbacks, per frame and per header field — takes the runtime's slow path. The cycle this
    /// makes (codec → stream state → handle → codec) is broken by the codec, which detaches every handle it
    /// removes, one at a time as streams close and all at once when the connection goes.
    private var codec: HTTP2ServerCodec?

    package init(id: Int32, codec: HTTP2ServerCodec) {
        self.id = id
        self.codec = codec
    }

    /// The stream is gone from the codec: from now on every call is dropped, and the codec is not kept alive.
    package func detach() {
        self.codec = nil
    }

    /// The response head. 1xx heads are dropped (informational responses are not forwarded); hop-by-hop
    /// fields (`connection`, `transfer-encoding`, `keep-alive`, …) are removed and names lowercased.
    package func writeHead(_ head: HTTPResponseHead) {
        guard let block = HTTP2HeaderBlock.response(head) else { return }  // 1xx: not forwarded.
        self.writeHead(block)
    }

    /// A response head already in HTTP/2's form.
    package func writeHead(_ block: HTTP2HeaderBlock) {
        self.codec?.streamWriteHead(self.id, block)
    }

    /// `100 Continue`, the answer to `expect: 100-continue` (the only interim response the gateway sends: a
    /// backend's 1xx are not forwarded).
    package func writeContinue() {
        self.codec?.streamWriteContinue(self.id)
    }

    /// A backend's response head (``HTTP2HeaderBlock/writeResponse(fromUpstream:close:hsts:)``); 1xx heads are dropped.
    package func writeHead(fromUpstream head: UpstreamResponseHead, close: Bool, hsts: String?, added: [ResponseField] = []) {
        self.codec?.streamWriteHead(self.id, fromUpstream: head, close: close, hsts: hsts, added: added)
    }

    /// Queues response body bytes. Check ``isWritable`` afterwards: above the per-stream limit the caller
    /// should stop reading from its source until ``HTTP2StreamHandler/writabilityChanged(_:)`` says true.
    package func writeBody(_ buffer: ByteBuffer) {
        self.codec?.streamWriteBody(self.id, buffer)
    }

    /// Ends the response, with trailers when `trailers` is non-empty.
    package func writeEnd(_ trailers: HTTPHeaders?) {
        self.codec?.streamWriteEnd(self.id, trailers)
    }

    /// Takes back the response head (and body) written but not yet sent, so that another response can take its
    /// place; `false` when it has gone out already (or there is none), and the response can only be cut.
    package func withdrawHead() -> Bool {
        self.codec?.streamWithdrawHead(self.id) ?? false
    }

    /// Resets the stream (RST_STREAM with `code`); queued response bytes are dropped.
    package func reset(code: HTTP2ErrorCode) {
        self.codec?.streamReset(self.id, code: code)
    }

    /// Reports request body bytes as passed on (to the upstream): only now may the client send more, with a
    /// WINDOW_UPDATE for the stream and the connection. This is how a slow backend slows the client down.
    package func consumed(bytes: Int) {
        self.codec?.streamConsumed(self.id, bytes: bytes)
    }

    /// The client may send no more request body now: the stream's receive window or the connection's is
    /// used up (bytes the gateway has not passed on yet, this stream's or others').
    package var isReceiveWindowShut: Bool {
        self.codec?.streamReceiveWindowShut(self.id) ?? false
    }

    /// False while more than the per-stream limit of response bytes waits for the client.
    package var isWritable: Bool {
        self.codec?.streamIsWritable(self.id) ?? false
    }

    /// Response bytes written and not yet taken by nghttp2: waiting for the client's flow-control window, or
    /// for the connection's socket.
    package var queuedResponseBytes: Int {
        self.codec?.streamQueuedBytes(self.id) ?? 0
    }

    /// The connection's allocator, for response buffers.
    package var allocator: ByteBufferAllocator {
        self.codec?.allocator ?? ByteBufferAllocator()
    }
}

@available(*, unavailable)
extension HTTP2ServerStream: Sendable {}

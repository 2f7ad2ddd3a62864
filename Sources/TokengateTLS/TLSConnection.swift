//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL
internal import CTokengateShims
public import NIOCore

/// One TLS connection: owns the `SSL*` and is, at the same time, its BIO (ciphertext in and out).
///
/// ### Why a custom ByteBuffer BIO and not `BIO_s_mem`
/// A memory BIO pair costs one extra copy per direction: received ciphertext is copied from NIO's ByteBuffer
/// into the BIO's own buffer before OpenSSL copies it again into its record buffer, and produced ciphertext is
/// written into the BIO's buffer and then copied out into a ByteBuffer for the channel. With a custom BIO
/// method OpenSSL reads straight out of the ByteBuffer the channel gave us (we only hold a reference; moving
/// the reader index never copies), and writes records straight into the ByteBuffer that becomes the network
/// write, pre-sized for the whole flush so it is allocated once. The cost is ~60 lines of callback code below.
///
/// ### Ownership and lifetime
/// The BIO's data pointer is `self`, unretained: the BIO belongs to the SSL (`SSL_set_bio`) and the SSL is
/// freed in `deinit`, so the BIO can never outlive the object it points to, and no retain cycle forms. Every
/// OpenSSL call on the connection goes through a method of this object, so `self` is alive whenever a BIO
/// callback runs. The handler frees the connection in `handlerRemoved` by dropping its only reference.
///
/// ### Error handling
/// Every SSL call follows the same order: `ERR_clear_error()`, the call, then `SSL_get_error()` on its return
/// value before any other OpenSSL call on this thread (the error queue is thread-local and `SSL_get_error`
/// consults it). `SSL_ERROR_WANT_READ`/`WANT_WRITE` mean "needs more bytes" and map to `.incomplete`.
///
/// ### Outside a channel
/// ``TLSHandler`` drives it from NIO channel events, but nothing here needs a channel: the type is public so that
/// a driver on another event loop (the epoll floor proxy in Benchmarks/) terminates TLS through the very same
/// code, created with ``init(server:allocator:)``. Such a driver owns the same duties the handler has: call
/// everything on one thread, loop ``read(into:)`` until ``ReadResult/wantMore`` or no ``hasPendingInput``, and
/// send ``takeOutbound()`` after every step.
public final class TLSConnection {
    /// Result of one OpenSSL step, after mapping `SSL_get_error`.
    public enum StepResult {
        case incomplete
        case complete
        case failed(TLSError)
    }

    /// Result of one `SSL_read`.
    public enum ReadResult {
        case bytes(Int)
        case wantMore
        case receivedCloseNotify
        case failed(TLSError)
    }

    let ssl: OpaquePointer
    let isServer: Bool
    private let allocator: ByteBufferAllocator
    /// Ciphertext received from the network and not yet consumed by OpenSSL.
    private var inbound: ByteBuffer?
    /// Small plaintext writes gathered into one record (see ``encrypt(_:)``). Allocated on the first small
    /// write of a flush, sized for that flush (at most one record), and dropped as soon as it is encrypted:
    /// an idle keep-alive connection holds no staging memory. (Keeping one 16 KiB buffer per connection for
    /// reuse cost 16 KiB of every idle connection, and the reuse never happened anyway: `clear()` ran while a
    /// second reference was alive, so each flush allocated a fresh 16 KiB buffer by copy-on-write.)
    private var staging: ByteBuffer?
    /// Capacity for the next `staging` (set before a flush): the flush's plaintext, at most one record.
    private var stagingCapacityHint = 0
    /// Ciphertext OpenSSL produced and we have not handed to the channel yet.
    private var outbound: ByteBuffer?
    /// How big the next `outbound` should be when it is first allocated (set before a flush).
    private var outboundCapacityHint = 0
    /// The last non-close_notify alert sent or received, for error messages (`handshake_failure`).
    fileprivate var lastAlert: String?

    /// Creates the `SSL` from `sslContext`, or returns `nil` when OpenSSL is out of memory.
    init?(sslContext: OpaquePointer, isServer: Bool, allocator: ByteBufferAllocator) {
        ERR_clear_error()
        guard let ssl = SSL_new(sslContext) else {
            ERR_clear_error()
            return nil
        }
        guard let bio = BIO_new(tokengateBIOMethod) else {
            SSL_free(ssl)
            ERR_clear_error()
            return nil
        }
        self.ssl = ssl
        self.isServer = isServer
        self.allocator = allocator
        BIO_set_data(bio, Unmanaged.passUnretained(self).toOpaque())
        // One BIO for both directions; SSL_set_bio takes over our single reference.
        SSL_set_bio(ssl, bio, bio)
        SSL_set_info_callback(ssl, tokengateInfoCallback)
        if isServer {
            SSL_set_accept_state(ssl)
        } else {
            SSL_set_connect_state(ssl)
        }
    }

    /// A server-side connection on `context`'s default certificate (SNI may move it during the handshake), for a
    /// driver other than ``TLSHandler``. Returns `nil` when OpenSSL is out of memory.
    public convenience init?(server context: TLSServerContext, allocator: ByteBufferAllocator) {
        self.init(sslContext: context.contexts[0], isServer: true, allocator: allocator)
        // The SNI callback points at `context` unretained (see TLSServerContext.init): held here, as the handler
        // holds it, so that the context outlives every SSL that can call back into it.
        self.serverContext = context
    }

    /// Keeps the server context alive for the SNI callback; set only by ``init(server:allocator:)``.
    private var serverContext: TLSServerContext?

    deinit {
        // Frees the BIO too; our destroy callback does not touch `self`.
        SSL_free(self.ssl)
    }

    // MARK: Ciphertext in and out.

    /// Hands received ciphertext to OpenSSL. Normally OpenSSL has consumed everything before the next read
    /// arrives (we always loop until WANT_READ), so this only keeps a reference; appending (a copy) only
    /// happens when bytes are still pending, e.g. after a failure or in the closing state.
    public func receive(_ buffer: ByteBuffer) {
        if var pending = self.inbound, pending.readableBytes > 0 {
            self.inbound = nil  // keep `pending` uniquely referenced so the append does not copy it first
            var buffer = buffer
            pending.writeBuffer(&buffer)
            self.inbound = pending
        } else {
            self.inbound = buffer
        }
    }

    /// Readable ciphertext not yet consumed.
    public var pendingInboundBytes: Int {
        self.inbound?.readableBytes ?? 0
    }

    /// Whether a further `SSL_read` could produce anything: ciphertext still in our BIO, or data OpenSSL has
    /// already pulled in (read-ahead) or decrypted but not returned. When neither, the next `SSL_read` would
    /// only return WANT_READ — after allocating and freeing its 16 KiB record buffer (`SSL_MODE_RELEASE_BUFFERS`
    /// gives it back whenever it is empty), which was one of the three 16 KiB allocations per request.
    public var hasPendingInput: Bool {
        self.pendingInboundBytes > 0 || SSL_has_pending(self.ssl) == 1
    }

    /// Drops unconsumed ciphertext (after a fatal error or once the connection is closed).
    public func discardInbound() {
        self.inbound = nil
    }

    /// Takes the ciphertext produced so far; the next OpenSSL write starts a new buffer.
    public func takeOutbound() -> ByteBuffer? {
        // The buffer leaves for the channel; keeping it would make the next BIO write copy-on-write it.
        defer { self.outbound = nil }
        guard let outbound = self.outbound, outbound.readableBytes > 0 else {
            return nil
        }
        TLSScratchBuffers.ciphertext.giveBack(outbound)
        return outbound
    }

    /// Sizes the next outgoing buffer so that `plaintextBytes` fit in one allocation once encrypted.
    public func reserveOutbound(plaintextBytes: Int) {
        let records = plaintextBytes / TLSPolicy.maxRecordPlaintext + 1
        self.outboundCapacityHint = plaintextBytes + records * TLSPolicy.maxRecordOverhead
        self.stagingCapacityHint = min(plaintextBytes, TLSPolicy.maxRecordPlaintext)
    }

    /// BIO read callback body: copies up to `count` bytes of received ciphertext into `destination`.
    fileprivate func bioRead(into destination: UnsafeMutablePointer<CChar>, count: Int, bio: OpaquePointer) -> Int32 {
        guard var inbound = self.inbound, inbound.readableBytes > 0 else {
            CTokengateShims_BIO_set_retry_read(bio)
            return -1
        }
        // Take the buffer out while reading so the struct stays uniquely referenced (no CoW on the indices).
        self.inbound = nil
        let copied = inbound.readWithUnsafeReadableBytes { source -> Int in
            let n = min(count, source.count)
            UnsafeMutableRawPointer(destination).copyMemory(from: source.baseAddress!, byteCount: n)
            return n
        }
        self.inbound = inbound.readableBytes > 0 ? inbound : nil
        return Int32(copied)
    }

    /// BIO write callback body: appends ciphertext to the outgoing buffer. Never asks OpenSSL to retry.
    fileprivate func bioWrite(from source: UnsafePointer<CChar>, count: Int) -> Int32 {
        let bytes = UnsafeRawBufferPointer(start: source, count: count)
        if self.outbound == nil {
            self.outbound = TLSScratchBuffers.ciphertext.take(
                allocator: self.allocator,
                minimumCapacity: max(count, self.outboundCapacityHint, 1024)
            )
            self.outboundCapacityHint = 0
        }
        self.outbound!.writeBytes(bytes)
        return Int32(count)
    }

    // MARK: SSL operations.

    /// One step of the handshake. Call ``takeOutbound()`` afterwards whatever the result: a flight or an
    /// alert may be waiting.
    public func doHandshake() -> StepResult {
        ERR_clear_error()
        let rc = SSL_do_handshake(self.ssl)
        if rc == 1 {
            return .complete
        }
        return self.classify(rc, code: .handshakeFailed)
    }

    /// Decrypts one record's worth of plaintext into `buffer`.
    public func read(into buffer: inout ByteBuffer) -> ReadResult {
        var rc: Int32 = 0
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 1024) { space in
            ERR_clear_error()
            rc = SSL_read(self.ssl, space.baseAddress, Int32(clamping: space.count))
            return rc > 0 ? Int(rc) : 0
        }
        if rc > 0 {
            return .bytes(Int(rc))
        }
        let error = SSL_get_error(self.ssl, rc)
        switch error {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            ERR_clear_error()
            return .wantMore
        case SSL_ERROR_ZERO_RETURN:
            ERR_clear_error()
            return .receivedCloseNotify
        default:
            return .failed(self.describeFailure(error, code: .readFailed))
        }
    }

    /// Writes up to this size are coalesced: an HTTP response's header block and a short body then travel in
    /// one record (one AEAD seal, 22–29 bytes of overhead) instead of one each. Larger writes go to
    /// `SSL_write` straight from the caller's buffer, without a copy.
    public static let coalescingLimit = 4096

    /// Encrypts `buffer`, possibly holding it back to share a record with the next small writes. Call
    /// ``finishEncrypting()`` after the last buffer of a flush.
    public func encrypt(_ buffer: ByteBuffer) -> StepResult {
        guard buffer.readableBytes <= Self.coalescingLimit else {
            if case .failed(let error) = self.finishEncrypting() {
                return .failed(error)
            }
            return self.write(buffer)
        }
        if let staging = self.staging, staging.readableBytes + buffer.readableBytes > TLSPolicy.maxRecordPlaintext {
            if case .failed(let error) = self.finishEncrypting() {
                return .failed(error)
            }
        }
        var buffer = buffer
        if self.staging == nil {
            // The hint may be short (a write without reserveOutbound); the buffer then grows as usual.
            self.staging = self.allocator.buffer(capacity: max(self.stagingCapacityHint, buffer.readableBytes))
        }
        self.staging!.writeBuffer(&buffer)
        return .complete
    }

    /// Encrypts whatever ``encrypt(_:)`` held back, and frees the staging buffer.
    public func finishEncrypting() -> StepResult {
        guard let staging = self.staging else {
            return .complete
        }
        self.staging = nil
        guard staging.readableBytes > 0 else {
            return .complete
        }
        return self.write(staging)
    }

    /// Encrypts all of `buffer`, at most ``TLSPolicy/maxRecordPlaintext`` bytes per `SSL_write` so each call
    /// produces exactly one record.
    public func write(_ buffer: ByteBuffer) -> StepResult {
        buffer.withUnsafeReadableBytes { bytes -> StepResult in
            var offset = 0
            while offset < bytes.count {
                let length = min(TLSPolicy.maxRecordPlaintext, bytes.count - offset)
                ERR_clear_error()
                let rc = SSL_write(self.ssl, bytes.baseAddress! + offset, Int32(length))
                guard rc > 0 else {
                    // Our BIO never blocks, so even WANT_* here means the connection is unusable.
                    return .failed(self.describeFailure(SSL_get_error(self.ssl, rc), code: .writeFailed))
                }
                offset += Int(rc)
            }
            return .complete
        }
    }

    /// Sends close_notify (first call) and reports whether the peer's close_notify was already received.
    public func shutdown() -> StepResult {
        ERR_clear_error()
        let rc = SSL_shutdown(self.ssl)
        switch rc {
        case 1:
            return .complete
        case 0:
            return .incomplete
        default:
            return self.classify(rc, code: .writeFailed)
        }
    }

    private func classify(_ rc: Int32, code: TLSError.Code) -> StepResult {
        let error = SSL_get_error(self.ssl, rc)
        switch error {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            ERR_clear_error()
            return .incomplete
        default:
            return .failed(self.describeFailure(error, code: code))
        }
    }

    /// Builds the error text: `<alert>: <OpenSSL reasons>[: <verification failure>]`, e.g.
    /// `handshake_failure: no shared cipher`. Drains the error queue.
    private func describeFailure(_ sslError: Int32, code: TLSError.Code) -> TLSError {
        var reason = OpenSSLErrorQueue.drainReasons(
            fallback: sslError == SSL_ERROR_SYSCALL ? "unexpected end of stream" : "SSL error \(sslError)"
        )
        if !self.isServer {
            let verify = SSL_get_verify_result(self.ssl)
            if verify != X509_V_OK, let text = X509_verify_cert_error_string(verify) {
                reason += ": \(String(cString: text))"
            }
        }
        if let alert = self.lastAlert {
            reason = "\(alert): \(reason)"
        }
        return TLSError(code: code, message: reason)
    }

    // MARK: What was negotiated.

    /// The ALPN protocol selected in the handshake, or `nil`.
    public var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>? = nil
        var length: UInt32 = 0
        SSL_get0_alpn_selected(self.ssl, &data, &length)
        guard let data, length > 0 else {
            return nil
        }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The SNI host name (sent by the client, or the one we sent as a client), lowercased.
    public var serverName: String? {
        guard let name = SSL_get_servername(self.ssl, TLSEXT_NAMETYPE_host_name) else {
            return nil
        }
        return TLSServerNameMatcher.lowercasedASCII(String(cString: name))
    }

    /// `"TLSv1.2"` or `"TLSv1.3"`.
    public var version: String {
        String(cString: SSL_get_version(self.ssl))
    }
}

// MARK: The BIO method and C callbacks.

/// The BIO method shared by all connections, created once on first use.
///
/// `nonisolated(unsafe)`: the pointer is written exactly once by Swift's lazy global initialisation (which is
/// thread-safe) and the `BIO_METHOD` is never modified afterwards; OpenSSL only reads it.
nonisolated(unsafe) private let tokengateBIOMethod: OpaquePointer = {
    let type = BIO_get_new_index() | BIO_TYPE_SOURCE_SINK
    guard let method = BIO_meth_new(type, "tokengate ByteBuffer BIO") else {
        preconditionFailure("BIO_meth_new failed at startup (out of memory)")
    }
    BIO_meth_set_create(method) { bio in
        BIO_set_init(bio, 1)
        return 1
    }
    BIO_meth_set_destroy(method) { bio in
        BIO_set_data(bio, nil)
        return 1
    }
    BIO_meth_set_read(method) { bio, destination, count in
        guard let bio, let destination, count > 0, let data = BIO_get_data(bio) else {
            return 0
        }
        CTokengateShims_BIO_clear_retry_flags(bio)
        let connection = Unmanaged<TLSConnection>.fromOpaque(data).takeUnretainedValue()
        return connection.bioRead(into: destination, count: Int(count), bio: bio)
    }
    BIO_meth_set_write(method) { bio, source, count in
        guard let bio, let source, count > 0, let data = BIO_get_data(bio) else {
            return 0
        }
        CTokengateShims_BIO_clear_retry_flags(bio)
        let connection = Unmanaged<TLSConnection>.fromOpaque(data).takeUnretainedValue()
        return connection.bioWrite(from: source, count: Int(count))
    }
    BIO_meth_set_ctrl(method) { bio, command, _, _ in
        switch command {
        case BIO_CTRL_FLUSH:
            // OpenSSL flushes after each handshake flight; the bytes are already in our buffer.
            return 1
        case BIO_CTRL_PENDING:
            guard let bio, let data = BIO_get_data(bio) else {
                return 0
            }
            return Int(Unmanaged<TLSConnection>.fromOpaque(data).takeUnretainedValue().pendingInboundBytes)
        default:
            return 0
        }
    }
    return method
}()

/// Records alerts so that failures can be named by the alert (`protocol_version: unsupported protocol`).
/// Runs inside SSL calls on the event loop; only touches `lastAlert`.
private func tokengateInfoCallback(_ ssl: OpaquePointer?, _ where: Int32, _ value: Int32) {
    guard (`where` & SSL_CB_ALERT) != 0, let ssl, value & 0xFF != 0,  // 0 = close_notify, not a failure
        let bio = SSL_get_rbio(ssl), let data = BIO_get_data(bio), let text = SSL_alert_desc_string_long(value)
    else {
        return
    }
    let name = String(cString: text).replacingSpaces()
    Unmanaged<TLSConnection>.fromOpaque(data).takeUnretainedValue().lastAlert = name
}

extension String {
    fileprivate func replacingSpaces() -> String {
        String(self.map { $0 == " " ? "_" : $0 })
    }
}

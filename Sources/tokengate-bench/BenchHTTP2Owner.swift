//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Who a BenchHTTP2Handler reports to: the load generator's ConnectionSlot (`run --http 2`), or the idle
/// command's one-request connection (`idle --http 2`). A closed set of two, so an enum (as BenchConnection):
/// the handler's answer path switches on it without an existential.
///
/// Every method runs on the connection's event loop, never while nghttp2 is on the stack (see
/// BenchHTTP2Handler's reentrancy rule), so an owner may submit a request or close the connection from any
/// of them.
enum BenchHTTP2Owner {
    case slot(ConnectionSlot)
    case idle(IdleHTTP2Client)

    /// The handshake completed with ALPN `h2` and the session exists: requests may be sent.
    func handshakeCompleted(_ handler: BenchHTTP2Handler, alpn: String?, tlsVersion: String) {
        switch self {
        case .slot(let slot): slot.handshakeCompleted(.http2(handler), alpn: alpn, tlsVersion: tlsVersion)
        case .idle(let client): client.handshakeCompleted(handler)
        }
    }

    /// Stream `stream` ended normally with `status`, its final decoded `:status`.
    func responseCompleted(stream: Int32, status: Int) {
        switch self {
        case .slot(let slot): slot.responseCompleted(tag: stream, status: status, keepAlive: true)
        case .idle(let client): client.responseCompleted(status: status)
        }
    }

    /// Stream `stream` ended without a complete answer (RST_STREAM, or refused after a GOAWAY).
    func streamFailed(stream: Int32, reason: String) {
        switch self {
        case .slot(let slot): slot.streamFailed(tag: stream, reason: reason)
        case .idle(let client): client.streamFailed(reason: reason)
        }
    }

    /// The server sent GOAWAY; the handler closes the connection once the streams it lets finish are done.
    func goawayReceived(reason: String) {
        switch self {
        case .slot(let slot): slot.goawayReceived(reason: reason)
        case .idle(let client): client.goawayReceived(reason: reason)
        }
    }

    /// The connection failed (TLS, ALPN other than `h2`, an HTTP/2 protocol error); the handler is closing it.
    func channelError(_ error: any Error) {
        switch self {
        case .slot(let slot): slot.channelError(error)
        case .idle(let client): client.channelError(error)
        }
    }

    /// The connection is closed, whoever closed it.
    func channelClosed() {
        switch self {
        case .slot(let slot): slot.channelClosed()
        case .idle(let client): client.channelClosed()
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateHTTP
import TokengateTLS

/// The client side of one exchange, as the codec that carries it sees it: an HTTP/1.1 connection (one
/// exchange at a time) or an HTTP/2 stream.
///
/// ``ProxyExchange`` holds the request logic — routing, authorization, forwarding, answers, the access
/// log — once for both protocols; a conformer only moves bytes and says what its transport can do. All
/// calls happen on ``eventLoop``.
protocol ExchangeClient: AnyObject {
    var eventLoop: any EventLoop { get }
    var allocator: ByteBufferAllocator { get }
    /// Whether the client can take more response bytes now (backpressure on the upstream's reads).
    var isWritable: Bool { get }
    /// The address of the connection's client: the TCP peer's, or the one a PROXY protocol header gave
    /// (``ProxyProtocolHandler``). The request's client address starts from it (``ClientAddress``).
    var clientAddress: String? { get }
    /// The index of the listener the connection came in on (its `ip_rules`).
    var listenerIndex: Int { get }
    /// The peer is a configured TLS-terminating proxy (`trusted_proxies`) talking plain HTTP: its
    /// `X-Forwarded-Proto` and `X-Forwarded-For` are believed, and only requests it marks `https` pass.
    var viaTrustedProxy: Bool { get }
    /// The names the connection's certificate covers, when a request for another host is refused with `421`
    /// (``MisdirectedRequestCheck``): on a TLS listener with more than one certificate and
    /// `misdirected_requests: refuse`. `nil` where nothing is checked (one certificate, `allow`, plain HTTP).
    var certificateNames: TLSCertificateNames? { get }
    /// Whether this transport can keep going after the exchange (HTTP/1.1 keep-alive). An HTTP/2 stream
    /// always can: the connection is not the exchange's to close.
    var closesConnectionOnAnswer: Bool { get }
    /// A graceful shutdown is in progress: the response should tell the client the connection ends.
    var isDraining: Bool { get }

    /// Takes back the backend's response head written and not sent yet (with what body followed it), so that the
    /// exchange can answer instead: `true` when nothing of it reached the client. HTTP/2 queues a head until its
    /// next processing round; HTTP/1.1 has the head in the socket once written, and says `false`.
    func withdrawResponseHead() -> Bool

    func write(_ part: HTTPServerResponsePart)
    /// Writes the backend's response head as the client gets it (``ProxyFieldRules/forEachClientResponseField(of:close:hsts:added:_:)``);
    /// each protocol turns the backend's fields into its own head in one pass.
    /// `hsts` is added when the backend set no `Strict-Transport-Security` of its own; `added` (the route's CORS
    /// fields) always, in place of the backend's fields of those names.
    func writeResponseHead(
        fromUpstream head: UpstreamResponseHead, version: HTTPVersion, close: Bool, hsts: String?, added: [ResponseField]
    )
    /// Writes the response's end. `closing` says the connection closes after this response (HTTP/1.1), so
    /// the codec must learn when the end is out; every other response ends without that bookkeeping.
    func writeEnd(_ trailers: HTTPHeaders?, closing: Bool)
    func flush()
    /// Stops (or resumes) reading the request body: HTTP/1.1 holds `read()`, HTTP/2 holds window updates.
    func setRequestReadingPaused(_ paused: Bool)
    /// Whether something outside the exchange keeps the client from sending more body right now: over HTTP/2
    /// a receive window that is shut (the connection's, which other streams' unread bytes can use up); never
    /// over HTTP/1.1, where the exchange's own pauses are the only ones. The body's pace (``RequestBodyPace``)
    /// does not count such time against the client.
    var isRequestBodyHeldBack: Bool { get }
    /// The exchange is over and its response written (not yet flushed: the codec flushes here, after it is
    /// ready for the next request, since a flush can deliver the next pipelined request at once).
    /// `closeConnection` asks an HTTP/1.1 connection to close once the response is out; `requestEnded` says
    /// whether the request's end has been seen (if not, the codec drops the rest).
    func exchangeCompleted(closeConnection: Bool, requestEnded: Bool)
    /// The response cannot be completed cleanly: HTTP/1.1 closes the connection, HTTP/2 resets the stream.
    /// The client must never see a clean end of a response the backend did not finish.
    func abort()
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOConcurrencyHelpers
import NIOPosix
import TokengateConfig
import TokengateTLS
import TokengateHTTP

/// The token page's subrequest to the RP's "who am I" endpoint: `GET url` with the browser's cookies, on
/// a fresh connection from the requesting connection's event loop, bounded by the configured timeout.
///
/// Only the status and the user-id header values come back; the response body is read and dropped (up to
/// 64 KiB), and redirects are not followed (a 3xx means "not logged in" to the responder).
struct WhoamiClient: Sendable {
    let url: URLComponents
    let userHeader: String
    /// `mint_whoami`'s headers: the values only the site knows, for a token page minting in the site's format.
    let siteHeaders: [String]
    let timeout: TimeAmount
    let tlsContext: TLSClientContext?
    let maxInFlight: Int
    /// Calls under way: one count for the whole process (every event loop, every token page route, every
    /// configuration generation), which `max_in_flight` caps. The server owns it, so that a reload, which makes new
    /// clients while calls of the old ones are still under way, does not start a fresh count.
    private let inFlight: ManagedAtomic<Int>
    /// Why calls failed, at most a line a second with the count (a dead RP fails every token page request).
    private let failures = NIOLockedValueBox(FailureLogThrottle())

    /// - Parameter callsInFlight: the process's count of whoami calls under way (``GatewayServer`` keeps one).
    init(
        configuration: WhoamiConfiguration, siteHeaders: [String] = [], callsInFlight: ManagedAtomic<Int> = ManagedAtomic(0)
    ) throws {
        self.inFlight = callsInFlight
        self.siteHeaders = siteHeaders
        guard let url = URLComponents(string: configuration.url), let scheme = url.scheme, url.host != nil,
            scheme == "http" || scheme == "https"
        else {
            throw GatewayStartupError("token page whoami url '\(configuration.url)' is not an http(s) URL")
        }
        self.url = url
        self.userHeader = configuration.userHeader
        self.timeout = TimeAmount(configuration.timeout)
        self.maxInFlight = configuration.maxInFlight
        if scheme == "https" {
            do {
                self.tlsContext = try TLSClientContext(trustRootsPath: nil)
            } catch {
                throw GatewayStartupError("token page whoami: cannot set up TLS: \(error)")
            }
        } else {
            self.tlsContext = nil
        }
    }

    func ask(cookies: String, on eventLoop: any EventLoop, logger: Logger) -> EventLoopFuture<TokenPageWhoamiResult> {
        let host = self.url.host ?? "localhost"
        let port = self.url.port ?? (self.tlsContext == nil ? 80 : 443)
        let path = (self.url.percentEncodedPath.isEmpty ? "/" : self.url.percentEncodedPath)
            + (self.url.percentEncodedQuery.map { "?" + $0 } ?? "")
        // Reserve a slot first; past the cap the RP is not asked at all (fail fast, 503).
        guard self.inFlight.wrappingIncrementThenLoad(ordering: .relaxed) <= self.maxInFlight else {
            self.inFlight.wrappingDecrement(ordering: .relaxed)
            return eventLoop.makeSucceededFuture(.busy)
        }
        let promise = eventLoop.makePromise(of: TokenPageWhoamiResult.self)
        let inFlight = self.inFlight
        promise.futureResult.whenComplete { _ in inFlight.wrappingDecrement(ordering: .relaxed) }
        let tlsContext = self.tlsContext
        let userHeader = self.userHeader
        let siteHeaders = self.siteHeaders
        let timeout = self.timeout
        // One deadline for the whole call, the connect (and TLS handshake) included: `timeout` is what the
        // browser waits at most, not a connect timeout plus a response timeout after it.
        let deadline = NIODeadline.now() + timeout
        let report: @Sendable (String) -> Void = { cause in self.reportFailure(cause, logger: logger) }
        ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tlsContext {
                        try sync.addHandler(TLSHandler(context: tlsContext, serverHostname: host, logger: logger))
                    }
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(WhoamiResponseHandler(
                            userHeader: userHeader, siteHeaders: siteHeaders, promise: promise, report: report))
                }
            }
            .connect(host: host, port: port)
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    var headers = HTTPHeaders()
                    headers.add(name: "host", value: port == 80 || port == 443 ? host : "\(host):\(port)")
                    headers.add(name: "cookie", value: cookies)
                    headers.add(name: "connection", value: "close")
                    channel.write(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)), promise: nil)
                    channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                    let timer = channel.eventLoop.scheduleTask(deadline: deadline) {
                        channel.pipeline.fireUserInboundEventTriggered(WhoamiResponseHandler.TimedOut(timeout: timeout))
                    }
                    promise.futureResult.whenComplete { _ in
                        timer.cancel()
                        channel.close(promise: nil)
                    }
                case .failure(let error):
                    report("cannot connect to \(host):\(port): \(error)")
                    promise.succeed(.failed)
                }
            }
        return promise.futureResult
    }

    /// Logs why a call failed, or why its answer could not be used (``TokenPageAnswer/diagnostic``): a warning
    /// with the cause and the number of failures since the last line, at most one a second. Never a cookie, a
    /// header value or a user id: the cause names the rule broken only.
    func reportFailure(_ cause: String, logger: Logger, now: NIODeadline = .now()) {
        guard let count = self.failures.withLockedValue({ $0.failed(now: now) }) else { return }
        logger.warning(
            "token page login check failed",
            metadata: ["whoami": "\(self.url.host ?? "?")", "error": "\(cause)", "failures": "\(count)"]
        )
    }

    /// A usable answer: after failures were logged, one line says the login check works again (with the failures
    /// not yet in a line), so the last warning does not stand as if the RP were still failing.
    func reportAnswered(logger: Logger, now: NIODeadline = .now()) {
        guard let unreported = self.failures.withLockedValue({ $0.succeeded(now: now) }) else { return }
        logger.notice(
            "token page login check works again",
            metadata: ["whoami": "\(self.url.host ?? "?")", "failures": "\(unreported)"]
        )
    }
}

/// Collects the whoami response's status and user header; anything else (EOF before the end, a parse
/// error, the deadline) is `.failed`, with its cause reported.
final class WhoamiResponseHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    /// Fired down the pipeline when the call's deadline passes.
    struct TimedOut: Sendable {
        var timeout: TimeAmount
    }

    private let userHeader: String
    private let siteHeaders: [String]
    private let promise: EventLoopPromise<TokenPageWhoamiResult>
    private let report: @Sendable (String) -> Void
    private var head: HTTPResponseHead?
    private var bodyBytes = 0
    private var completed = false

    init(
        userHeader: String, siteHeaders: [String] = [], promise: EventLoopPromise<TokenPageWhoamiResult>,
        report: @escaping @Sendable (String) -> Void
    ) {
        self.userHeader = userHeader
        self.siteHeaders = siteHeaders
        self.promise = promise
        self.report = report
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body(let buffer):
            self.bodyBytes += buffer.readableBytes
            if self.bodyBytes > 64 * 1024 {
                self.fail("the response body is larger than 64 KiB")
                context.close(promise: nil)
            }
        case .end:
            guard let head = self.head else { return }
            var site: [String: [String]] = [:]
            for name in self.siteHeaders { site[name] = head.headers[name] }
            self.complete(
                .answered(status: Int(head.status.code), userHeaderValues: head.headers[self.userHeader], siteHeaderValues: site))
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let timedOut = event as? TimedOut {
            self.fail("no complete answer within \(timedOut.timeout.nanoseconds / 1_000_000) ms")
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.fail("the connection closed before the response ended")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.fail("\(error)")
        context.close(promise: nil)
    }

    private func fail(_ cause: String) {
        guard !self.completed else { return }
        self.report(cause)
        self.complete(.failed)
    }

    /// The promise is completed once: the first of end, error, close or timeout decides.
    private func complete(_ result: TokenPageWhoamiResult) {
        guard !self.completed else { return }
        self.completed = true
        self.promise.succeed(result)
    }
}

@available(*, unavailable)
extension WhoamiResponseHandler: Sendable {}

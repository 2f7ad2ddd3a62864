//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import TokengateGateway
import TokengateHTTP
import TokengateTokens

/// A small relying party — a website with a login of its own — for the dev default and the end-to-end tests: a login
/// form, the site's session cookie, a "who am I" endpoint, and the account page's password change and
/// "disable mobile apps" buttons, which move the user's cutoffs.
///
/// - `GET /login?return_to=…`: the login form (HTML).
/// - `POST /login` (`user`, `password`, `return_to`): any user of ``users`` with a non-empty password (or,
///   after a change, the new password) is logged in: a *session* token minted with the signer
///   (`api_only: false`) in `Set-Cookie: session=…; HttpOnly; Secure; SameSite=Lax; Path=/`, then `303` to
///   `return_to` when it is a same-site path, else to `/`.
/// - `GET /whoami`: `200` with `X-User-Id` for a valid session cookie (or tokengate's `X-Tokengate-User`),
///   else `401`.
/// - `POST /account/password` (`password`): changes the password, records the change (older sessions die
///   here too), re-issues this browser's session, and calls `cutoffWriter` with ``CutoffChange/Kind/passwordChanged``
///   (the store's `revoked_before` = now).
/// - `POST /account/disable-mobile-apps`: calls `cutoffWriter` with ``CutoffChange/Kind/mobileAppsDisabled``
///   (`api_revoked_before` = now); browser sessions live on.
/// - `GET /account/…`, `/api/…`: a JSON echo of the identity the gateway forwarded.
///
/// Identity on `/account/` and `/api/` comes from `X-Tokengate-User`, which is only trustworthy because the
/// gateway removes that header from every request before it adds its own: a demo RP must only be reachable
/// through tokengate. Not for production: passwords and sessions live in memory.
public final class DemoRP: Sendable {
    /// A change that moves a user's cutoffs; the writer stores it (`revoked_before` or `api_revoked_before` = `at`).
    public struct CutoffChange: Sendable, Hashable {
        public enum Kind: Sendable, Hashable {
            /// `revoked_before` = `at`: every token and session issued before dies.
            case passwordChanged
            /// `api_revoked_before` = `at`: every api token issued before dies; sessions live on.
            case mobileAppsDisabled
        }

        public var user: String
        public var kind: Kind
        /// The RP's clock when the change was made (UNIX seconds).
        public var at: Int64

        public init(user: String, kind: Kind, at: Int64) {
            self.user = user
            self.kind = kind
            self.at = at
        }
    }

    /// The demo accounts.
    public static let users = ["alice", "bob", "carol", "demo-user"]
    /// The site's login cookie (the token page's `login: { session_cookie: session }`).
    public static let sessionCookie = "session"
    /// How long a session lasts.
    public static let sessionLifetime: Int64 = 8 * 3600

    public let channel: any Channel
    package let state: DemoRPState

    private init(channel: any Channel, state: DemoRPState) {
        self.channel = channel
        self.state = state
    }

    /// Starts the RP on `host:port` (port 0 picks a free one).
    ///
    /// - Parameters:
    ///   - signer: mints the session tokens; the gateway must verify them with the matching public key.
    ///   - now: the RP's clock (UNIX seconds); tests share one with the gateway.
    ///   - cutoffWriter: stores a cutoff change (the cutoff store, or a test's snapshot holder). The answer to
    ///     the browser waits for it, so a test may call the API right after.
    public static func start(
        host: String = "127.0.0.1",
        port: Int,
        group: any EventLoopGroup,
        signer: TokenSigner,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        cutoffWriter: @escaping @Sendable (CutoffChange) async -> Void
    ) async throws -> DemoRP {
        let state = DemoRPState(signer: signer, now: now, cutoffWriter: cutoffWriter)
        let channel = try await DemoHTTPServer.bind(host: host, port: port, group: group) {
            DemoRPHandler(state: state)
        }
        return DemoRP(channel: channel, state: state)
    }

    public var port: Int { self.channel.localAddress?.port ?? 0 }

    public func stop() async throws {
        try await self.channel.close()
    }
}

/// The RP's memory: passwords, sessions it issued, when each password last changed.
package final class DemoRPState: Sendable {
    package struct Session {
        package var user: String
        package var issuedAt: Int64
    }

    package struct Memory {
        package var passwords: [String: String] = [:]
        package var passwordChangedAt: [String: Int64] = [:]
        /// Keyed by the session token itself (a demo; a real site would key by a hash or a session id).
        package var sessions: [String: Session] = [:]
    }

    package let signer: TokenSigner
    package let now: @Sendable () -> Int64
    package let cutoffWriter: @Sendable (DemoRP.CutoffChange) async -> Void
    private let memory = NIOLockedValueBox(Memory())

    package init(
        signer: TokenSigner,
        now: @escaping @Sendable () -> Int64,
        cutoffWriter: @escaping @Sendable (DemoRP.CutoffChange) async -> Void
    ) {
        self.signer = signer
        self.now = now
        self.cutoffWriter = cutoffWriter
    }

    /// Whether `password` logs `user` in: a demo user, a non-empty password, and the changed one if any.
    package func checkPassword(user: String, password: String) -> Bool {
        guard DemoRP.users.contains(user), !password.isEmpty else { return false }
        guard let current = self.memory.withLockedValue({ $0.passwords[user] }) else { return true }
        return Self.constantTimeEquals(Array(current.utf8), Array(password.utf8))
    }

    /// A new session token for `user`, remembered.
    package func newSession(user: String) throws -> String {
        let now = self.now()
        let token = try self.signer.mint(
            TokenClaims(subject: user, issuedAt: now, apiOnly: false, expiresAt: now + DemoRP.sessionLifetime)
        )
        self.memory.withLockedValue { $0.sessions[token] = Session(user: user, issuedAt: now) }
        return token
    }

    /// The user of a live session token: one this RP issued, not expired, not older than a password change.
    package func user(ofSession token: Substring) -> String? {
        let now = self.now()
        return self.memory.withLockedValue { memory in
            guard let session = memory.sessions[String(token)] else { return nil }
            guard now < session.issuedAt + DemoRP.sessionLifetime else { return nil }
            if let changed = memory.passwordChangedAt[session.user], session.issuedAt < changed { return nil }
            return session.user
        }
    }

    /// Records a password change; returns its time.
    package func changePassword(user: String, to password: String) -> Int64 {
        let now = self.now()
        self.memory.withLockedValue {
            $0.passwords[user] = password
            $0.passwordChangedAt[user] = now
        }
        return now
    }

    private static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}

package final class DemoRPHandler: ChannelInboundHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias OutboundOut = HTTPServerResponsePart

    /// Form bodies larger than this are refused.
    package static let maximumBody = 16 * 1024

    private let state: DemoRPState
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var bodyTooLarge = false

    package init(state: DemoRPState) {
        self.state = state
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.body = []
            self.bodyTooLarge = false
        case .body(let buffer):
            if self.body.count + buffer.readableBytes > Self.maximumBody {
                self.bodyTooLarge = true
            } else {
                self.body += buffer.readableBytesView
            }
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            if self.bodyTooLarge {
                self.write(.payloadTooLarge, json: ["error": "payload_too_large"], context: context)
                return
            }
            self.respond(to: head, body: self.body, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, body: [UInt8], context: ChannelHandlerContext) {
        let path = String(head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0])
        let query = Array((head.uri.split(separator: "?", maxSplits: 1).dropFirst().first ?? "").utf8)
        switch (head.method, path) {
        case (.GET, "/login"):
            let returnTo = Self.single("return_to", in: query) ?? "/"
            self.writeLoginForm(status: .ok, returnTo: returnTo, message: nil, context: context)
        case (.POST, "/login"):
            self.login(body: body, context: context)
        case (.GET, "/whoami"):
            guard let user = self.identity(head) else {
                self.write(.unauthorized, json: ["error": "not_logged_in"], context: context)
                return
            }
            self.write(.ok, json: ["user": user], extraHeaders: [("x-user-id", user)], context: context)
        case (.POST, "/account/password"):
            guard let user = self.identity(head) else {
                self.write(.unauthorized, json: ["error": "not_logged_in"], context: context)
                return
            }
            guard let password = Self.single("password", in: body), !password.isEmpty else {
                self.write(.badRequest, json: ["error": "password_required"], context: context)
                return
            }
            let at = self.state.changePassword(user: user, to: password)
            // This browser stays logged in with a fresh session; every other session and token dies.
            let cookie = (try? self.state.newSession(user: user)).map(Self.sessionCookie)
            self.afterCutoff(
                DemoRP.CutoffChange(user: user, kind: .passwordChanged, at: at),
                json: ["user": user, "changed": "password"],
                extraHeaders: cookie.map { [("set-cookie", $0)] } ?? [],
                context: context
            )
        case (.POST, "/account/disable-mobile-apps"):
            guard let user = self.identity(head) else {
                self.write(.unauthorized, json: ["error": "not_logged_in"], context: context)
                return
            }
            self.afterCutoff(
                DemoRP.CutoffChange(user: user, kind: .mobileAppsDisabled, at: self.state.now()),
                json: ["user": user, "changed": "mobile_apps_disabled"],
                extraHeaders: [],
                context: context
            )
        case (.GET, _) where path.hasPrefix("/account/") || path.hasPrefix("/api/"),
            (.POST, _) where path.hasPrefix("/api/"):
            var echo = ["path": path, "method": head.method.rawValue]
            echo["user"] = head.headers.first(name: "x-tokengate-user")
            echo["kind"] = head.headers.first(name: "x-tokengate-token-kind")
            self.write(.ok, json: echo, context: context)
        default:
            self.write(.notFound, json: ["error": "not_found"], context: context)
        }
    }

    // MARK: Login

    private func login(body: [UInt8], context: ChannelHandlerContext) {
        let returnTo = Self.single("return_to", in: body) ?? "/"
        guard let user = Self.single("user", in: body), let password = Self.single("password", in: body),
            self.state.checkPassword(user: user, password: password)
        else {
            self.writeLoginForm(
                status: .unauthorized,
                returnTo: returnTo,
                message: "Wrong user or password.",
                context: context
            )
            return
        }
        guard let session = try? self.state.newSession(user: user) else {
            self.write(.internalServerError, json: ["error": "server_error"], context: context)
            return
        }
        // Only a path on this site; anything else (//evil, https://evil, /\evil …) goes home instead.
        let location = SameSiteReturnPath.validate(returnTo) ?? "/"
        var headers = HTTPHeaders()
        headers.add(name: "location", value: location)
        headers.add(name: "set-cookie", value: Self.sessionCookie(session))
        headers.add(name: "cache-control", value: "no-store")
        headers.add(name: "content-length", value: "0")
        self.writeResponse(HTTPResponseHead(version: .http1_1, status: .seeOther, headers: headers), body: [], context: context)
    }

    private static func sessionCookie(_ token: String) -> String {
        "\(DemoRP.sessionCookie)=\(token); HttpOnly; Secure; SameSite=Lax; Path=/"
    }

    /// The logged-in user: tokengate's verified `X-Tokengate-User` (exactly one), else a live session cookie.
    private func identity(_ head: HTTPRequestHead) -> String? {
        let forwarded = head.headers["x-tokengate-user"]
        if forwarded.count == 1, !forwarded[0].isEmpty { return forwarded[0] }
        for value in CookieHeader.values(named: DemoRP.sessionCookie, in: head.headers["cookie"]) {
            if let user = self.state.user(ofSession: value) { return user }
        }
        return nil
    }

    private func writeLoginForm(
        status: HTTPResponseStatus,
        returnTo: String,
        message: String?,
        context: ChannelHandlerContext
    ) {
        let note = message.map { "<p role=\"alert\">\(HTMLEscaping.escape($0))</p>\n" } ?? ""
        let html = """
            <!DOCTYPE html>
            <html lang="en">
            <head><meta charset="utf-8"><title>Log in to the demo site</title></head>
            <body>
            <h1>Log in</h1>
            \(note)<form method="post" action="/login">
            <label>User <input name="user" autocomplete="username"></label>
            <label>Password <input name="password" type="password" autocomplete="current-password"></label>
            <input type="hidden" name="return_to" value="\(HTMLEscaping.escape(returnTo))">
            <button type="submit">Log in</button>
            </form>
            <p>Demo users: \(DemoRP.users.joined(separator: ", ")); any non-empty password.</p>
            </body>
            </html>

            """
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "text/html; charset=utf-8")
        headers.add(name: "content-length", value: String(html.utf8.count))
        headers.add(name: "cache-control", value: "no-store")
        headers.add(name: "content-security-policy", value: "default-src 'none'; form-action 'self'; frame-ancestors 'none'")
        self.writeResponse(HTTPResponseHead(version: .http1_1, status: status, headers: headers), body: Array(html.utf8), context: context)
    }

    // MARK: Cutoffs

    /// Waits for the cutoff writer, then answers: the browser's next request already meets the new cutoff.
    private func afterCutoff(
        _ change: DemoRP.CutoffChange,
        json: [String: String],
        extraHeaders: [(String, String)],
        context: ChannelHandlerContext
    ) {
        let writer = self.state.cutoffWriter
        let promise = context.eventLoop.makePromise(of: Void.self)
        promise.completeWithTask { await writer(change) }
        promise.futureResult.assumeIsolated().whenComplete { _ in
            self.write(.ok, json: json, extraHeaders: extraHeaders, context: context)
        }
    }

    // MARK: Writing

    private func write(
        _ status: HTTPResponseStatus,
        json: [String: String],
        extraHeaders: [(String, String)] = [],
        context: ChannelHandlerContext
    ) {
        let text = "{" + json.keys.sorted().map { "\(JSONString.quote($0)):\(JSONString.quote(json[$0]!))" }
            .joined(separator: ",") + "}\n"
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: String(text.utf8.count))
        headers.add(name: "cache-control", value: "no-store")
        for (name, value) in extraHeaders { headers.add(name: name, value: value) }
        self.writeResponse(HTTPResponseHead(version: .http1_1, status: status, headers: headers), body: Array(text.utf8), context: context)
    }

    private func writeResponse(_ head: HTTPResponseHead, body: [UInt8], context: ChannelHandlerContext) {
        context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        if !body.isEmpty {
            context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
    }

    /// The one decoded value of form field `name`; `nil` when absent, repeated or badly encoded.
    private static func single(_ name: String, in bytes: [UInt8]) -> String? {
        let values = FormURLEncoded.values(named: name, in: bytes)
        guard values.count == 1 else { return nil }
        return values[0]
    }
}

@available(*, unavailable)
extension DemoRPHandler: Sendable {}

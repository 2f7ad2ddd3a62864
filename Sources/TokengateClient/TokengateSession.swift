//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An app's API calls with a refreshing token, the way the mobile flows of the product's sources do it: refresh
/// shortly before the access token expires, and on a `401` with a Bearer challenge; retry the request once with the
/// new token; and when the refresh itself is refused, report "login required" (``TokengateClientError/Code/loginRequired``)
/// so the app opens the token page again.
///
/// ```swift
/// let session = TokengateSession(site: site, app: "ios", grant: grant) { request in
///     let (data, response) = try await URLSession.shared.data(for: request)
///     return (data, response as! HTTPURLResponse)
/// }
/// let (data, response) = try await session.send(URLRequest(url: site.appendingPathComponent("api/me")))
/// // Keychain: save `await session.grant` after calls, since refreshes replace it.
/// ```
///
/// Refreshes are serialized: calls that find the token expired at once share one refresh, since a refresh token
/// works once and tokengate revokes the device when one is used twice. A failed refresh that is not a refusal (no
/// network, `5xx`) keeps the grant: the next call tries again.
public actor TokengateSession {
    public typealias Transport = @Sendable (URLRequest) async throws -> (Data, HTTPURLResponse)

    public let site: URL
    public let path: String
    public let app: String
    /// The tokens now; nil once a refresh was refused (log in again, then ``replace(_:)``).
    public private(set) var grant: TokenGrant?
    /// A refresh is started this long before the access token's expiry.
    public let leeway: TimeInterval
    private let transport: Transport
    private let now: @Sendable () -> Date
    private var refreshing: Task<TokenGrant, any Error>?

    public init(
        site: URL, path: String = "/token", app: String, grant: TokenGrant, leeway: TimeInterval = 30,
        now: @escaping @Sendable () -> Date = { Date() }, transport: @escaping Transport
    ) {
        self.site = site
        self.path = path
        self.app = app
        self.grant = grant
        self.leeway = leeway
        self.now = now
        self.transport = transport
    }

    /// After a new login: the grant of the code redemption.
    public func replace(_ grant: TokenGrant) {
        self.grant = grant
    }

    /// Sends `request` with the access token attached, refreshing first when it is about to expire, and once more
    /// after a `401` with a Bearer challenge (then the request is sent a second time, never a third).
    /// - Throws: ``TokengateClientError`` `loginRequired` when there is no grant or the refresh was refused; what
    ///   ``TokenAttachment`` throws for a request it will not attach to; what the transport throws.
    public func send(_ request: URLRequest, as attachment: TokenAttachment = .authorizationHeader) async throws
        -> (Data, HTTPURLResponse)
    {
        var current = try await self.usableGrant()
        var refreshed = false
        while true {
            var attached = request
            try attached.attach(current.access, as: attachment, now: self.now())
            let (data, response) = try await self.transport(attached)
            let challenge = response.value(forHTTPHeaderField: "WWW-Authenticate").map { [$0] } ?? []
            guard TokenResponseCheck.outcome(status: response.statusCode, wwwAuthenticate: challenge) == .loginRequired
            else { return (data, response) }
            guard !refreshed, current.refresh != nil else {
                // Refused with a fresh token, or nothing to refresh with: the login is over.
                self.grant = nil
                throw TokengateClientError(.loginRequired, "the site refused the token; log in again")
            }
            current = try await self.refresh(from: current)
            refreshed = true
        }
    }

    /// The grant to send with: refreshed first when the access token expires within ``leeway``.
    private func usableGrant() async throws -> TokenGrant {
        guard let grant = self.grant else {
            throw TokengateClientError(.loginRequired, "no token; log in at the token page")
        }
        if grant.access.isExpired(now: self.now(), leeway: self.leeway) {
            guard grant.refresh != nil else {
                self.grant = nil
                throw TokengateClientError(.loginRequired, "the token has expired; log in again")
            }
            return try await self.refresh(from: grant)
        }
        return grant
    }

    /// One refresh at a time; a caller that comes while one runs waits for it, and one that comes after it with
    /// the grant it replaced gets the new grant without a second refresh.
    private func refresh(from stale: TokenGrant) async throws -> TokenGrant {
        if let running = self.refreshing {
            return try await running.value
        }
        if let grant = self.grant, grant != stale, !grant.access.isExpired(now: self.now(), leeway: self.leeway) {
            return grant
        }
        guard let refreshToken = stale.refresh else {
            throw TokengateClientError(.loginRequired, "no refresh token; log in again")
        }
        let request = try RefreshGrant.request(site: self.site, path: self.path, app: self.app, refreshToken: refreshToken)
        let transport = self.transport
        let now = self.now
        let task = Task { () throws -> TokenGrant in
            let (data, response) = try await transport(request)
            return try RefreshGrant.grant(status: response.statusCode, body: data, now: now())
        }
        self.refreshing = task
        defer { self.refreshing = nil }
        do {
            let next = try await task.value
            // Never the old refresh token again: it is used up, and a second use revokes the device.
            self.grant = next
            return next
        } catch let error as TokengateClientError where error.code == .loginRequired {
            self.grant = nil
            throw error
        }
    }
}

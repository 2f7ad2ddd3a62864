//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateHTTP
import TokengateTokens

/// One request to a `token_page` route: the page (`GET`), a click on its confirmation (`POST …?confirm`) or a
/// PKCE code redemption (`POST`). It is answered by the gateway and never forwarded.
///
/// A value that decides and does no I/O: each input (the head, a body part, the body's end, the login
/// subrequest's answer) returns an ``Action`` that ``ProxyExchange`` runs — it writes the answer, reads the
/// body within the token-body memory, asks the RP who is logged in. The clock and the cutoffs come in as
/// values, so every path is testable without a channel.
struct TokenPageExchange {
    enum Action {
        /// Write this answer; the exchange is answered.
        case answer(TokenPageAnswer)
        /// Refuse the request with one of the gateway's own answers (a token in the URL, a cross-site fetch).
        case refuse(GatewayAnswer)
        /// Start reading the body, holding `initial` bytes of the token-body memory for its buffer first.
        case readBody(initial: Int)
        /// A body part was kept: hold `bytes` of the token-body memory in all.
        case holdBody(bytes: Int)
        /// Ask the RP who is logged in (`nil`: no whoami client, the answer is `.failed`), then pass what came
        /// back to ``loginAnswered(_:now:nowMilliseconds:)``.
        case askWhoami(cookies: String)
        /// Have the store rotate a refresh token (``DeviceRegistry/refresh``), then pass what it did to
        /// ``refreshAnswered(_:cutoffs:now:)``.
        case rotateRefresh(RefreshRotation)
        /// Have the store list the user's devices (``DeviceChanges/list``), then pass them to
        /// ``devicesListed(_:nowMilliseconds:)``.
        case listDevices(user: String)
        /// Have the store make a connected-apps change (``DeviceChanges``), then pass what it did to
        /// ``devicesChanged(_:)``.
        case changeDevices(user: String, change: ConnectedAppsChange)

        /// Whether it is ``answer(_:)``.
        var isAnswer: Bool {
            if case .answer = self { return true }
            return false
        }
    }

    /// What the answer to the login subrequest is for.
    private enum LoginStep {
        case page(HTTPRequestHead)
        case confirmation(HTTPRequestHead, body: [UInt8])
        case connectedApps(HTTPRequestHead)
        case connectedAppsChange(HTTPRequestHead, body: [UInt8])
    }

    private enum Phase {
        case started
        case readingBody(ByteBuffer, limit: Int)
        case awaitingLogin(LoginStep)
        case awaitingRefresh(RefreshRotation)
        case awaitingDevices(HTTPRequestHead, user: String)
        case awaitingChange(ConnectedAppsChange, user: String)
        case answered
    }

    private let page: TokenPageRoute
    private let head: ClientRequestHead
    /// The target is the confirmation's (`?confirm`): a `POST` is a click on the confirmation page, not a redemption.
    private let isConfirmation: Bool
    /// The target is the route's connected-apps page (``TokenPageResponder/isConnectedApps(target:)``).
    private let isConnectedApps: Bool
    private var phase = Phase.started

    init(page: TokenPageRoute, head: ClientRequestHead) {
        self.page = page
        self.head = head
        self.isConnectedApps = page.responder.isConnectedApps(target: head.uri)
        self.isConfirmation = !self.isConnectedApps && TokenPageConfirmationRequest.isConfirmation(target: head.uri)
    }

    /// The client for the login subrequest (`whoami` mode); `nil` in the modes that need none.
    var whoami: WhoamiClient? { self.page.whoami }

    /// Where the device of a minted token is stored before the answer goes out (``TokenPageAnswer/device``).
    var devices: DeviceRegistry? { self.page.devices }

    /// Whether the exchange is taking the request's body.
    var isReadingBody: Bool {
        if case .readingBody = self.phase { return true }
        return false
    }

    /// The request head arrived (routed here, within the limits).
    mutating func begin(
        cutoffs: CutoffSnapshot, realm: String, now: Int64, nowMilliseconds: Int64, bodyAllocator: ByteBufferAllocator
    ) -> Action {
        // The page redirects to the login with the target as its return path: a token in the URL would travel
        // on in `Location`.
        if TokenExtractor.targetCarriesJWT(self.head.uri) {
            return self.refuse(.invalidRequest("tokens must not be sent in the URL", realm: realm, reason: "token_in_url"))
        }
        if TokenExtractor.isCrossSiteSubresource(self.head.fields) {
            return self.refuse(.crossSiteTokenPage())
        }
        if self.head.method == .POST {
            return self.beginBody(allocator: bodyAllocator)
        }
        // NIO's head, made once (a `String` per field) for the page's two steps.
        let head = self.head.nioHead
        if self.isConnectedApps {
            return self.run(self.page.responder.connectedApps(head: head, cutoffs: cutoffs, now: now), step: .connectedApps(head))
        }
        let action = self.page.responder.respond(to: head, cutoffs: cutoffs, now: now, nowMilliseconds: nowMilliseconds)
        return self.run(action, step: .page(head))
    }

    /// A `POST`: the confirmation's or the redemption's head checks (where the form came from, the body's type and
    /// announced length), then its body, at most the step's own maximum.
    private mutating func beginBody(allocator: ByteBufferAllocator) -> Action {
        let fields = self.head.fields
        let length = fields.withFirstValue(name: "content-length") { FieldBytes.decimal($0) } ?? nil
        // Two `Content-Type` fields are two readings of one body: refused, not the first one taken.
        let contentType = fields.count(name: "content-type") == 1 ? TokenExtractor.contentType(fields) : nil
        let problem: TokenPageAnswer?
        let limit: Int
        if self.isConfirmation || self.isConnectedApps {
            // A button of the connected-apps page is checked as the confirmation's "continue" is.
            problem = TokenPageResponder.confirmationHeadProblem(
                fetchSites: fields.values(name: "sec-fetch-site"),
                origins: fields.values(name: "origin"),
                host: fields.first(name: "host"),
                contentType: contentType,
                contentLength: length
            )
            limit = self.isConnectedApps ? ConnectedAppsRequest.maximumBody : TokenPageConfirmationRequest.maximumBody
        } else {
            problem = TokenPageResponder.redemptionHeadProblem(contentType: contentType, contentLength: length)
            limit = TokenPageRedemptionRequest.maximumBody
        }
        if let problem {
            return self.answer(problem)
        }
        let initial = min(length ?? 0, limit)
        self.phase = .readingBody(allocator.buffer(capacity: initial), limit: limit)
        return .readBody(initial: initial)
    }

    /// A part of the request's body arrived.
    mutating func receivedBody(_ part: ByteBuffer) -> Action? {
        guard case .readingBody(var body, let limit) = self.phase else { return nil }
        if body.readableBytes + part.readableBytes > limit {
            return self.answer(
                self.isConfirmation || self.isConnectedApps
                    ? TokenPageResponder.confirmationTooLarge : TokenPageResponder.redemptionTooLarge)
        }
        self.phase = .answered  // Parked while the buffer grows, so it is not copied on write.
        var part = part
        body.writeBuffer(&part)
        self.phase = .readingBody(body, limit: limit)
        return .holdBody(bytes: body.readableBytes)
    }

    /// The request's body ended: a confirmation is checked again against the login (the RP asked again in
    /// `whoami` mode), then its value; a redemption's code is redeemed.
    mutating func receivedEnd(cutoffs: CutoffSnapshot, now: Int64, nowMilliseconds: Int64) -> Action? {
        guard case .readingBody(let buffer, _) = self.phase else { return nil }
        let body = Array(buffer.readableBytesView)
        if self.isConnectedApps {
            let head = self.head.nioHead
            let action = self.page.responder.changeDevices(
                head: head, body: body, cutoffs: cutoffs, now: now, nowMilliseconds: nowMilliseconds)
            return self.run(action, step: .connectedAppsChange(head, body: body))
        }
        if self.isConfirmation {
            let head = self.head.nioHead
            let action = self.page.responder.confirm(
                head: head, body: body, cutoffs: cutoffs, now: now, nowMilliseconds: nowMilliseconds)
            return self.run(action, step: .confirmation(head, body: body))
        }
        if TokenPageRedemptionRequest.grantType(body) == "refresh_token" {
            switch self.page.responder.refreshStep(body: body, now: now) {
            case .answer(let answer):
                return self.answer(answer)
            case .rotate(let rotation):
                guard self.page.devices?.refresh != nil else {
                    return self.answer(TokenPageResponder.refreshUnavailable)
                }
                self.phase = .awaitingRefresh(rotation)
                return .rotateRefresh(rotation)
            }
        }
        return self.answer(self.page.responder.redeem(body: body, cutoffs: cutoffs, now: now))
    }

    /// The store's rotation asked for by ``Action/rotateRefresh(_:)`` came back (nil: it failed); `nil` once the
    /// exchange was answered meanwhile.
    mutating func refreshAnswered(_ outcome: RefreshOutcome?, cutoffs: CutoffSnapshot, now: Int64) -> TokenPageAnswer? {
        guard case .awaitingRefresh(let rotation) = self.phase else { return nil }
        self.phase = .answered
        guard let outcome else { return TokenPageResponder.refreshUnavailable }
        return self.page.responder.refreshed(outcome, rotation: rotation, cutoffs: cutoffs, now: now)
    }

    /// The login subrequest asked for by ``Action/askWhoami(cookies:)`` came back; `nil` once the exchange was
    /// answered meanwhile (the client went away).
    mutating func loginAnswered(_ result: TokenPageWhoamiResult, now: Int64, nowMilliseconds: Int64) -> TokenPageAnswer? {
        guard case .answer(let answer) = self.loginStep(result, now: now, nowMilliseconds: nowMilliseconds) else { return nil }
        return answer
    }

    /// The same, for every step: the connected-apps page goes on to the store (``Action/listDevices(user:)``,
    /// ``Action/changeDevices(user:change:)``) instead of answering.
    mutating func loginStep(_ result: TokenPageWhoamiResult, now: Int64, nowMilliseconds: Int64) -> Action? {
        guard case .awaitingLogin(let step) = self.phase else { return nil }
        self.phase = .answered
        switch step {
        case .page(let head):
            return .answer(self.page.responder.respond(to: head, whoami: result, now: now, nowMilliseconds: nowMilliseconds))
        case .confirmation(let head, let body):
            return .answer(
                self.page.responder.confirm(head: head, body: body, whoami: result, now: now, nowMilliseconds: nowMilliseconds))
        case .connectedApps(let head):
            return self.run(self.page.responder.connectedApps(head: head, whoami: result), step: step)
        case .connectedAppsChange(let head, let body):
            return self.run(
                self.page.responder.changeDevices(head: head, body: body, whoami: result, nowMilliseconds: nowMilliseconds),
                step: step)
        }
    }

    /// The devices asked for by ``Action/listDevices(user:)`` (nil: the store failed); `nil` once answered.
    mutating func devicesListed(_ devices: [DeviceRecord]?, nowMilliseconds: Int64) -> TokenPageAnswer? {
        guard case .awaitingDevices(let head, let user) = self.phase else { return nil }
        self.phase = .answered
        return self.page.responder.connectedAppsPage(head: head, user: user, devices: devices, nowMilliseconds: nowMilliseconds)
    }

    /// What the store did with ``Action/changeDevices(user:change:)``; `nil` once answered.
    mutating func devicesChanged(_ outcome: ConnectedAppsChangeOutcome) -> TokenPageAnswer? {
        guard case .awaitingChange(let change, let user) = self.phase else { return nil }
        self.phase = .answered
        return self.page.responder.devicesChanged(change, user: user, outcome: outcome)
    }

    private mutating func run(_ action: TokenPageAction, step: LoginStep) -> Action {
        switch action {
        case .answer(let answer):
            return self.answer(answer)
        case .askWhoami(_, let cookies):
            self.phase = .awaitingLogin(step)
            return .askWhoami(cookies: cookies)
        case .listDevices(let user):
            guard case .connectedApps(let head) = step else { return self.answer(TokenPageResponder.connectedAppsUnavailable) }
            self.phase = .awaitingDevices(head, user: user)
            return .listDevices(user: user)
        case .changeDevices(let user, let change):
            self.phase = .awaitingChange(change, user: user)
            return .changeDevices(user: user, change: change)
        }
    }

    private mutating func answer(_ answer: TokenPageAnswer) -> Action {
        self.phase = .answered
        return .answer(answer)
    }

    private mutating func refuse(_ answer: GatewayAnswer) -> Action {
        self.phase = .answered
        return .refuse(answer)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CoreMetrics
import Logging
import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

// MARK: The token page: answered here, never forwarded.

extension ProxyExchange {
    /// Routed to a token page: the exchange is the page's (``TokenPageExchange``) from here on.
    func beginTokenPage(_ page: TokenPageRoute) {
        var exchange = TokenPageExchange(page: page, head: self.head)
        let action = exchange.begin(
            cutoffs: self.runtime.cutoffs.load(), realm: self.runtime.realm, now: self.runtime.now(),
            nowMilliseconds: self.runtime.nowMilliseconds(), bodyAllocator: self.client.allocator)
        self.tokenPage = exchange
        self.machine.routedToTokenPage()
        self.run(action)
    }

    /// Runs `step` on the token page's exchange, then what it returned.
    func stepTokenPage(_ step: (inout TokenPageExchange) -> TokenPageExchange.Action?) {
        guard self.machine.isTokenPage, self.tokenPage != nil else { return }
        let action = step(&self.tokenPage!)  // Changed in place, so a body buffer is not copied on write.
        if let action {
            self.run(action)
        }
    }

    /// Does what the token page decided.
    private func run(_ action: TokenPageExchange.Action) {
        switch action {
        case .answer(let answer):
            self.writeTokenPage(answer)
        case .refuse(let answer):
            self.answer(answer)
        case .readBody(let initial):
            // Read like a body searched for a token: the same pace, the same memory budget.
            guard self.holdTokenBodyMemory(initial) else {
                self.answer(.tokenBodyMemoryFull())
                return
            }
            self.beganReadingBody(self.machine.tokenPageReadsBody())
        case .holdBody(let bytes):
            if !self.holdTokenBodyMemory(bytes) {
                self.answer(.tokenBodyMemoryFull())
            }
        case .askWhoami(let cookies):
            guard self.machine.isTokenPage, let whoami = self.tokenPage?.whoami else {
                self.loginAnswered(.failed, by: nil)
                return
            }
            whoami.ask(cookies: cookies, on: self.client.eventLoop, logger: self.logger).assumeIsolated().whenSuccess {
                self.loginAnswered($0, by: whoami)
            }
        case .listDevices(let user):
            self.listDevices(user: user)
        case .changeDevices(let user, let change):
            self.changeDevices(user: user, change: change)
        case .rotateRefresh(let rotation):
            guard self.machine.isTokenPage, let refresh = self.tokenPage?.devices?.refresh else {
                self.refreshAnswered(nil)
                return
            }
            let promise = self.client.eventLoop.makePromise(of: RefreshOutcome.self)
            promise.completeWithTask { try await refresh(rotation) }
            promise.futureResult.assumeIsolated().whenComplete { result in
                switch result {
                case .success(let outcome):
                    self.refreshAnswered(outcome)
                case .failure(let error):
                    self.logger.warning("token page: the cutoff store could not rotate a refresh token", metadata: ["error": "\(error)"])
                    self.refreshAnswered(nil)
                }
            }
        }
    }

    /// Asks the store for the user's devices (the connected-apps page), then shows them.
    private func listDevices(user: String) {
        guard self.machine.isTokenPage, let changes = self.tokenPage?.devices?.changes else {
            self.devicesListed(nil)
            return
        }
        let promise = self.client.eventLoop.makePromise(of: [DeviceRecord].self)
        promise.completeWithTask { try await changes.list(user) }
        promise.futureResult.assumeIsolated().whenComplete { result in
            switch result {
            case .success(let devices):
                self.devicesListed(devices)
            case .failure(let error):
                self.logger.warning("connected apps: the cutoff store could not list devices", metadata: ["error": "\(error)"])
                self.devicesListed(nil)
            }
        }
    }

    private func devicesListed(_ devices: [DeviceRecord]?) {
        guard self.machine.isTokenPage, self.tokenPage != nil else { return }  // The client went away meanwhile.
        guard let answer = self.tokenPage!.devicesListed(devices, nowMilliseconds: self.runtime.nowMilliseconds()) else {
            return
        }
        self.writeTokenPage(answer)
    }

    /// Has the store make a connected-apps change (stored and published before it returns), then answers.
    private func changeDevices(user: String, change: ConnectedAppsChange) {
        guard self.machine.isTokenPage, let changes = self.tokenPage?.devices?.changes else {
            self.devicesChanged(.failed)
            return
        }
        let promise = self.client.eventLoop.makePromise(of: ConnectedAppsChangeOutcome.self)
        promise.completeWithTask {
            switch change {
            case .revoke(let device):
                return try await changes.revoke(user, device) == nil ? .unknownDevice : .done
            case .disableMobileApps:
                try await changes.disableMobileApps(user)
                return .done
            }
        }
        promise.futureResult.assumeIsolated().whenComplete { result in
            switch result {
            case .success(let outcome):
                if outcome == .done {
                    // As the admin API logs its revocations: who changed what (a device id is no secret).
                    var metadata: Logger.Metadata = ["user": .string(user)]
                    switch change {
                    case .revoke(let device):
                        metadata["device"] = .string(device.text)
                        self.logger.notice("connected apps: device revoked by its user", metadata: metadata)
                    case .disableMobileApps:
                        self.logger.notice("connected apps: mobile apps disabled by their user", metadata: metadata)
                    }
                }
                self.devicesChanged(outcome)
            case .failure(let error):
                self.logger.warning("connected apps: the cutoff store could not make the change", metadata: ["error": "\(error)"])
                self.devicesChanged(.failed)
            }
        }
    }

    private func devicesChanged(_ outcome: ConnectedAppsChangeOutcome) {
        guard self.machine.isTokenPage, self.tokenPage != nil else { return }  // The client went away meanwhile.
        guard let answer = self.tokenPage!.devicesChanged(outcome) else { return }
        self.writeTokenPage(answer)
    }

    /// The store rotated a refresh token (or could not: nil): the refresh's answer.
    private func refreshAnswered(_ outcome: RefreshOutcome?) {
        guard self.machine.isTokenPage, self.tokenPage != nil else { return }  // The client went away meanwhile.
        guard
            let answer = self.tokenPage!.refreshAnswered(
                outcome, cutoffs: self.runtime.cutoffs.load(), now: self.runtime.now())
        else { return }
        self.writeTokenPage(answer)
    }

    /// The RP said who is logged in (or could not): the page's second step, for a `GET` or a confirmation alike.
    private func loginAnswered(_ result: TokenPageWhoamiResult, by whoami: WhoamiClient?) {
        guard self.machine.isTokenPage, self.tokenPage != nil else { return }  // The client went away meanwhile.
        guard
            let action = self.tokenPage!.loginStep(
                result, now: self.runtime.now(), nowMilliseconds: self.runtime.nowMilliseconds())
        else { return }
        if let whoami, case .answered = result, !action.isAnswer {
            whoami.reportAnswered(logger: self.logger)  // The connected-apps page goes on to the store.
        }
        guard case .answer(let answer) = action else {
            self.run(action)
            return
        }
        if let whoami {
            if let diagnostic = answer.diagnostic {
                whoami.reportFailure("the answer cannot be used: \(diagnostic)", logger: self.logger)
            } else if case .answered = result {
                whoami.reportAnswered(logger: self.logger)
            }
        }
        self.writeTokenPage(answer)
    }

    /// Stores `device`, then writes `answer` without it (or the refusal), unless the client went away meanwhile.
    private func recordDevice(_ device: DeviceRecord, then answer: TokenPageAnswer) {
        var answer = answer
        answer.device = nil
        guard self.machine.isTokenPage, let devices = self.tokenPage?.devices else {
            self.writeTokenPage(.deviceNotRecorded)
            return
        }
        let promise = self.client.eventLoop.makePromise(of: Void.self)
        promise.completeWithTask { try await devices.record(device) }
        promise.futureResult.assumeIsolated().whenComplete { result in
            guard self.machine.isTokenPage else { return }  // The client went away meanwhile.
            switch result {
            case .success:
                self.writeTokenPage(answer)
            case .failure(let error):
                self.logger.warning(
                    "token page: cannot store the device record; no token issued", metadata: ["error": "\(error)"])
                self.writeTokenPage(.deviceNotRecorded)
            }
        }
    }

    /// Writes a token page answer. Its headers and body may carry the token (`Set-Cookie`, `Location`, the
    /// page): only the reason code and the user go to the log.
    ///
    /// An answer with a device (``TokenPageAnswer/device``) waits for the store to hold the device's record, and
    /// becomes ``TokenPageAnswer/deviceNotRecorded`` if it cannot: no token of a device the store does not know.
    func writeTokenPage(_ answer: TokenPageAnswer) {
        if let device = answer.device {
            self.recordDevice(device, then: answer)
            return
        }
        var head = answer.responseHead(version: self.head.version)
        let ending = self.machine.answered(draining: self.client.isDraining)
        let close = ending.closeConnection
        if close {
            head.headers.replaceOrAdd(name: "connection", value: "close")
        }
        if let hsts = self.runtime.hsts {
            head.headers.replaceOrAdd(name: "strict-transport-security", value: hsts)
        }
        self.client.write(.head(head))
        if !answer.body.isEmpty {
            self.client.write(.body(.byteBuffer(self.client.allocator.buffer(bytes: answer.body))))
        }
        self.sentBodyBytes = answer.body.count
        self.client.writeEnd(nil, closing: close)
        if let user = answer.user {
            self.identity = VerifiedToken(subject: user, kind: .api, issuedAt: self.runtime.now(), keyID: nil, expiresAt: nil)
        }
        self.log(status: answer.status.code, reason: answer.reasonCode)
        self.client.exchangeCompleted(closeConnection: close, requestEnded: ending.requestEnded)
    }
}

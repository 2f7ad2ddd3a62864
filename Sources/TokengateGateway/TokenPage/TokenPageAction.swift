//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateHTTP

/// What the gateway does next for a token page request.
enum TokenPageAction: Sendable, Equatable {
    /// Write this answer.
    case answer(TokenPageAnswer)
    /// Ask the RP who is logged in: `GET url` with `Cookie: forwardCookies` and nothing else of the request,
    /// within the configured timeout, then call
    /// ``TokenPageResponder/respond(to:whoami:now:nowMilliseconds:)`` with what came back.
    ///
    /// `forwardCookies` is the browser's cookies without the token page's own cookie (an earlier api token
    /// is none of the RP's business). The gateway must not follow redirects; it passes the status as it is.
    case askWhoami(url: String, forwardCookies: String)
    /// The connected-apps page: ask the store for the user's devices, then call
    /// ``TokenPageResponder/connectedAppsPage(head:user:devices:nowMilliseconds:)`` with them.
    case listDevices(user: String)
    /// A checked button of the connected-apps page: have the store make the change, then call
    /// ``TokenPageResponder/devicesChanged(_:user:outcome:)`` with what it did.
    case changeDevices(user: String, change: ConnectedAppsChange)
}

/// What the "who am I" subrequest gave.
enum TokenPageWhoamiResult: Sendable, Equatable {
    /// The RP answered: its status code and the value of the configured user header (all of them, in order;
    /// more than one is treated as no answer).
    /// `siteHeaderValues`: each `mint_whoami` header's values (a token page minting in the site's format).
    case answered(status: Int, userHeaderValues: [String], siteHeaderValues: [String: [String]] = [:])
    /// No answer: connection refused, timeout, malformed response.
    case failed
    /// Not asked: `max_in_flight` whoami calls were already under way.
    case busy
}

/// Printed without the cookies it would forward (a session, an RP's cookies) and without the answer's headers and
/// body (a token in `Set-Cookie`, `Location` or the page): "\(action)" in a log or a test failure shows neither.
extension TokenPageAction: CustomStringConvertible, CustomDebugStringConvertible {
    var description: String {
        switch self {
        case .answer(let answer):
            "answer(\(answer.status.code), \(answer.reasonCode))"
        case .askWhoami(let url, let cookies):
            "askWhoami(url: \(url), forwardCookies: [\(cookies.utf8.count) bytes redacted])"
        case .listDevices(let user):
            "listDevices(user: \(user))"
        case .changeDevices(let user, let change):
            "changeDevices(user: \(user), change: \(change))"
        }
    }

    var debugDescription: String { self.description }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateHTTP

/// What the token page's login check found for a request: the same check for the page's `GET` and for a click
/// on its confirmation page's "continue" (``TokenPageConfirmationRequest``), which is checked again at the click.
enum TokenPageLoginCheck: Sendable, Equatable {
    /// Logged in as `user` (a confirmation value is bound to the user, ``TokengateTokens/TokenPageConfirmation``).
    case loggedIn(user: String)
    /// No login: the browser is sent to the login page.
    case notLoggedIn
    /// The check cannot say (a broken whoami answer, two session cookies): this answer, never a token.
    case failed(TokenPageAnswer)
    /// The first step in `whoami` mode: ask the RP, then check its answer (the second step never asks again).
    case askWhoami(url: String, forwardCookies: String)
}

/// Printed without the cookies the whoami check would be sent, and without the failure answer's headers and body.
extension TokenPageLoginCheck: CustomStringConvertible, CustomDebugStringConvertible {
    var description: String {
        switch self {
        case .loggedIn(let user): "loggedIn(user: \(user))"
        case .notLoggedIn: "notLoggedIn"
        case .failed(let answer): "failed(\(answer.status.code), \(answer.reasonCode))"
        case .askWhoami(let url, let cookies):
            "askWhoami(url: \(url), forwardCookies: [\(cookies.utf8.count) bytes redacted])"
        }
    }

    var debugDescription: String { self.description }
}

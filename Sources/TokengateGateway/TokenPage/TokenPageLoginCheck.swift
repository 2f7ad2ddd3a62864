//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

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

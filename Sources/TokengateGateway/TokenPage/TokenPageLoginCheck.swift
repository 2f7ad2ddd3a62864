//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// What the token page's login check found for a request: the same check for the page's `GET` and for a click
/// on its confirmation page's "continue" (``TokenPageConfirmationRequest``), which is checked again at the click.
enum TokenPageLoginCheck: Sendable, Equatable {
    /// Logged in as `user`. `session` is what logged the browser in (the session cookie's value, or the cookies
    /// the whoami check was sent): a confirmation value is bound to it (``TokengateTokens/TokenPageConfirmation``).
    /// It is a secret: never put into an answer or a log.
    case loggedIn(user: String, session: String)
    /// No login: the browser is sent to the login page.
    case notLoggedIn
    /// The check cannot say (a broken whoami answer, two session cookies): this answer, never a token.
    case failed(TokenPageAnswer)
    /// The first step in `whoami` mode: ask the RP, then check its answer (the second step never asks again).
    case askWhoami(url: String, forwardCookies: String)
}

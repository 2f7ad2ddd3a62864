//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens
import TokengateHTTP

/// The confirmation page's double-submit cookie (``TokengateTokens/TokenPageConfirmation``): a fresh random
/// value set with the page, whose SHA-256 the "continue" form's value is bound to.
///
/// ### Why `__Host-`
/// The prefix makes browsers refuse the cookie unless it is `Secure`, has `Path=/` and no `Domain`: a sibling
/// domain cannot toss in a cookie of this name, and an `http://` page of the same host cannot set one. The page
/// needs no narrower path: the cookie is short-lived, `HttpOnly`, `SameSite=Strict` (a cross-site form never
/// carries it), and the gateway withholds it from every backend on the page's host and from the whoami check
/// (``GatewayRuntime/withheldCookies(_:route:)``, ``TokenPageResponder``), and never logs it.
///
/// All token pages of a host share the name: a page shown on one replaces the cookie of a page shown on
/// another, and the first page's "continue" is then refused (shown again, it works).
enum TokenPageConfirmationCookie {
    static let name = "__Host-tokengate-confirm"

    /// `Set-Cookie` for a page that shows the form: as long as the form's value lives.
    static func set(_ value: String) -> String {
        "\(Self.name)=\(value); Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=\(TokenPageConfirmationKey.lifetime)"
    }

    /// `Set-Cookie` for the answer to a click: the cookie has done its work.
    static let clear = "\(Self.name)=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0"
}

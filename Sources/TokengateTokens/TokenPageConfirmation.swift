//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// What a token page confirmation value is bound to (``TokenPageConfirmationKey``): the one login it lets the
/// browser continue, and the browser's session that was shown the confirmation page.
///
/// The page asks a logged-in browser before it hands a login to an app whose identity nothing assures (a custom
/// scheme any app can claim, RFC 8252 §8.6). The "continue" button posts a value that only the page could have
/// made, for this session and these parameters: a page that another site or app submits on the user's behalf
/// has no such value, and one the attacker got for its own session, or for another app, state or challenge, does
/// not match.
///
/// The session is kept only as its SHA-256: this value is compared and hashed into a MAC, never shown or logged,
/// and a description of it holds nothing of the cookie.
public struct TokenPageConfirmation: Sendable, Equatable {
    /// The token page (its host and path prefix, ``TokenPageCode/page``): a value from one page does not confirm
    /// a login at another.
    public var page: String
    /// The registered app that will get the callback.
    public var app: String
    /// The app's `state`, as the page echoes it in the callback.
    public var state: String?
    /// The PKCE challenge the code will be bound to (its text), when the app sent one.
    public var challenge: String?
    /// The user the page showed ("continue as alice"): the login check must name the same user at the click.
    public var user: String
    /// SHA-256 of what logged the browser in: the session cookie's value, or the cookies the whoami check saw.
    let sessionDigest: [UInt8]

    /// - Parameter session: what logged the browser in (the session cookie's value, or the cookies forwarded to
    ///   the whoami check); only its SHA-256 is kept.
    public init(page: String, app: String, state: String?, challenge: String?, user: String, session: String) {
        self.page = page
        self.app = app
        self.state = state
        self.challenge = challenge
        self.user = user
        self.sessionDigest = CodeChallenge.sha256(Array(session.utf8))
    }

    /// The bytes the MAC covers after the version and the issue time: every field with its length before it (an
    /// absent one as a zero byte), so no two different confirmations run together into the same bytes.
    var message: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64 + self.page.utf8.count + self.app.utf8.count + self.user.utf8.count + 300)
        func field(_ text: String) {
            let count = UInt32(text.utf8.count)
            bytes += [UInt8(count >> 24), UInt8((count >> 16) & 0xFF), UInt8((count >> 8) & 0xFF), UInt8(count & 0xFF)]
            bytes += text.utf8
        }
        func optional(_ text: String?) {
            guard let text else {
                bytes.append(0)
                return
            }
            bytes.append(1)
            field(text)
        }
        field(self.page)
        field(self.app)
        optional(self.state)
        optional(self.challenge)
        field(self.user)
        bytes += self.sessionDigest
        return bytes
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// What a token page confirmation value is bound to (``TokenPageConfirmationKey``): the one login it lets the
/// browser continue, and the browser that was shown the confirmation page.
///
/// The page asks a logged-in browser before it hands a login to an app whose identity nothing assures (a custom
/// scheme any app can claim, RFC 8252 §8.6). The "continue" button posts a value that only the page could have
/// made, for this browser and these parameters: a page that another site or app submits on the user's behalf
/// has no such value, and one the attacker got for its own browser, or for another app, state or challenge, does
/// not match.
///
/// ### Why a cookie of its own (double submit), not the session
/// The browser is named by a fresh random cookie the page sets with the form (``freshCookieValue()``), not by
/// the cookies that logged it in: those may change between the page and the click without the login changing
/// (a `SameSite=Strict` cookie left off the page's `GET`, which came through a cross-site redirect from the
/// identity provider, but sent with the same-origin click; analytics or affinity cookies rewritten; another tab
/// renewing the session), and every such click would fail. The login is checked again at the click and must
/// name the same ``user``, which stays bound.
///
/// The cookie is kept only as its SHA-256: this value is compared and hashed into a MAC, never shown or logged,
/// and a description of it holds nothing of the cookie.
public struct TokenPageConfirmation: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
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
    /// SHA-256 of the confirmation cookie's value (the double-submit cookie the page set).
    let cookieDigest: [UInt8]

    /// How many random bytes a confirmation cookie holds.
    public static let cookieByteCount = 32

    /// - Parameter cookie: the value of the confirmation cookie the page sets (``freshCookieValue()``); only its
    ///   SHA-256 is kept.
    public init(page: String, app: String, state: String?, challenge: String?, user: String, cookie: String) {
        self.page = page
        self.app = app
        self.state = state
        self.challenge = challenge
        self.user = user
        self.cookieDigest = CodeChallenge.sha256(Array(cookie.utf8))
    }

    /// A new confirmation cookie value: ``cookieByteCount`` bytes from libcrypto's CSPRNG in unpadded base64url
    /// (43 characters). Nil when the generator fails: no page is better than one with a guessable cookie.
    public static func freshCookieValue() -> String? {
        var bytes = [UInt8](repeating: 0, count: Self.cookieByteCount)
        guard bytes.withUnsafeMutableBytes({ CTokengateShims_random($0.baseAddress, $0.count) }) == 1 else {
            return nil
        }
        return Base64URL.encode(bytes)
    }

    /// The login's parameters, never the cookie's digest.
    public var description: String {
        "TokenPageConfirmation(page: \(self.page), app: \(self.app), user: \(self.user), cookie: [redacted])"
    }

    public var debugDescription: String { self.description }

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
        bytes += self.cookieDigest
        return bytes
    }
}

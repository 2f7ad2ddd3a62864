//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// An api token the app keeps, with when it stops working if that is known.
///
/// Its `description`, `debugDescription` and mirror never show the value, so a stray `print(token)` or a
/// crash log does not leak it. Store it in the Keychain (iOS) or `EncryptedSharedPreferences` (Android),
/// not in plain preferences.
public struct StoredToken: Sendable, Hashable, Codable {
    /// The token itself (a JWT from tokengate).
    public let value: String
    /// When the token expires, if known: the earliest of what the delivery said (`Max-Age`, `Expires`,
    /// `expires_in`, `expires_at`) and the token's own `exp` claim. `nil` means it lives until revoked.
    public let expiresAt: Date?
    /// How the token is sent: nil for a bearer token (`Authorization: Bearer`, tokengate's JWTs); otherwise the
    /// site's own login cookie, sent as `Cookie: NAME=VALUE` (a token page with `mint:` in the site's format).
    /// Optional, so that tokens stored before it existed decode as bearer tokens.
    public let cookie: CookieDelivery?

    /// A cookie-delivered token: the cookie's name and, for a signed pair (Express `cookie-session`), the name
    /// and value of the signature cookie sent with it.
    public struct CookieDelivery: Sendable, Hashable, Codable {
        public let name: String
        public let signatureName: String?
        public let signature: String?

        public init(name: String, signatureName: String? = nil, signature: String? = nil) {
            self.name = name
            self.signatureName = signatureName
            self.signature = signature
        }
    }

    public init(value: String, expiresAt: Date?, cookie: CookieDelivery? = nil) {
        self.value = value
        self.expiresAt = expiresAt
        self.cookie = cookie
    }

    /// Whether the token is past its expiry at `now`, or within `leeway` seconds of it (so a request is not
    /// started with a token that dies on the way).
    public func isExpired(now: Date = Date(), leeway: TimeInterval = 0) -> Bool {
        guard let expiresAt = self.expiresAt else { return false }
        return now.addingTimeInterval(leeway) >= expiresAt
    }

    /// A token with the delivery's expiry combined with the token's own `exp` (the earlier wins).
    static func captured(_ value: String, deliveredExpiry: Date?, cookie: CookieDelivery? = nil) -> StoredToken {
        let claimed = JWTExpiry.read(value)
        let expiry: Date?
        switch (deliveredExpiry, claimed) {
        case (nil, nil): expiry = nil
        case (let one?, nil), (nil, let one?): expiry = one
        case (let a?, let b?): expiry = min(a, b)
        }
        return StoredToken(value: value, expiresAt: expiry, cookie: cookie)
    }
}

/// Printed without the signature, which is as good as the token next to a leaked value.
extension StoredToken.CookieDelivery: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String {
        "CookieDelivery(name: \(self.name)" + (self.signatureName.map { ", signatureName: \($0), <redacted>" } ?? "") + ")"
    }

    public var debugDescription: String { self.description }
}

extension StoredToken: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "StoredToken(<redacted>, expiresAt: \(self.expiresAt.map { "\($0)" } ?? "never")"
            + (self.cookie.map { ", cookie: \($0.name)" } ?? "") + ")"
    }

    public var debugDescription: String { self.description }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: ["value": "<redacted>", "expiresAt": self.expiresAt as Any, "cookie": self.cookie?.name as Any])
    }
}

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

    public init(value: String, expiresAt: Date?) {
        self.value = value
        self.expiresAt = expiresAt
    }

    /// Whether the token is past its expiry at `now`, or within `leeway` seconds of it (so a request is not
    /// started with a token that dies on the way).
    public func isExpired(now: Date = Date(), leeway: TimeInterval = 0) -> Bool {
        guard let expiresAt = self.expiresAt else { return false }
        return now.addingTimeInterval(leeway) >= expiresAt
    }

    /// A token with the delivery's expiry combined with the token's own `exp` (the earlier wins).
    static func captured(_ value: String, deliveredExpiry: Date?) -> StoredToken {
        let claimed = JWTExpiry.read(value)
        let expiry: Date?
        switch (deliveredExpiry, claimed) {
        case (nil, nil): expiry = nil
        case (let one?, nil), (nil, let one?): expiry = one
        case (let a?, let b?): expiry = min(a, b)
        }
        return StoredToken(value: value, expiresAt: expiry)
    }
}

extension StoredToken: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "StoredToken(<redacted>, expiresAt: \(self.expiresAt.map { "\($0)" } ?? "never"))"
    }

    public var debugDescription: String { self.description }

    public var customMirror: Mirror {
        Mirror(self, children: ["value": "<redacted>", "expiresAt": self.expiresAt as Any])
    }
}

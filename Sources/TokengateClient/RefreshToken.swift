//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// A refresh token from the token page (apps with `refresh_tokens`): opaque, used once, then replaced by the one
/// the refresh answers with. Printed, mirrored or logged, it shows nothing of its value. Keep it where the access
/// token is kept (Keychain, EncryptedSharedPreferences).
public struct RefreshToken: Sendable, Hashable, Codable {
    public let value: String

    /// The longest value accepted from a site: far above tokengate's 76 characters, far below a memory problem.
    static let maximumLength = 512

    public init(value: String) {
        self.value = value
    }

    /// Whether `value` can be a refresh token: printable ASCII without spaces, within ``maximumLength``.
    static func isValid(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= Self.maximumLength && value.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}

extension RefreshToken: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "RefreshToken(<redacted>)" }
    public var debugDescription: String { self.description }
    public var customMirror: Mirror { Mirror(self, children: ["value": "<redacted>"]) }
}

/// What a code redemption or a refresh gives an app with refresh tokens: the access token (with its expiry) and
/// the refresh token to use next.
public struct TokenGrant: Sendable, Hashable, Codable {
    public var access: StoredToken
    /// Nil for an app without refresh tokens: when the access token dies, the user logs in again.
    public var refresh: RefreshToken?

    public init(access: StoredToken, refresh: RefreshToken?) {
        self.access = access
        self.refresh = refresh
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Why a session-cookie secret or key could not be loaded. The message names the file or the variable, never
/// any byte of what it holds.
public struct SessionCookieKeyError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable code: `unreadable`, `not_set`, `too_short`, `too_long`, `invalid_option`, `crypto`.
    public let code: String
    public let message: String

    init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A setting the format cannot work with (for callers that translate a configuration).
    public static func invalidOption(_ message: String) -> Self { Self("invalid_option", message) }

    public var description: String { self.message }
}

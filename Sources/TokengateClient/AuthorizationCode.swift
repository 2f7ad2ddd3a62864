//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengatePercentEncoding

/// A token page authorization code from the callback: worth a token within 60 seconds, to whoever also holds
/// the verifier. Its `description` and mirror never show the value.
public struct AuthorizationCode: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The longest code accepted (tokengate's are a few hundred bytes).
    static let maximumLength = 4096

    public let value: String

    /// Nil unless `value` looks like tokengate's code: base64url and dots, at most 4096 bytes.
    public init?(_ value: String) {
        guard (1...Self.maximumLength).contains(value.utf8.count),
            // base64url and dots: RFC 3986's unreserved characters without `~`.
            value.utf8.allSatisfy({ PercentEncoding.isUnreserved($0) && $0 != UInt8(ascii: "~") })
        else { return nil }
        self.value = value
    }

    public var description: String { "AuthorizationCode(<redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: ["value": "<redacted>"]) }
}

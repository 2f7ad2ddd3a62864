//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// The rules for a user id that a cutoff can be stored under: ``UserIDRules``, shared with the verifier so that
/// every token it accepts can be revoked for its user.
public enum CutoffUserID {
    /// The longest id accepted, in bytes of UTF-8.
    public static let maxUTF8Bytes = UserIDRules.maxUTF8Bytes
    /// The longest stored key: a user id of a named JWT issuer is kept under its issuer's name (at most 64
    /// bytes), a separator and the id (``IssuerScopedUser``).
    public static let maxStoredUTF8Bytes = UserIDRules.maxUTF8Bytes + 65

    /// Throws ``CutoffStoreError/Code/invalidUserID`` unless `id` keeps ``UserIDRules`` (or is a named JWT
    /// issuer's user: ``IssuerScopedUser/problem(_:)``): non-empty, at most
    /// ``maxUTF8Bytes`` bytes of UTF-8, free of control characters (C0, DEL and C1), no space first or last.
    ///
    /// The message never repeats the id: it may be attacker-chosen and contain terminal escapes.
    public static func validate(_ id: String) throws {
        if let problem = IssuerScopedUser.problem(id) {
            throw CutoffStoreError(code: .invalidUserID, message: "the user id \(problem)")
        }
    }

    /// Whether `id` passes ``validate(_:)``.
    public static func isValid(_ id: String) -> Bool {
        IssuerScopedUser.problem(id) == nil
    }
}

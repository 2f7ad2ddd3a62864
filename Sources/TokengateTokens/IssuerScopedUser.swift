//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The key a cutoff is stored under for a user of a named JWT issuer (`issuers:` of `kind: jwt`): the issuer's
/// name, U+001F (INFORMATION SEPARATOR ONE), the user id.
///
/// A user id never holds a control character (``UserIDRules``: a token whose user claim has one is malformed),
/// so no user of the token page's issuer — whose cutoffs keep the bare user id, as before issuers had names —
/// can ever be keyed like one of another issuer's, and two issuers' `alice` are two keys. The stores take this
/// one shape of control character (``problem(_:)``) and nothing else.
public enum IssuerScopedUser {
    public static let separator: UInt8 = 0x1F

    /// The key of `user` in `issuer`'s cutoffs; `nil` for the token page's issuer (the bare user id).
    public static func key(issuer: String?, user: String) -> String {
        guard let issuer else { return user }
        return issuer + "\u{1F}" + user
    }

    /// The text every key of `issuer` begins with, for a verifier to put before its token's user id.
    public static func prefix(issuer: String) -> String {
        issuer + "\u{1F}"
    }

    /// The issuer name and user id of a stored key, or nil for a bare user id.
    public static func split(_ key: String) -> (issuer: String, user: String)? {
        let bytes = Array(key.utf8)
        guard let index = bytes.firstIndex(of: Self.separator) else { return nil }
        return (String(decoding: bytes[..<index], as: UTF8.self), String(decoding: bytes[(index + 1)...], as: UTF8.self))
    }

    /// Why `key` cannot be stored, or nil: a bare user id keeps ``UserIDRules``; a scoped one is an issuer
    /// name (1–64 of `A-Z a-z 0-9 - _`), one separator, and a user id that keeps ``UserIDRules``.
    public static func problem(_ key: String) -> UserIDRules.Problem? {
        guard let (issuer, user) = Self.split(key) else { return UserIDRules.problem(key) }
        guard Self.isIssuerName(issuer) else { return .controlCharacter }
        return UserIDRules.problem(user)
    }

    /// The names `issuers:` allows: what appears in keys, routes, logs and metrics.
    public static func isIssuerName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                    true
                default:
                    false
                }
            }
    }
}

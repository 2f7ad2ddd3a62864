//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A user id as the cutoff table keys it: compared and hashed by its UTF-8 bytes.
///
/// `String` compares by Unicode canonical equivalence, so a `[String: …]` table holds `"josé"` (U+00E9) and
/// `"jose\u{301}"` (e + combining acute) under one key: a cutoff written for one of them revoked the other,
/// and the admin API showed one user's row while the gateway enforced the other's. User ids are opaque
/// (``UserIDRules``: no normalization, two spellings are two users), and the stores key their rows by bytes,
/// so the table does too.
public struct CutoffUserKey: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let id: String

    public init(_ id: String) {
        self.id = id
    }

    public init(stringLiteral id: String) {
        self.id = id
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.id.utf8.elementsEqual(rhs.id.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        var id = self.id
        id.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    public var description: String { self.id }
}

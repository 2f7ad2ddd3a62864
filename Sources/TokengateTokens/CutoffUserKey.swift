//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

    /// One `memcmp` over the two UTF-8 buffers (a native `String` has one): this runs on every request whose
    /// user has a cutoff, where comparing byte by byte through the UTF-8 view cost tens of nanoseconds.
    public static func == (lhs: Self, rhs: Self) -> Bool {
        let left = lhs.id.utf8
        let right = rhs.id.utf8
        guard left.count == right.count else { return false }
        let compared = left.withContiguousStorageIfAvailable { leftBytes in
            right.withContiguousStorageIfAvailable { rightBytes in
                leftBytes.count == 0 || memcmp(leftBytes.baseAddress!, rightBytes.baseAddress!, leftBytes.count) == 0
            }
        }
        return (compared ?? nil) ?? left.elementsEqual(right)
    }

    public func hash(into hasher: inout Hasher) {
        // The same bytes through the same call whatever the string's storage, so that equal keys hash equal.
        let hashed: Void? = self.id.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if hashed == nil {
            Array(self.id.utf8).withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    public var description: String { self.id }
}

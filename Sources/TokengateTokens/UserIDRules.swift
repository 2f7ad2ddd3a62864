//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// What a user id (the token's user claim, `sub` by default) may be, in one place for every part that handles
/// one: the verifier refuses a token whose id breaks a rule, the signer will not mint one, and the cutoff
/// stores, the CLI and the admin API will not store a cutoff under one.
///
/// They must agree: a token the verifier accepts for an id the store cannot hold could never be revoked for
/// its user. No normalization: two ids that differ in case or Unicode form are two users.
public enum UserIDRules {
    /// The longest id, in bytes of UTF-8: keeps the store and the in-memory snapshot bounded.
    public static let maxUTF8Bytes = 256

    public enum Problem: Equatable, Sendable, CustomStringConvertible {
        case empty
        case tooLong
        /// C0 controls, DEL or C1 controls: the id goes into a header, logs and admin answers.
        case controlCharacter
        /// White space or an invisible format character first or last (a space, NBSP, U+2028, a BOM, a zero-width
        /// space): HTTP trims spaces from the forwarded header, and backends' trim functions (Go's `TrimSpace`,
        /// Java's `strip`, JavaScript's `trim`) more, so the backend would see another user than the one whose
        /// cutoffs were checked.
        case surroundingSpace

        /// Completes "the user id …". Never repeats the id: it may be attacker-chosen.
        public var description: String {
            switch self {
            case .empty: "is empty"
            case .tooLong: "is longer than \(UserIDRules.maxUTF8Bytes) bytes of UTF-8"
            case .controlCharacter: "contains a control character"
            case .surroundingSpace: "begins or ends with white space or an invisible character"
            }
        }
    }

    /// The first rule `id` (UTF-8) breaks, or `nil`.
    public static func problem(_ id: UnsafeBufferPointer<UInt8>) -> Problem? {
        guard let first = id.first, let last = id.last else { return .empty }
        if id.count > Self.maxUTF8Bytes { return .tooLong }
        if first == UInt8(ascii: " ") || last == UInt8(ascii: " ") { return .surroundingSpace }
        var previous: UInt8 = 0
        var beforePrevious: UInt8 = 0
        for byte in id {
            // C1 controls U+0080–U+009F are 0xC2 0x80–0x9F in UTF-8; the line and paragraph separators U+2028 and
            // U+2029 (0xE2 0x80 0xA8/0xA9) end lines in JavaScript and logs, so they count as controls too.
            if byte < 0x20 || byte == 0x7F || (previous == 0xC2 && byte >= 0x80 && byte <= 0x9F)
                || (beforePrevious == 0xE2 && previous == 0x80 && (byte == 0xA8 || byte == 0xA9))
            {
                return .controlCharacter
            }
            beforePrevious = previous
            previous = byte
        }
        // Only ids that begin or end outside ASCII are decoded, at their ends.
        if first >= 0x80, let scalar = Self.scalar(UnsafeBufferPointer(rebasing: id[0..<min(4, id.count)])), Self.isInvisible(scalar) {
            return .surroundingSpace
        }
        if last >= 0x80 {
            var start = id.count - 1
            while start > 0, id.count - start < 4, id[start] & 0xC0 == 0x80 { start -= 1 }
            if let scalar = Self.scalar(UnsafeBufferPointer(rebasing: id[start...])), Self.isInvisible(scalar) {
                return .surroundingSpace
            }
        }
        return nil
    }

    /// The first scalar `bytes` begin with.
    private static func scalar(_ bytes: UnsafeBufferPointer<UInt8>) -> Unicode.Scalar? {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        if case .scalarValue(let scalar) = decoder.decode(&iterator) { return scalar }
        return nil
    }

    /// White space (NBSP, the Unicode spaces) or a format character (a BOM, a zero-width space or joiner).
    private static func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isWhitespace || scalar.properties.generalCategory == .format
    }

    public static func problem(_ id: String) -> Problem? {
        var id = id
        return id.withUTF8 { Self.problem($0) }
    }
}

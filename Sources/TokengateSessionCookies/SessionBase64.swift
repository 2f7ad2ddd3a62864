//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// Strict base64 in the two shapes the frameworks write (RFC 4648): the standard alphabet with `=` padding
/// (Ruby's `strict_encode64` for Rails, Node's `Buffer.toString("base64")` for cookie-session), and the URL-safe
/// alphabet without padding (itsdangerous, `django.core.signing`, keygrip).
///
/// Only the canonical encoding of a byte string is accepted: no whitespace, no padding where there is none (or
/// none missing where there is), no non-zero unused bits in the last character. The frameworks' own decoders are
/// laxer (Python's `urlsafe_b64decode` skips stray bytes), but what they write is always canonical, and being
/// strict means a cookie cannot be altered without changing the bytes its MAC covers.
enum SessionBase64: Sendable {
    case standardPadded
    case urlSafeUnpadded

    /// 0xFF marks a byte outside the alphabet; `=` is outside both (padding is handled apart).
    private static let standardTable = Self.table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    private static let urlSafeTable = Self.table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    private static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlSafeAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static func table(_ alphabet: String) -> [UInt8] {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.utf8.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }

    /// At least the decoded size of `count` characters (exact for the unpadded form), or nil when no
    /// encoding in this shape has that length.
    func decodedCapacity(_ count: Int) -> Int? {
        switch self {
        case .standardPadded:
            return count % 4 == 0 ? count / 4 * 3 : nil
        case .urlSafeUnpadded:
            switch count & 3 {
            case 0: return count / 4 * 3
            case 2: return count / 4 * 3 + 1
            case 3: return count / 4 * 3 + 2
            default: return nil
            }
        }
    }

    /// Decodes `input` into `output` (``decodedCapacity(_:)`` bytes). The decoded length, or nil for anything
    /// but a canonical encoding.
    func decode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawPointer) -> Int? {
        var n = input.count
        guard self.decodedCapacity(n) != nil else { return nil }
        if case .standardPadded = self, n > 0 {
            // One or two `=` close the last quantum; the characters they stand in for are then absent.
            if input[n - 1] == UInt8(ascii: "=") {
                n -= 1
                if input[n - 1] == UInt8(ascii: "=") { n -= 1 }
                if n & 3 == 1 || n & 3 == 0 { return nil }
            }
        }
        let table = self.isStandard ? Self.standardTable : Self.urlSafeTable
        return table.withUnsafeBufferPointer { table in
            Base64URL.decodeCanonical(input, count: n, table: table, into: output)
        }
    }

    private var isStandard: Bool {
        if case .standardPadded = self { return true }
        return false
    }

    /// Decodes a whole array (minting, tests). Nil for non-canonical input.
    func decode(_ text: [UInt8]) -> [UInt8]? {
        guard let capacity = self.decodedCapacity(text.count) else { return nil }
        var out = [UInt8](repeating: 0, count: max(capacity, 1))
        let length = text.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { self.decode(input, into: $0.baseAddress!) }
        }
        guard let length else { return nil }
        out.removeSubrange(length...)
        return out
    }

    /// The encoding of `bytes` in this shape.
    func encode(_ bytes: [UInt8]) -> [UInt8] {
        let alphabet = self.isStandard ? Self.standardAlphabet : Self.urlSafeAlphabet
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            out.append(alphabet[Int(v >> 6 & 63)])
            out.append(alphabet[Int(v & 63)])
            i += 3
        }
        switch bytes.count - i {
        case 1:
            let v = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            if self.isStandard { out += [UInt8(ascii: "="), UInt8(ascii: "=")] }
        case 2:
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            out.append(alphabet[Int(v >> 6 & 63)])
            if self.isStandard { out.append(UInt8(ascii: "=")) }
        default:
            break
        }
        return out
    }
}

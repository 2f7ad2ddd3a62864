//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Strict base64url (RFC 4648 §5) without padding, as JWS requires (RFC 7515 §2).
///
/// Rejected: `=`, `+`, `/`, whitespace and any other byte outside the alphabet, a length of 1 mod 4, and
/// non-zero unused bits in the last character (so every byte string has exactly one accepted encoding and a
/// token cannot be altered without changing the signed bytes' meaning).
package enum Base64URL {
    /// 0xFF marks a byte outside the alphabet.
    private static let table: [UInt8] = {
        var t = [UInt8](repeating: 0xFF, count: 256)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        for (i, c) in alphabet.enumerated() {
            t[Int(c)] = UInt8(i)
        }
        return t
    }()

    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8
    )

    /// The decoded size of `count` encoded characters, or nil when no unpadded encoding has that length.
    @inline(__always)
    static func decodedLength(_ count: Int) -> Int? {
        switch count & 3 {
        case 0: return count / 4 * 3
        case 2: return count / 4 * 3 + 1
        case 3: return count / 4 * 3 + 2
        default: return nil
        }
    }

    /// Decodes `input` into `output` (which must hold `decodedLength(input.count)` bytes).
    /// Returns the decoded length, or nil for any non-canonical input.
    static func decode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawPointer) -> Int? {
        guard let length = self.decodedLength(input.count) else { return nil }
        let decoded = self.table.withUnsafeBufferPointer { table in
            Self.decodeCanonical(input, count: input.count, table: table, into: output)
        }
        assert(decoded == nil || decoded == length)
        return decoded
    }

    /// The decoding loop for any 64-character alphabet, given as a 256-entry `table` (a character's value, 0xFF
    /// outside the alphabet): the first `count` bytes of `input` (padding already taken off), canonical only — a
    /// length of 1 mod 4, a byte outside the alphabet or non-zero unused bits in the last character give nil.
    /// The session-cookie formats decode their alphabets (standard and URL-safe) with it too.
    @inline(__always)
    package static func decodeCanonical(
        _ input: UnsafeRawBufferPointer,
        count n: Int,
        table: UnsafeBufferPointer<UInt8>,
        into output: UnsafeMutableRawPointer
    ) -> Int? {
        var i = 0
        var o = 0
        while i + 4 <= n {
            let a = table[Int(input[i])]
            let b = table[Int(input[i + 1])]
            let c = table[Int(input[i + 2])]
            let d = table[Int(input[i + 3])]
            if (a | b | c | d) & 0xC0 != 0 { return nil }
            output.storeBytes(of: a << 2 | b >> 4, toByteOffset: o, as: UInt8.self)
            output.storeBytes(of: b << 4 | c >> 2, toByteOffset: o + 1, as: UInt8.self)
            output.storeBytes(of: c << 6 | d, toByteOffset: o + 2, as: UInt8.self)
            i += 4
            o += 3
        }
        switch n - i {
        case 0:
            break
        case 2:
            let a = table[Int(input[i])]
            let b = table[Int(input[i + 1])]
            if (a | b) & 0xC0 != 0 || b & 0x0F != 0 { return nil }
            output.storeBytes(of: a << 2 | b >> 4, toByteOffset: o, as: UInt8.self)
            o += 1
        case 3:
            let a = table[Int(input[i])]
            let b = table[Int(input[i + 1])]
            let c = table[Int(input[i + 2])]
            if (a | b | c) & 0xC0 != 0 || c & 0x03 != 0 { return nil }
            output.storeBytes(of: a << 2 | b >> 4, toByteOffset: o, as: UInt8.self)
            output.storeBytes(of: b << 4 | c >> 2, toByteOffset: o + 1, as: UInt8.self)
            o += 2
        default:
            return nil
        }
        return o
    }

    /// Decodes a string (load-time use: key files). Nil for non-canonical input.
    static func decode(_ string: String) -> [UInt8]? {
        let input = Array(string.utf8)
        guard let length = self.decodedLength(input.count) else { return nil }
        if length == 0 { return [] }
        var out = [UInt8](repeating: 0, count: length)
        let decoded = input.withUnsafeBytes { source in
            out.withUnsafeMutableBytes { target in self.decode(source, into: target.baseAddress!) }
        }
        return decoded == nil ? nil : out
    }

    /// Encodes without padding.
    static func encode<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let input = Array(bytes)
        var out = [UInt8]()
        out.reserveCapacity((input.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= input.count {
            let v = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
            out.append(self.alphabet[Int(v >> 18 & 63)])
            out.append(self.alphabet[Int(v >> 12 & 63)])
            out.append(self.alphabet[Int(v >> 6 & 63)])
            out.append(self.alphabet[Int(v & 63)])
            i += 3
        }
        switch input.count - i {
        case 1:
            let v = UInt32(input[i]) << 16
            out.append(self.alphabet[Int(v >> 18 & 63)])
            out.append(self.alphabet[Int(v >> 12 & 63)])
        case 2:
            let v = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
            out.append(self.alphabet[Int(v >> 18 & 63)])
            out.append(self.alphabet[Int(v >> 12 & 63)])
            out.append(self.alphabet[Int(v >> 6 & 63)])
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }
}

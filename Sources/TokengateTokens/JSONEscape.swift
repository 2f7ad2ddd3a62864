//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// RFC 8259 §7's string escapes, for both JSON readers: ``JSONScanner`` (a token's header and payload, on the
/// hot path) and ``JSONTopLevelMembers`` (the cutoffs file, the admin API's bodies). One table, so that the
/// two can never disagree on what a string holds.
package enum JSONEscape {
    /// The byte a one-character escape stands for, given the byte after the backslash: `\"`, `\\`, `\/`, `\b`,
    /// `\f`, `\n`, `\r`, `\t`. `nil` for `u` (four ``hexValue(_:)`` digits follow) and for anything else, which
    /// is not JSON.
    @inline(__always)
    static func simple(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): byte
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "r"): 0x0D
        case UInt8(ascii: "t"): 0x09
        default: nil
        }
    }

    /// The value of one hex digit of a `\uXXXX` escape (either case); `nil` for any other byte.
    @inline(__always)
    package static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Writes `scalar` (a Unicode scalar value a `\u` escape decoded to) as UTF-8 at `base + offset`, in place
    /// of the escape it came from (never longer than it). Returns the bytes written.
    @inline(__always)
    package static func writeUTF8(_ scalar: UInt32, to base: UnsafeMutablePointer<UInt8>, at offset: Int) -> Int {
        switch scalar {
        case 0..<0x80:
            base[offset] = UInt8(scalar)
            return 1
        case 0x80..<0x800:
            base[offset] = UInt8(0xC0 | scalar >> 6)
            base[offset + 1] = UInt8(0x80 | scalar & 0x3F)
            return 2
        case 0x800..<0x10000:
            base[offset] = UInt8(0xE0 | scalar >> 12)
            base[offset + 1] = UInt8(0x80 | scalar >> 6 & 0x3F)
            base[offset + 2] = UInt8(0x80 | scalar & 0x3F)
            return 3
        default:
            base[offset] = UInt8(0xF0 | scalar >> 18)
            base[offset + 1] = UInt8(0x80 | scalar >> 12 & 0x3F)
            base[offset + 2] = UInt8(0x80 | scalar >> 6 & 0x3F)
            base[offset + 3] = UInt8(0x80 | scalar & 0x3F)
            return 4
        }
    }
}

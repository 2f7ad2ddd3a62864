//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// RFC 8259 §7's string escapes, for both JSON readers: ``JSONScanner`` (a token's header and payload, on the
/// hot path) and ``JSONTopLevelMembers`` (the cutoffs file, the admin API's bodies). One table, so that the
/// two can never disagree on what a string holds.
enum JSONEscape {
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
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

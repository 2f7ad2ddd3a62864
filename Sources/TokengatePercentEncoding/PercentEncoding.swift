//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Percent-encoding and -decoding (RFC 3986, and `application/x-www-form-urlencoded` with `+` as a space),
/// shared by the gateway (form-body tokens, the token page's URLs) and the mobile client library, so both
/// sides read and write the same bytes. Strict: a broken `%` escape or a result that is not UTF-8 is `nil`,
/// never a half-decoded value — a half-decoded token must never be verified or sent.
public enum PercentEncoding {
    /// Every byte outside RFC 3986's unreserved set (`A-Z a-z 0-9 - . _ ~`) as `%XX`, so the value can sit in
    /// a query, a fragment or a form body without changing its structure, and no CR, LF or space ever
    /// reaches a header.
    public static func encode(_ value: String) -> String {
        var result = ""
        result.reserveCapacity(value.utf8.count)
        for byte in value.utf8 {
            if Self.isUnreserved(byte) {
                result.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                result += "%"
                result.unicodeScalars.append(Unicode.Scalar(Self.hexDigits[Int(byte >> 4)]))
                result.unicodeScalars.append(Unicode.Scalar(Self.hexDigits[Int(byte & 0x0F)]))
            }
        }
        return result
    }

    public static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// A byte a path segment may carry as it is (RFC 3986 `pchar` without `;`): unreserved, the sub-delims
    /// `! $ & ' ( ) * + , =`, `:` and `@`. Its percent-escape and the byte itself name the same path to every
    /// backend that decodes paths, and a route prefix holds nothing else, so the gateway decodes these
    /// escapes before routing. `;` is left out: path parameters are refused, so an encoded one stays encoded.
    public static func isPathCharacter(_ byte: UInt8) -> Bool {
        if Self.isUnreserved(byte) { return true }
        switch byte {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: "="),
            UInt8(ascii: ":"), UInt8(ascii: "@"):
            return true
        default:
            return false
        }
    }

    /// Decodes `bytes`; with `plusIsSpace`, `+` is a space (form encoding). `nil` for a broken escape or
    /// invalid UTF-8.
    public static func decode<Bytes: Collection<UInt8>>(_ bytes: Bytes, plusIsSpace: Bool = true) -> String? {
        Self.decodedBytes(bytes, plusIsSpace: plusIsSpace).flatMap(Self.utf8String)
    }

    /// The decoded bytes, whatever they encode (the caller decides what it accepts: a path may hold any
    /// byte); with `plusIsSpace`, `+` is a space. `nil` for a broken escape, unless `keepingBrokenEscapes`: then
    /// a `%` that starts no valid escape stays as it is (for looking into a URL whatever it holds, never for a
    /// value that is used).
    public static func decodedBytes<Bytes: Collection<UInt8>>(
        _ bytes: Bytes,
        plusIsSpace: Bool,
        keepingBrokenEscapes: Bool = false
    ) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            index = bytes.index(after: index)
            if byte == UInt8(ascii: "%") {
                let second = index == bytes.endIndex ? index : bytes.index(after: index)
                guard second != bytes.endIndex, let high = Self.hexValue(bytes[index]), let low = Self.hexValue(bytes[second]) else {
                    if keepingBrokenEscapes {
                        output.append(byte)
                        continue
                    }
                    return nil
                }
                index = bytes.index(after: second)
                output.append(high << 4 | low)
            } else {
                output.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        return output
    }

    /// UTF-8 validation without `String(validating:)` (newer than the Apple platforms the client supports).
    public static func utf8String(_ bytes: [UInt8]) -> String? {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        var result = ""
        result.reserveCapacity(bytes.count)
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): result.unicodeScalars.append(scalar)
            case .emptyInput: return result
            case .error: return nil
            }
        }
    }

    /// The byte `%HL` stands for, or `nil` when `high` and `low` are not both hex digits (either case).
    public static func escapedByte(_ high: UInt8, _ low: UInt8) -> UInt8? {
        guard let high = Self.hexValue(high), let low = Self.hexValue(low) else { return nil }
        return high << 4 | low
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Percent-encoding and the `application/x-www-form-urlencoded` parser (WHATWG URL standard), strict: a
/// broken `%` escape or a result that is not UTF-8 is an error, never a half-decoded value.
enum URLEncoding {
    /// Every byte outside `A-Z a-z 0-9 - . _ ~` as `%XX`.
    static func encode(_ value: String) -> String {
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

    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// Percent-decoding; with `plusIsSpace`, `+` is a space (form encoding). `nil` for a broken escape or
    /// invalid UTF-8.
    static func decode<S: StringProtocol>(_ text: S, plusIsSpace: Bool = true) -> String? {
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = Self.hexValue(bytes[index + 1]),
                    let low = Self.hexValue(bytes[index + 2])
                else { return nil }
                output.append(high << 4 | low)
                index += 3
                continue
            }
            output.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            index += 1
        }
        return Self.utf8String(output)
    }

    /// The decoded `name=value` pairs of a query or fragment, in order. `nil` when any pair is broken.
    static func pairs(_ text: Substring) -> [(name: String, value: String)]? {
        var result: [(name: String, value: String)] = []
        for piece in text.split(separator: "&", omittingEmptySubsequences: true) {
            let piece = Substring(piece)
            let name: Substring
            let value: Substring
            if let equals = piece.firstIndex(of: "=") {
                name = piece[piece.startIndex..<equals]
                value = piece[piece.index(after: equals)...]
            } else {
                name = piece[...]
                value = ""
            }
            guard let decodedName = Self.decode(name), let decodedValue = Self.decode(value) else { return nil }
            result.append((decodedName, decodedValue))
        }
        return result
    }

    /// UTF-8 validation without `String(validating:)` (newer than the Apple platforms this library supports).
    static func utf8String(_ bytes: [UInt8]) -> String? {
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

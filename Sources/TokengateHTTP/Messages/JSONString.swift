//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//


/// Minimal JSON string quoting for the gateway's own answers and log lines, which are built by hand so
/// that the request path does not go through `JSONEncoder`.
///
/// Escaped: `"` and `\`, every control character (`\n`, `\r` and `\t` by name, the others and DEL as
/// `\u00XX`), and U+2028/U+2029 (line separators to a JavaScript reader of the log). Everything else is
/// copied as UTF-8.
public enum JSONString {
    /// `value` as a JSON string literal, quotes included.
    public static func quote(_ value: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(value.utf8.count + 2)
        Self.append(value, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `value` as a JSON string literal, quotes included, to `output`.
    ///
    /// Works on the UTF-8 bytes and copies the runs that need no escape in one go: every access-log line
    /// quotes ten or so values, and a scalar at a time through `String` cost microseconds a line.
    public static func append(_ value: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { bytes in
            var runStart = 0
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                let escapedLength: Int
                if byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    escapedLength = 1
                } else if byte == 0xE2, index + 2 < bytes.count, bytes[index + 1] == 0x80,
                    bytes[index + 2] == 0xA8 || bytes[index + 2] == 0xA9
                {
                    escapedLength = 3  // U+2028 or U+2029
                } else {
                    index += 1
                    continue
                }
                output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                Self.appendEscape(of: bytes[index..<(index + escapedLength)], to: &output)
                index += escapedLength
                runStart = index
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
        }
        output.append(UInt8(ascii: "\""))
    }

    private static func appendEscape(of bytes: Slice<UnsafeBufferPointer<UInt8>>, to output: inout [UInt8]) {
        let first = bytes[bytes.startIndex]
        switch first {
        case UInt8(ascii: "\""): output.append(contentsOf: #"\""#.utf8)
        case UInt8(ascii: "\\"): output.append(contentsOf: #"\\"#.utf8)
        case UInt8(ascii: "\n"): output.append(contentsOf: #"\n"#.utf8)
        case UInt8(ascii: "\r"): output.append(contentsOf: #"\r"#.utf8)
        case UInt8(ascii: "\t"): output.append(contentsOf: #"\t"#.utf8)
        default:
            // A control character or DEL (one byte), or U+2028/U+2029 (E2 80 A8/A9).
            let scalar: UInt32 = bytes.count == 1 ? UInt32(first) : 0x2028 + UInt32(bytes[bytes.startIndex + 2] - 0xA8)
            output.append(contentsOf: #"\u"#.utf8)
            for shift in stride(from: 12, through: 0, by: -4) {
                output.append(Self.hexDigits[Int((scalar >> UInt32(shift)) & 0xF)])
            }
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}

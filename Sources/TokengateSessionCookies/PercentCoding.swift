//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The URL escaping Rack puts on Rails' cookie values (`+`, `/` and `=` of base64 as `%2B`, `%2F`, `%3D`).
enum PercentCoding {
    /// Decodes `%XX` (either case) into `output` (at least `input.count` bytes); other bytes are copied as they
    /// are, so a value sent unescaped (in a header, say) reads the same. Nil for a `%` without two hex digits.
    static func decode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawPointer) -> Int? {
        var i = 0
        var o = 0
        while i < input.count {
            var byte = input[i]
            if byte == UInt8(ascii: "%") {
                guard i + 2 < input.count, let high = Self.hex(input[i + 1]), let low = Self.hex(input[i + 2]) else {
                    return nil
                }
                byte = high << 4 | low
                i += 3
            } else {
                i += 1
            }
            output.storeBytes(of: byte, toByteOffset: o, as: UInt8.self)
            o += 1
        }
        return o
    }

    /// Escapes everything but `A-Z a-z 0-9 - . _ *`, as Rack's `escape` (`URI.encode_www_form_component`) does.
    static func encode(_ bytes: [UInt8]) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + bytes.count / 8)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "*"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Counts the members of a JSON body's top-level object that have a given (ASCII) name.
///
/// `JSONSerialization` keeps one value when an object repeats a name, and which one is not specified; a
/// backend's parser may pick the other. A token field given twice is therefore refused before either is
/// believed (the same rule as two tokens sent two ways). Names are compared after unescaping (`"tok\u0065n"`
/// is `token`). Meant for bodies `JSONSerialization` has already accepted: it tokenizes, it does not validate.
enum JSONMemberCounter {
    /// How many top-level members are called `name`; `nil` when the body is not an object.
    static func count(of name: String, in body: [UInt8]) -> Int? {
        let target = Array(name.utf8)
        var index = Self.skipWhitespace(body, 0)
        guard index < body.count, body[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        var count = 0
        while true {
            index = Self.skipWhitespace(body, index)
            guard index < body.count else { return nil }
            if body[index] == UInt8(ascii: "}") { return count }
            if body[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard body[index] == UInt8(ascii: "\"") else { return nil }
            guard let (key, afterKey) = Self.string(body, index) else { return nil }
            if key == target { count += 1 }
            index = Self.skipWhitespace(body, afterKey)
            guard index < body.count, body[index] == UInt8(ascii: ":") else { return nil }
            guard let afterValue = Self.skipValue(body, index + 1) else { return nil }
            index = afterValue
        }
    }

    private static func skipWhitespace(_ body: [UInt8], _ start: Int) -> Int {
        var index = start
        while index < body.count, body[index] == 0x20 || body[index] == 0x09 || body[index] == 0x0A || body[index] == 0x0D {
            index += 1
        }
        return index
    }

    /// The unescaped bytes of the string starting at `start` (a quote) and the index after its closing
    /// quote. An escape for a non-ASCII character yields 0xFF, which no configured (ASCII) name contains.
    private static func string(_ body: [UInt8], _ start: Int) -> ([UInt8], Int)? {
        var bytes: [UInt8] = []
        var index = start + 1
        while index < body.count {
            let byte = body[index]
            if byte == UInt8(ascii: "\"") { return (bytes, index + 1) }
            guard byte == UInt8(ascii: "\\") else {
                bytes.append(byte)
                index += 1
                continue
            }
            guard index + 1 < body.count else { return nil }
            let escaped = body[index + 1]
            if escaped == UInt8(ascii: "u") {
                guard index + 5 < body.count,
                    let code = UInt16(String(decoding: body[(index + 2)...(index + 5)], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(code < 0x80 ? UInt8(code) : 0xFF)
                index += 6
            } else {
                bytes.append(Self.simpleEscapes[escaped] ?? escaped)
                index += 2
            }
        }
        return nil
    }

    /// `\b \f \n \r \t`; the other one-character escapes (`\" \\ \/`) stand for themselves.
    private static let simpleEscapes: [UInt8: UInt8] = [
        UInt8(ascii: "b"): 0x08, UInt8(ascii: "f"): 0x0C, UInt8(ascii: "n"): 0x0A, UInt8(ascii: "r"): 0x0D,
        UInt8(ascii: "t"): 0x09,
    ]

    /// The index after the value starting at or after `start` (strings, numbers, literals, nested containers).
    private static func skipValue(_ body: [UInt8], _ start: Int) -> Int? {
        var index = Self.skipWhitespace(body, start)
        var depth = 0
        while index < body.count {
            let byte = body[index]
            switch byte {
            case UInt8(ascii: "\""):
                guard let (_, after) = Self.string(body, index) else { return nil }
                index = after
                if depth == 0 { return index }
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { return index }  // The end of the top-level object: the caller sees it.
                depth -= 1
                if depth == 0 { return index + 1 }
            case UInt8(ascii: ","):
                if depth == 0 { return index }
            default:
                break
            }
            index += 1
        }
        return nil
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// What a value from `JSONSerialization` is, with JSON's booleans told apart from its numbers.
///
/// On Linux `JSONSerialization` returns `NSNumber` for both `true` and `1`, and `as? Bool` / `as? Int64`
/// succeed for either, so `"force": 1` would silently mean `true` and `"revoked_before": true` would mean 1.
/// The number's `objCType` tells them apart: the parser makes booleans with type `c` (char) and numbers with
/// integer or `d` (double) types; it never makes a char-typed number.
package enum JSONScalar {
    case null
    case bool(Bool)
    case integer(Int64)
    /// A number that is not an integer that fits in 64 bits (a fraction, an exponent, or too large).
    case otherNumber
    case string(String)
    case array
    case object([String: Any])

    package init(_ value: Any) {
        switch value {
        case is NSNull:
            self = .null
        case let string as String:
            self = .string(string)
        case let object as [String: Any]:
            self = .object(object)
        case is [Any]:
            self = .array
        case let number as NSNumber:
            let type = String(cString: number.objCType)
            if type == "c" || type == "B" {
                self = .bool(number.boolValue)
            } else if ["d", "f"].contains(type) || number is NSDecimalNumber {
                self = .otherNumber
            } else if let integer = value as? Int64 {
                self = .integer(integer)
            } else {
                self = .otherNumber
            }
        default:
            self = .otherNumber
        }
    }

    /// A short name for error messages ("a string", "true").
    package var kindDescription: String {
        switch self {
        case .null: return "null"
        case .bool(let value): return value ? "true" : "false"
        case .integer: return "an integer"
        case .otherNumber: return "a non-integer number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// Minimal JSON text output for the admin API: only what tokengate emits (objects of strings, integers, null,
/// booleans), without a Codable round trip.
package struct JSONWriter {
    package private(set) var text = "{"
    private var first = true

    package init() {}

    package mutating func field(_ key: String, _ value: String?) {
        self.key(key)
        if let value {
            Self.appendString(value, to: &self.text)
        } else {
            self.text += "null"
        }
    }

    package mutating func field(_ key: String, _ value: Int64?) {
        self.key(key)
        self.text += value.map { String($0) } ?? "null"
    }

    package mutating func field(_ key: String, _ value: UInt64) {
        self.key(key)
        self.text += String(value)
    }

    package mutating func field(_ key: String, _ value: Bool) {
        self.key(key)
        self.text += value ? "true" : "false"
    }

    /// A member whose value is already JSON text: `objects` finished by other writers, as an array.
    package mutating func field(_ key: String, objects: [JSONWriter]) {
        self.key(key)
        self.text += "[" + objects.map { $0.finished() }.joined(separator: ",") + "]"
    }

    package func finished() -> String {
        self.text + "}"
    }

    private mutating func key(_ key: String) {
        if !self.first {
            self.text += ","
        }
        self.first = false
        Self.appendString(key, to: &self.text)
        self.text += ":"
    }

    /// Escapes per RFC 8259 §7: quote, backslash and every control character.
    package static func appendString(_ value: String, to text: inout String) {
        text += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value)
                    || scalar.value == 0x2028 || scalar.value == 0x2029
                {
                    let hex = String(scalar.value, radix: 16)
                    text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    text.unicodeScalars.append(scalar)
                }
            }
        }
        text += "\""
    }
}

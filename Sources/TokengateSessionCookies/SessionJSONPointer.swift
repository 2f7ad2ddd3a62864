//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Where a value is inside a session's JSON: a JSON Pointer (RFC 6901), such as `/_auth_user_id` or, for Devise's
/// `[[id], salt]` under the key `warden.user.user.key`, `/warden.user.user.key/0/0`.
///
/// Why a pointer and not a dotted path: the frameworks' own keys contain dots (Devise's does), so a dotted path
/// could not name them. `~1` stands for `/` and `~0` for `~` inside a name, as the RFC says; a step of decimal
/// digits without a leading zero is an array index too (and a member name when it meets an object).
public struct SessionJSONPointer: Sendable, Hashable, CustomStringConvertible {
    /// The deepest pointer accepted: deeper than the scanner's nesting limit could never match.
    public static let maxSteps = 8

    struct Step: Sendable, Hashable {
        /// The member name, unescaped, as UTF-8.
        var name: [UInt8]
        /// The array index the step also names, when it is one.
        var index: Int?
    }

    let steps: [Step]
    /// The pointer as written (RFC 6901 form).
    public let description: String

    /// Nil unless `text` is a non-empty pointer (`/` first) of at most ``maxSteps`` reference tokens with valid
    /// escapes, each 1…128 bytes.
    public init?(_ text: String) {
        guard text.hasPrefix("/"), text.utf8.count <= 1024 else { return nil }
        var steps: [Step] = []
        for raw in text.utf8.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            var name: [UInt8] = []
            var iterator = raw.makeIterator()
            while let byte = iterator.next() {
                if byte == UInt8(ascii: "~") {
                    switch iterator.next() {
                    case UInt8(ascii: "0"): name.append(UInt8(ascii: "~"))
                    case UInt8(ascii: "1"): name.append(UInt8(ascii: "/"))
                    default: return nil
                    }
                } else {
                    name.append(byte)
                }
            }
            guard !name.isEmpty, name.count <= 128 else { return nil }
            var index: Int?
            if name.count <= 6, name.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                name == [UInt8(ascii: "0")] || name[0] != UInt8(ascii: "0")
            {
                index = name.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            }
            steps.append(Step(name: name, index: index))
        }
        guard steps.count <= Self.maxSteps else { return nil }
        self.steps = steps
        self.description = text
    }

    init(steps: [Step], description: String) {
        self.steps = steps
        self.description = description
    }

    /// This pointer under `prefix` (Rails 7.1's `{"_rails": {"data": …}}` envelope).
    func under(_ prefix: SessionJSONPointer) -> SessionJSONPointer {
        SessionJSONPointer(steps: prefix.steps + self.steps, description: prefix.description + self.description)
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The top-level members of a JSON object body, found by one strict pass over its bytes.
///
/// ### Overview
/// A route with a `json:FIELD` token source reads the token from a member of the request body, and (unless
/// the route keeps the token) forwards the body without that member. Three things must hold for that to be
/// safe, and this type is where all three are decided, from the same bytes:
/// - the gateway and the backend read the same body: the body must be exactly one RFC 8259 object, with
///   nothing a lenient parser would guess about (trailing commas, leading zeros, bad escapes, lone
///   surrogates, invalid UTF-8, bytes after the object);
/// - the token is named once: each top-level member is reported with its name decoded (`"tok\u0065n"` is
///   `token`), so a body naming the field twice can be refused instead of trusting whichever value a parser
///   happens to keep (a backend's parser may keep the other one);
/// - the backend gets the client's bytes: the member is removed by splicing bytes out
///   (``removing(_:)``), never by re-serializing, so key order, number spellings (`1.0`,
///   `12345678901234567890`), escapes and whitespace of everything else arrive unchanged.
///
/// The cutoff files read their user ids with it too (``CutoffsJSON``): a member's name keeps the bytes it was
/// written with, where Foundation's parsers put names equal under Unicode canonical equivalence on one key.
///
/// ### Implementation
/// A single forward scan with no recursion: nested containers are tracked on an explicit stack capped at
/// ``maximumDepth``, so an attacker's `[[[[…` costs one byte of stack per level and is refused past the
/// cap. Only top-level member names are decoded during the scan; a string value is decoded on demand by
/// ``stringValue(of:)`` (usually just the token's), so a large body costs no allocation per member value;
/// given the one name it looks for, the scan keeps only those members, so it costs no memory per member either.
/// Pure: no Foundation, no I/O.
public struct JSONTopLevelMembers: Sendable {
    /// The deepest nesting accepted, counting the top-level object as 1. The same as Foundation's
    /// `JSONSerialization`, which the gateway used before, so no body it accepted is refused for depth.
    public static let maximumDepth = 512

    /// One member of the top-level object.
    public struct Member: Equatable, Sendable {
        /// The name with its escapes resolved.
        public let name: String
        /// The value is a JSON string (its text in ``valueRange`` starts with a quote).
        public let valueIsString: Bool
        /// The bytes of the value, quotes included for a string.
        public let valueRange: Range<Int>
        /// The bytes to cut to remove this member and leave a valid object: the name through the value, plus
        /// one separating comma — the following one for the first member, the preceding one for the others
        /// (and no comma when it is the only member). Whitespace outside this range stays.
        public let removalRange: Range<Int>
    }

    /// The body the members were found in.
    public let bytes: [UInt8]
    /// The top-level members in body order, duplicates included (only those with the name given to
    /// ``init(parsing:keepingMembersNamed:)``, when one was).
    public let members: [Member]

    /// Scans `bytes`, which must be exactly one JSON object with optional whitespace around it.
    ///
    /// - Parameters:
    ///   - bytes: The whole body.
    ///   - name: When given, ``members`` keeps only the members with this name (compared as in
    ///     ``members(named:)``). Every member is still scanned and its name decoded, but a body of a million
    ///     small members then costs no memory per member: what the gateway does with a body it only searches.
    public init(parsing bytes: [UInt8], keepingMembersNamed name: String? = nil) throws(SyntaxError) {
        self.bytes = bytes
        self.members = try bytes.withUnsafeBufferPointer { buffer throws(SyntaxError) in
            var scanner = Scanner(buffer)
            return try scanner.topLevelObject(keeping: name)
        }
    }

    /// The members whose name is `name`.
    ///
    /// Names are compared as Swift strings, that is up to Unicode canonical equivalence: `"caf\u00e9"` and
    /// `"cafe\u0301"` both match a field configured as `café`. A backend that keys its objects by such
    /// strings (Swift's own dictionaries do) would otherwise read a second, unchecked member as the field.
    /// For the ASCII names nearly every route uses this is plain byte equality.
    public func members(named name: String) -> [Member] {
        self.members.filter { $0.name == name }
    }

    /// The decoded value of `member` when it is a string, `nil` otherwise.
    public func stringValue(of member: Member) -> String? {
        guard member.valueIsString else { return nil }
        return self.bytes.withUnsafeBufferPointer { buffer in
            var scanner = Scanner(buffer, at: member.valueRange.lowerBound)
            var decoded: [UInt8] = []
            decoded.reserveCapacity(member.valueRange.count)
            // The scan that made `member` already validated these bytes, so this cannot fail.
            guard (try? scanner.string(decodingInto: &decoded)) != nil else { return nil }
            return String(decoding: decoded, as: UTF8.self)
        }
    }

    /// The body without `member`, every other byte unchanged.
    public func removing(_ member: Member) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(self.bytes.count - member.removalRange.count)
        result += self.bytes[..<member.removalRange.lowerBound]
        result += self.bytes[member.removalRange.upperBound...]
        return result
    }

    /// `bytes` without its one top-level member named `name`; `nil` when `bytes` is not a valid object or
    /// does not have exactly one such member (removing one of two would forward the other).
    public static func removingMember(named name: String, from bytes: [UInt8]) -> [UInt8]? {
        guard let object = try? JSONTopLevelMembers(parsing: bytes, keepingMembersNamed: name) else { return nil }
        guard object.members.count == 1, let member = object.members.first else { return nil }
        return object.removing(member)
    }
}

// MARK: Errors.

extension JSONTopLevelMembers {
    /// Why a body is not one valid JSON object, and the byte offset where that was found.
    ///
    /// Carries no body bytes: a token could be among them, and these errors may be logged.
    public struct SyntaxError: Error, Hashable, Sendable, CustomStringConvertible {
        public struct Code: Hashable, Sendable, CustomStringConvertible {
            private enum Base: String, Hashable, Sendable {
                case notAnObject = "not_an_object"
                case unexpectedEnd = "unexpected_end"
                case unexpectedByte = "unexpected_byte"
                case controlCharacter = "control_character"
                case invalidEscape = "invalid_escape"
                case unpairedSurrogate = "unpaired_surrogate"
                case invalidUTF8 = "invalid_utf8"
                case invalidNumber = "invalid_number"
                case invalidLiteral = "invalid_literal"
                case tooDeep = "too_deep"
                case trailingBytes = "trailing_bytes"
            }

            private let base: Base
            private init(_ base: Base) { self.base = base }

            /// The body does not start (after whitespace) with `{`.
            public static let notAnObject = Self(.notAnObject)
            /// The body ends inside the object.
            public static let unexpectedEnd = Self(.unexpectedEnd)
            /// A byte the grammar does not allow here (a trailing comma, a missing colon, `01`, …).
            public static let unexpectedByte = Self(.unexpectedByte)
            /// A raw byte below 0x20 inside a string.
            public static let controlCharacter = Self(.controlCharacter)
            /// A backslash not followed by one of `" \ / b f n r t` or by `u` and four hex digits.
            public static let invalidEscape = Self(.invalidEscape)
            /// A `\uD800`–`\uDFFF` escape that is not a high surrogate followed by a low one.
            public static let unpairedSurrogate = Self(.unpairedSurrogate)
            /// A string's bytes are not well-formed UTF-8 (overlong, surrogate, above U+10FFFF, truncated).
            public static let invalidUTF8 = Self(.invalidUTF8)
            /// A number outside the RFC 8259 grammar (`-`, `1.`, `.5`, `1e`, `+1`).
            public static let invalidNumber = Self(.invalidNumber)
            /// Something starting like `true`, `false` or `null` that is not one.
            public static let invalidLiteral = Self(.invalidLiteral)
            /// Nesting deeper than ``JSONTopLevelMembers/maximumDepth``.
            public static let tooDeep = Self(.tooDeep)
            /// Bytes other than whitespace after the object.
            public static let trailingBytes = Self(.trailingBytes)

            public var description: String { self.base.rawValue }
        }

        public let code: Code
        /// Where in the body the problem was found.
        public let offset: Int

        public var description: String { "\(self.code) at byte \(self.offset)" }
    }
}

// MARK: The scan.

extension JSONTopLevelMembers {
    /// The cursor of one scan over a body's bytes.
    ///
    /// Works on an `UnsafeBufferPointer` borrowed for the duration of the scan so the per-byte loop does no
    /// array bounds or uniqueness checks beyond its own `index < count` tests.
    fileprivate struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index: Int
        /// The open containers below the current top-level member's value (`{` or `[`), innermost last.
        private var containers: [UInt8] = []

        init(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int = 0) {
            self.bytes = bytes
            self.index = index
        }

        // MARK: Top level.

        /// The whole body: whitespace, one object, whitespace, end. Returns the top-level members, or only
        /// those called `wanted` when it is given.
        mutating func topLevelObject(keeping wanted: String?) throws(SyntaxError) -> [Member] {
            var members: [Member] = []
            var name: [UInt8] = []
            self.skipWhitespace()
            guard self.index < self.bytes.count else { throw self.failure(.unexpectedEnd) }
            guard self.bytes[self.index] == UInt8(ascii: "{") else { throw self.failure(.notAnObject) }
            self.index += 1
            self.skipWhitespace()
            if try self.peek() == UInt8(ascii: "}") {
                self.index += 1
            } else {
                /// The comma after the previous member: the one a later member is removed with.
                var previousComma: Int?
                while true {
                    guard try self.peek() == UInt8(ascii: "\"") else { throw self.failure(.unexpectedByte) }
                    let start = self.index
                    name.removeAll(keepingCapacity: true)
                    try self.string(decodingInto: &name)
                    try self.colon()
                    let valueStart = self.index
                    let valueIsString = try self.peek() == UInt8(ascii: "\"")
                    try self.value(enclosingDepth: 1)
                    let valueEnd = self.index
                    self.skipWhitespace()
                    let next = try self.peek()
                    guard next == UInt8(ascii: ",") || next == UInt8(ascii: "}") else {
                        throw self.failure(.unexpectedByte)
                    }
                    if wanted.map({ Self.decodedName(name, is: $0) }) ?? true {
                        let removal: Range<Int>
                        if let comma = previousComma {
                            removal = comma..<valueEnd
                        } else if next == UInt8(ascii: ",") {
                            removal = start..<(self.index + 1)
                        } else {
                            removal = start..<valueEnd
                        }
                        members.append(
                            Member(
                                name: String(decoding: name, as: UTF8.self),
                                valueIsString: valueIsString,
                                valueRange: valueStart..<valueEnd,
                                removalRange: removal
                            )
                        )
                    }
                    previousComma = self.index
                    self.index += 1
                    if next == UInt8(ascii: "}") { break }
                    self.skipWhitespace()
                }
            }
            self.skipWhitespace()
            guard self.index == self.bytes.count else { throw self.failure(.trailingBytes) }
            return members
        }

        /// Whether the decoded (UTF-8) name `decoded` is `name`, with the same meaning as `String ==`
        /// (canonical equivalence), but without making a `String` for the common all-ASCII miss.
        ///
        /// Two different ASCII strings are never canonically equivalent; a non-ASCII one can be equivalent to
        /// an ASCII one (U+212A KELVIN SIGN is `K`), so only the all-ASCII case takes the shortcut.
        private static func decodedName(_ decoded: [UInt8], is name: String) -> Bool {
            if decoded.elementsEqual(name.utf8) { return true }
            if decoded.allSatisfy({ $0 < 0x80 }), name.utf8.allSatisfy({ $0 < 0x80 }) { return false }
            return String(decoding: decoded, as: UTF8.self) == name
        }

        // MARK: Values.

        /// Scans one value starting at `index` (no whitespace before it), containers and all.
        ///
        /// Iterative: an open container is pushed on ``containers`` and the loop goes on with its first
        /// element, so depth costs a byte of heap per level, never a stack frame. `enclosingDepth` is how
        /// many containers are already open around this value.
        mutating func value(enclosingDepth: Int) throws(SyntaxError) {
            self.containers.removeAll(keepingCapacity: true)
            while true {
                // At the start of a value.
                let byte = try self.peek()
                switch byte {
                case UInt8(ascii: "\""):
                    try self.string()
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    try self.number()
                case UInt8(ascii: "t"):
                    try self.literal("true")
                case UInt8(ascii: "f"):
                    try self.literal("false")
                case UInt8(ascii: "n"):
                    try self.literal("null")
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    guard enclosingDepth + self.containers.count < JSONTopLevelMembers.maximumDepth else {
                        throw self.failure(.tooDeep)
                    }
                    self.index += 1
                    self.skipWhitespace()
                    if try self.peek() == Self.closer(of: byte) {
                        self.index += 1  // Empty: a complete value, handled below.
                    } else {
                        self.containers.append(byte)
                        if byte == UInt8(ascii: "{") { try self.memberName() }
                        continue
                    }
                default:
                    throw self.failure(.unexpectedByte)
                }
                // After a value: close what ends here, then go on with the next element, or finish.
                while true {
                    guard let open = self.containers.last else { return }
                    self.skipWhitespace()
                    let next = try self.peek()
                    self.index += 1
                    if next == Self.closer(of: open) {
                        self.containers.removeLast()
                        continue
                    }
                    guard next == UInt8(ascii: ",") else { throw self.failure(.unexpectedByte, at: self.index - 1) }
                    self.skipWhitespace()
                    if open == UInt8(ascii: "{") { try self.memberName() }
                    break
                }
            }
        }

        private static func closer(of open: UInt8) -> UInt8 {
            open == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
        }

        /// A nested member's name, its colon and the whitespace up to its value.
        private mutating func memberName() throws(SyntaxError) {
            guard try self.peek() == UInt8(ascii: "\"") else { throw self.failure(.unexpectedByte) }
            try self.string()
            try self.colon()
        }

        /// Whitespace, `:`, whitespace.
        private mutating func colon() throws(SyntaxError) {
            self.skipWhitespace()
            guard try self.peek() == UInt8(ascii: ":") else { throw self.failure(.unexpectedByte) }
            self.index += 1
            self.skipWhitespace()
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`. What follows is the caller's to check,
        /// which is how `01` and `1x` are refused.
        private mutating func number() throws(SyntaxError) {
            if self.bytes[self.index] == UInt8(ascii: "-") { self.index += 1 }
            switch try self.peek() {
            case UInt8(ascii: "0"):
                self.index += 1
            case UInt8(ascii: "1")...UInt8(ascii: "9"):
                self.skipDigits()
            default:
                throw self.failure(.invalidNumber)
            }
            if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ".") {
                self.index += 1
                guard self.index < self.bytes.count, Self.isDigit(self.bytes[self.index]) else {
                    throw self.failure(.invalidNumber)
                }
                self.skipDigits()
            }
            if self.index < self.bytes.count, self.bytes[self.index] | 0x20 == UInt8(ascii: "e") {
                self.index += 1
                if self.index < self.bytes.count,
                    self.bytes[self.index] == UInt8(ascii: "+") || self.bytes[self.index] == UInt8(ascii: "-")
                {
                    self.index += 1
                }
                guard self.index < self.bytes.count, Self.isDigit(self.bytes[self.index]) else {
                    throw self.failure(.invalidNumber)
                }
                self.skipDigits()
            }
        }

        private mutating func skipDigits() {
            while self.index < self.bytes.count, Self.isDigit(self.bytes[self.index]) { self.index += 1 }
        }

        private static func isDigit(_ byte: UInt8) -> Bool {
            byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
        }

        private mutating func literal(_ word: StaticString) throws(SyntaxError) {
            let count = word.utf8CodeUnitCount
            guard self.bytes.count - self.index >= count else { throw self.failure(.unexpectedEnd) }
            for offset in 0..<count where self.bytes[self.index + offset] != word.utf8Start[offset] {
                throw self.failure(.invalidLiteral)
            }
            self.index += count
        }

        // MARK: Strings.

        /// Scans the string starting at `index` (a quote) without keeping its contents.
        private mutating func string() throws(SyntaxError) {
            var unused: [UInt8] = []
            try self.string(decoding: false, into: &unused)
        }

        /// Scans the string starting at `index` (a quote) and appends its decoded UTF-8 to `output`.
        mutating func string(decodingInto output: inout [UInt8]) throws(SyntaxError) {
            try self.string(decoding: true, into: &output)
        }

        /// One string: validated in full whether or not it is decoded, so that what the gateway skips is
        /// exactly as strict as what it reads.
        private mutating func string(decoding: Bool, into output: inout [UInt8]) throws(SyntaxError) {
            self.index += 1  // The opening quote.
            while true {
                guard self.index < self.bytes.count else { throw self.failure(.unexpectedEnd) }
                let byte = self.bytes[self.index]
                switch byte {
                case UInt8(ascii: "\""):
                    self.index += 1
                    return
                case UInt8(ascii: "\\"):
                    try self.escape(decoding: decoding, into: &output)
                case 0x00..<0x20:
                    throw self.failure(.controlCharacter)
                case 0x20..<0x80:
                    if decoding { output.append(byte) }
                    self.index += 1
                default:
                    let length = try self.utf8SequenceLength()
                    if decoding { output += self.bytes[self.index..<(self.index + length)] }
                    self.index += length
                }
            }
        }

        /// The length of the well-formed UTF-8 sequence at `index` (Unicode §3.9, table 3-7): no overlong
        /// forms, no encoded surrogates, nothing above U+10FFFF.
        private func utf8SequenceLength() throws(SyntaxError) -> Int {
            // The second byte's range is what rules out overlong forms, surrogates and values past U+10FFFF.
            let (length, second): (Int, ClosedRange<UInt8>)
            switch self.bytes[self.index] {
            case 0xC2...0xDF: (length, second) = (2, 0x80...0xBF)
            case 0xE0: (length, second) = (3, 0xA0...0xBF)
            case 0xE1...0xEC, 0xEE...0xEF: (length, second) = (3, 0x80...0xBF)
            case 0xED: (length, second) = (3, 0x80...0x9F)
            case 0xF0: (length, second) = (4, 0x90...0xBF)
            case 0xF1...0xF3: (length, second) = (4, 0x80...0xBF)
            case 0xF4: (length, second) = (4, 0x80...0x8F)
            default: throw self.failure(.invalidUTF8)
            }
            guard self.bytes.count - self.index >= length else { throw self.failure(.invalidUTF8) }
            guard second.contains(self.bytes[self.index + 1]) else { throw self.failure(.invalidUTF8) }
            for offset in 2..<length where self.bytes[self.index + offset] & 0xC0 != 0x80 {
                throw self.failure(.invalidUTF8)
            }
            return length
        }

        /// The escape at `index` (a backslash).
        private mutating func escape(decoding: Bool, into output: inout [UInt8]) throws(SyntaxError) {
            guard self.index + 1 < self.bytes.count else { throw self.failure(.unexpectedEnd) }
            let escaped = self.bytes[self.index + 1]
            if escaped == UInt8(ascii: "u") {
                let scalar = try self.unicodeEscape()
                if decoding { output += UTF8.encode(scalar)! }
                return
            }
            guard let simple = JSONEscape.simple(escaped) else { throw self.failure(.invalidEscape) }
            if decoding { output.append(simple) }
            self.index += 2
        }

        /// `\uXXXX`, or a `\uD8xx\uDCxx` surrogate pair, at `index`; a surrogate on its own is refused (it
        /// has no UTF-8 form, and parsers disagree on what to make of it).
        private mutating func unicodeEscape() throws(SyntaxError) -> Unicode.Scalar {
            let start = self.index
            let unit = try self.hex4(at: self.index + 2)
            self.index += 6
            switch unit {
            case 0xD800...0xDBFF:
                guard self.bytes.count - self.index >= 2, self.bytes[self.index] == UInt8(ascii: "\\"),
                    self.bytes[self.index + 1] == UInt8(ascii: "u")
                else { throw self.failure(.unpairedSurrogate, at: start) }
                let low = try self.hex4(at: self.index + 2)
                guard (0xDC00...0xDFFF).contains(low) else { throw self.failure(.unpairedSurrogate, at: start) }
                self.index += 6
                return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))!
            case 0xDC00...0xDFFF:
                throw self.failure(.unpairedSurrogate, at: start)
            default:
                return Unicode.Scalar(unit)!
            }
        }

        private func hex4(at position: Int) throws(SyntaxError) -> UInt32 {
            guard self.bytes.count - position >= 4 else { throw self.failure(.unexpectedEnd, at: position) }
            var value: UInt32 = 0
            for offset in 0..<4 {
                guard let digit = JSONEscape.hexValue(self.bytes[position + offset]) else {
                    throw self.failure(.invalidEscape, at: position + offset)
                }
                value = value << 4 | UInt32(digit)
            }
            return value
        }

        // MARK: Helpers.

        /// RFC 8259 whitespace: space, tab, line feed, carriage return (nothing else, not even a BOM).
        private mutating func skipWhitespace() {
            while self.index < self.bytes.count {
                switch self.bytes[self.index] {
                case 0x20, 0x09, 0x0A, 0x0D: self.index += 1
                default: return
                }
            }
        }

        /// The byte at `index`, which must exist.
        private func peek() throws(SyntaxError) -> UInt8 {
            guard self.index < self.bytes.count else { throw self.failure(.unexpectedEnd) }
            return self.bytes[self.index]
        }

        private func failure(_ code: SyntaxError.Code, at offset: Int? = nil) -> SyntaxError {
            SyntaxError(code: code, offset: offset ?? self.index)
        }
    }
}

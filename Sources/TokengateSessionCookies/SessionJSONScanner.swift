//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// One value a pointer found: its kind and its bytes (a string's decoded UTF-8, a number's text).
struct SessionJSONHit: Sendable {
    enum Kind: UInt8, Sendable {
        case absent, string, number, `true`, `false`, null, object, array
    }

    var kind: Kind = .absent
    var start = 0
    var count = 0
}

/// Up to ``capacity`` hits, inline (no allocation on the hot path).
struct SessionJSONHits: Sendable {
    static let capacity = 8
    private var storage: (
        SessionJSONHit, SessionJSONHit, SessionJSONHit, SessionJSONHit, SessionJSONHit, SessionJSONHit, SessionJSONHit,
        SessionJSONHit
    ) = (.init(), .init(), .init(), .init(), .init(), .init(), .init(), .init())

    subscript(index: Int) -> SessionJSONHit {
        get {
            precondition(index >= 0 && index < Self.capacity, "hit index out of range")
            return withUnsafeBytes(of: self.storage) { $0.load(fromByteOffset: index * MemoryLayout<SessionJSONHit>.stride, as: SessionJSONHit.self) }
        }
        set {
            precondition(index >= 0 && index < Self.capacity, "hit index out of range")
            withUnsafeMutableBytes(of: &self.storage) {
                $0.storeBytes(of: newValue, toByteOffset: index * MemoryLayout<SessionJSONHit>.stride, as: SessionJSONHit.self)
            }
        }
    }
}

/// A strict JSON reader (RFC 8259) that walks a session's JSON once and notes where each of a few
/// ``SessionJSONPointer``s lands, without building any value.
///
/// ### Overview
/// Sessions are small but attacker-shaped once a secret leaks or a framework bug lets one through, and even an
/// authentic one is the site's data, not ours: the whole document is validated (grammar, UTF-8, escapes), nesting
/// is capped at ``maxDepth`` (a specific refusal), and a pointer that lands twice (a duplicate member name, where
/// Ruby, Python and JavaScript keep the last one and a first-wins reader would see another user) is a refusal too.
///
/// ### Implementation
/// Recursive descent, one level of Swift recursion per level of nesting (bounded by ``maxDepth``). At each value
/// the set of pointers whose steps so far match the path is a bit mask; a member or element passes on the bits
/// whose next step it matches. Strings are unescaped in place (an escape is never shorter than what it decodes
/// to), so the buffer must be private scratch memory, which it always is: the output of a base64 decode, a
/// decryption or an inflate.
struct SessionJSONScanner {
    /// Containers nested deeper than this are refused. The frameworks' sessions are two or three levels deep.
    static let maxDepth = 32

    enum Failure: Sendable {
        case syntax
        case tooDeep
        case duplicate
    }

    private let base: UnsafeMutablePointer<UInt8>
    private let end: Int
    private var position = 0
    private let pointers: [SessionJSONPointer]
    private(set) var hits = SessionJSONHits()

    /// Scans `count` bytes at `base` for `pointers` (at most ``SessionJSONHits/capacity``).
    init(base: UnsafeMutablePointer<UInt8>, count: Int, pointers: [SessionJSONPointer]) {
        precondition(pointers.count <= SessionJSONHits.capacity, "too many pointers for one scan")
        self.base = base
        self.end = count
        self.pointers = pointers
    }

    /// Reads the document: one JSON object and nothing after it but white space.
    mutating func scan() -> Failure? {
        self.skipWhitespace()
        guard self.position < self.end, self.base[self.position] == UInt8(ascii: "{") else { return .syntax }
        let all: UInt16 = self.pointers.isEmpty ? 0 : UInt16((1 << self.pointers.count) - 1)
        if let failure = self.value(depth: 0, live: all) { return failure }
        self.skipWhitespace()
        return self.position == self.end ? nil : .syntax
    }

    /// The bytes of a hit (valid while the scanned buffer is).
    func bytes(_ hit: SessionJSONHit) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: self.base + hit.start, count: hit.count)
    }

    // MARK: Values

    private mutating func value(depth: Int, live: UInt16) -> Failure? {
        self.skipWhitespace()
        guard self.position < self.end else { return .syntax }
        var targets: UInt16 = 0
        var deeper: UInt16 = 0
        var bits = live
        while bits != 0 {
            let index = bits.trailingZeroBitCount
            bits &= bits - 1
            if self.pointers[index].steps.count == depth {
                targets |= 1 << index
            } else {
                deeper |= 1 << index
            }
        }
        let start = self.position
        var hit = SessionJSONHit(kind: .absent, start: start, count: 0)
        switch self.base[self.position] {
        case UInt8(ascii: "\""):
            guard let (stringStart, count) = self.string() else { return .syntax }
            hit = SessionJSONHit(kind: .string, start: stringStart, count: count)
        case UInt8(ascii: "{"):
            guard depth < Self.maxDepth else { return .tooDeep }
            if let failure = self.object(depth: depth, live: deeper) { return failure }
            hit.kind = .object
        case UInt8(ascii: "["):
            guard depth < Self.maxDepth else { return .tooDeep }
            if let failure = self.array(depth: depth, live: deeper) { return failure }
            hit.kind = .array
        case UInt8(ascii: "t"):
            guard self.literal("true") else { return .syntax }
            hit.kind = .true
        case UInt8(ascii: "f"):
            guard self.literal("false") else { return .syntax }
            hit.kind = .false
        case UInt8(ascii: "n"):
            guard self.literal("null") else { return .syntax }
            hit.kind = .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            guard self.number() else { return .syntax }
            hit = SessionJSONHit(kind: .number, start: start, count: self.position - start)
        default:
            return .syntax
        }
        var bitsToRecord = targets
        while bitsToRecord != 0 {
            let index = bitsToRecord.trailingZeroBitCount
            bitsToRecord &= bitsToRecord - 1
            guard self.hits[index].kind == .absent else { return .duplicate }
            self.hits[index] = hit
        }
        return nil
    }

    /// `{` at `position`. Members pass on the pointers whose step at `depth` is their name.
    private mutating func object(depth: Int, live: UInt16) -> Failure? {
        self.position += 1
        self.skipWhitespace()
        if self.position < self.end, self.base[self.position] == UInt8(ascii: "}") {
            self.position += 1
            return nil
        }
        while true {
            self.skipWhitespace()
            guard self.position < self.end, self.base[self.position] == UInt8(ascii: "\""),
                let (nameStart, nameCount) = self.string()
            else { return .syntax }
            self.skipWhitespace()
            guard self.position < self.end, self.base[self.position] == UInt8(ascii: ":") else { return .syntax }
            self.position += 1
            var memberLive: UInt16 = 0
            var bits = live
            while bits != 0 {
                let index = bits.trailingZeroBitCount
                bits &= bits - 1
                if self.equals(nameStart, nameCount, self.pointers[index].steps[depth].name) {
                    memberLive |= 1 << index
                }
            }
            if let failure = self.value(depth: depth + 1, live: memberLive) { return failure }
            self.skipWhitespace()
            guard self.position < self.end else { return .syntax }
            let next = self.base[self.position]
            self.position += 1
            if next == UInt8(ascii: "}") { return nil }
            guard next == UInt8(ascii: ",") else { return .syntax }
        }
    }

    /// `[` at `position`. Elements pass on the pointers whose step at `depth` is their index.
    private mutating func array(depth: Int, live: UInt16) -> Failure? {
        self.position += 1
        self.skipWhitespace()
        if self.position < self.end, self.base[self.position] == UInt8(ascii: "]") {
            self.position += 1
            return nil
        }
        var element = 0
        while true {
            var elementLive: UInt16 = 0
            var bits = live
            while bits != 0 {
                let index = bits.trailingZeroBitCount
                bits &= bits - 1
                if self.pointers[index].steps[depth].index == element { elementLive |= 1 << index }
            }
            if let failure = self.value(depth: depth + 1, live: elementLive) { return failure }
            element += 1
            self.skipWhitespace()
            guard self.position < self.end else { return .syntax }
            let next = self.base[self.position]
            self.position += 1
            if next == UInt8(ascii: "]") { return nil }
            guard next == UInt8(ascii: ",") else { return .syntax }
        }
    }

    private func equals(_ start: Int, _ count: Int, _ name: [UInt8]) -> Bool {
        guard count == name.count else { return false }
        return name.withUnsafeBufferPointer { name in
            for offset in 0..<count where self.base[start + offset] != name[offset] { return false }
            return true
        }
    }

    // MARK: Scalars

    private mutating func skipWhitespace() {
        while self.position < self.end {
            switch self.base[self.position] {
            case 0x20, 0x09, 0x0A, 0x0D: self.position += 1
            default: return
            }
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard self.end - self.position >= count else { return false }
        for offset in 0..<count where self.base[self.position + offset] != word.utf8Start[offset] { return false }
        self.position += count
        return true
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func number() -> Bool {
        if self.base[self.position] == UInt8(ascii: "-") { self.position += 1 }
        guard self.position < self.end else { return false }
        if self.base[self.position] == UInt8(ascii: "0") {
            self.position += 1
        } else {
            guard self.isDigit(self.position) else { return false }
            while self.isDigit(self.position) { self.position += 1 }
        }
        if self.position < self.end, self.base[self.position] == UInt8(ascii: ".") {
            self.position += 1
            guard self.isDigit(self.position) else { return false }
            while self.isDigit(self.position) { self.position += 1 }
        }
        if self.position < self.end, self.base[self.position] | 0x20 == UInt8(ascii: "e") {
            self.position += 1
            if self.position < self.end,
                self.base[self.position] == UInt8(ascii: "+") || self.base[self.position] == UInt8(ascii: "-")
            {
                self.position += 1
            }
            guard self.isDigit(self.position) else { return false }
            while self.isDigit(self.position) { self.position += 1 }
        }
        // A digit or letter straight after (`01`, `1x`) is caught by the caller's grammar.
        return true
    }

    private func isDigit(_ offset: Int) -> Bool {
        offset < self.end && self.base[offset] >= UInt8(ascii: "0") && self.base[offset] <= UInt8(ascii: "9")
    }

    /// The string at `position` (a quote), unescaped in place: the start and length of its UTF-8.
    private mutating func string() -> (Int, Int)? {
        self.position += 1
        let start = self.position
        var write = self.position
        while self.position < self.end {
            let byte = self.base[self.position]
            switch byte {
            case UInt8(ascii: "\""):
                self.position += 1
                return (start, write - start)
            case UInt8(ascii: "\\"):
                guard self.position + 1 < self.end else { return nil }
                let escaped = self.base[self.position + 1]
                self.position += 2
                let simple: UInt8
                switch escaped {
                case UInt8(ascii: "\""): simple = 0x22
                case UInt8(ascii: "\\"): simple = 0x5C
                case UInt8(ascii: "/"): simple = 0x2F
                case UInt8(ascii: "b"): simple = 0x08
                case UInt8(ascii: "f"): simple = 0x0C
                case UInt8(ascii: "n"): simple = 0x0A
                case UInt8(ascii: "r"): simple = 0x0D
                case UInt8(ascii: "t"): simple = 0x09
                case UInt8(ascii: "u"):
                    guard let scalar = self.unicodeEscape() else { return nil }
                    write += self.writeUTF8(scalar, at: write)
                    continue
                default:
                    return nil
                }
                self.base[write] = simple
                write += 1
            case 0x00..<0x20:
                return nil
            case 0x20..<0x80:
                self.base[write] = byte
                write += 1
                self.position += 1
            default:
                guard let length = self.utf8SequenceLength() else { return nil }
                for offset in 0..<length { self.base[write + offset] = self.base[self.position + offset] }
                write += length
                self.position += length
            }
        }
        return nil
    }

    /// After `\u`: four hex digits, or a surrogate pair; a lone surrogate is refused.
    private mutating func unicodeEscape() -> UInt32? {
        guard let unit = self.hex4() else { return nil }
        switch unit {
        case 0xD800...0xDBFF:
            guard self.end - self.position >= 2, self.base[self.position] == UInt8(ascii: "\\"),
                self.base[self.position + 1] == UInt8(ascii: "u")
            else { return nil }
            self.position += 2
            guard let low = self.hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
            return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
        case 0xDC00...0xDFFF:
            return nil
        default:
            return unit
        }
    }

    private mutating func hex4() -> UInt32? {
        guard self.end - self.position >= 4 else { return nil }
        var value: UInt32 = 0
        for offset in 0..<4 {
            guard let digit = JSONEscape.hexValue(self.base[self.position + offset]) else { return nil }
            value = value << 4 | UInt32(digit)
        }
        self.position += 4
        return value
    }

    private func writeUTF8(_ scalar: UInt32, at offset: Int) -> Int {
        JSONEscape.writeUTF8(scalar, to: self.base, at: offset)
    }

    /// The length of the well-formed UTF-8 sequence at `position` (Unicode §3.9, table 3-7), or nil.
    private func utf8SequenceLength() -> Int? {
        let length: Int
        let second: ClosedRange<UInt8>
        switch self.base[self.position] {
        case 0xC2...0xDF: (length, second) = (2, 0x80...0xBF)
        case 0xE0: (length, second) = (3, 0xA0...0xBF)
        case 0xE1...0xEC, 0xEE...0xEF: (length, second) = (3, 0x80...0xBF)
        case 0xED: (length, second) = (3, 0x80...0x9F)
        case 0xF0: (length, second) = (4, 0x90...0xBF)
        case 0xF1...0xF3: (length, second) = (4, 0x80...0xBF)
        case 0xF4: (length, second) = (4, 0x80...0x8F)
        default: return nil
        }
        guard self.end - self.position >= length, second.contains(self.base[self.position + 1]) else { return nil }
        for offset in 2..<length where self.base[self.position + offset] & 0xC0 != 0x80 { return nil }
        return length
    }
}

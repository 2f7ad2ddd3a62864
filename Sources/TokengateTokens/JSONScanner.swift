//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A run of bytes inside a scanner's buffer.
struct ByteSpan: Sendable {
    var start: Int
    var count: Int
}

/// A strict, allocation-free JSON scanner over a decoded JWS header or payload.
///
/// ### Overview
/// The hot path must not allocate, so neither Foundation's JSONSerialization nor Codable can be used. This
/// scanner walks the bytes once, validates RFC 8259 grammar and UTF-8 (RFC 8259 §8.1), and hands back
/// spans of the buffer instead of values.
///
/// ### Implementation
/// Strings are unescaped *in place*: an escape sequence is never shorter than what it decodes to (`\n` is 2
/// bytes for 1, `\uXXXX` 6 for at most 3, a surrogate pair 12 for 4), so the write cursor never overtakes
/// the read cursor and a decoded string is a span of the same buffer. The buffer must therefore be private
/// scratch memory (it is: the base64url decoder's output). Nesting is limited to ``maxDepth``.
struct JSONScanner {
    static let maxDepth = 16

    let base: UnsafeMutablePointer<UInt8>
    let end: Int
    var position: Int

    init(base: UnsafeMutablePointer<UInt8>, count: Int) {
        self.base = base
        self.end = count
        self.position = 0
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while self.position < self.end {
            switch self.base[self.position] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                self.position += 1
            default:
                return
            }
        }
    }

    /// Skips whitespace, then consumes `byte` if it is next.
    @inline(__always)
    mutating func consume(_ byte: UInt8) -> Bool {
        self.skipWhitespace()
        if self.position < self.end && self.base[self.position] == byte {
            self.position += 1
            return true
        }
        return false
    }

    /// Skips whitespace and returns the next byte without consuming it.
    @inline(__always)
    mutating func peek() -> UInt8? {
        self.skipWhitespace()
        return self.position < self.end ? self.base[self.position] : nil
    }

    /// True when only whitespace remains.
    mutating func atEnd() -> Bool {
        self.skipWhitespace()
        return self.position == self.end
    }

    /// Whether `span` holds exactly `bytes`.
    @inline(__always)
    func equals(_ span: ByteSpan, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard span.count == bytes.count else { return false }
        var i = 0
        while i < span.count {
            if self.base[span.start + i] != bytes[i] { return false }
            i += 1
        }
        return true
    }

    /// Whether two spans hold the same bytes.
    @inline(__always)
    func equals(_ a: ByteSpan, _ b: ByteSpan) -> Bool {
        guard a.count == b.count else { return false }
        var i = 0
        while i < a.count {
            if self.base[a.start + i] != self.base[b.start + i] { return false }
            i += 1
        }
        return true
    }

    func bytes(_ span: ByteSpan) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: self.base + span.start, count: span.count)
    }

    // MARK: Objects

    enum MemberStep {
        case member(ByteSpan)
        case end
        case error
    }

    /// Reads the next member name of an object whose `{` was consumed, and the `:` after it.
    /// `first` must start true and is maintained by this method (it decides whether a `,` is needed).
    mutating func nextMember(first: inout Bool) -> MemberStep {
        guard let next = self.peek() else { return .error }
        if next == UInt8(ascii: "}") {
            self.position += 1
            return .end
        }
        if !first {
            guard next == UInt8(ascii: ",") else { return .error }
            self.position += 1
            self.skipWhitespace()
        }
        first = false
        guard let name = self.parseString(), self.consume(UInt8(ascii: ":")) else { return .error }
        self.skipWhitespace()
        return .member(name)
    }

    // MARK: Values

    /// Parses a string at the current position (after whitespace), unescaping it in place.
    /// Returns the span of the decoded UTF-8 bytes, or nil for invalid JSON or invalid UTF-8.
    mutating func parseString() -> ByteSpan? {
        self.skipWhitespace()
        guard self.position < self.end, self.base[self.position] == UInt8(ascii: "\"") else { return nil }
        self.position += 1
        let start = self.position
        var write = self.position
        while self.position < self.end {
            let c = self.base[self.position]
            if c == UInt8(ascii: "\"") {
                self.position += 1
                return ByteSpan(start: start, count: write - start)
            } else if c == UInt8(ascii: "\\") {
                self.position += 1
                guard self.position < self.end else { return nil }
                let e = self.base[self.position]
                self.position += 1
                if e == UInt8(ascii: "u") {
                    guard let unit = self.readHex4() else { return nil }
                    var scalar = unit
                    if unit >= 0xD800 && unit <= 0xDBFF {
                        guard self.position + 2 <= self.end, self.base[self.position] == UInt8(ascii: "\\"),
                            self.base[self.position + 1] == UInt8(ascii: "u")
                        else { return nil }
                        self.position += 2
                        guard let low = self.readHex4(), low >= 0xDC00 && low <= 0xDFFF else { return nil }
                        scalar = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    } else if unit >= 0xDC00 && unit <= 0xDFFF {
                        return nil  // a lone low surrogate is not a Unicode scalar
                    }
                    write += self.writeUTF8(scalar, at: write)
                    continue
                }
                guard let simple = JSONEscape.simple(e) else { return nil }
                self.base[write] = simple
                write += 1
            } else if c < 0x20 {
                return nil  // control characters must be escaped (RFC 8259 §7)
            } else if c < 0x80 {
                self.base[write] = c
                write += 1
                self.position += 1
            } else {
                guard let length = self.utf8SequenceLength(at: self.position) else { return nil }
                for i in 0..<length {
                    self.base[write + i] = self.base[self.position + i]
                }
                write += length
                self.position += length
            }
        }
        return nil
    }

    private mutating func readHex4() -> UInt32? {
        guard self.position + 4 <= self.end else { return nil }
        var value: UInt32 = 0
        for i in 0..<4 {
            guard let digit = JSONEscape.hexValue(self.base[self.position + i]) else { return nil }
            value = value << 4 | UInt32(digit)
        }
        self.position += 4
        return value
    }

    private func writeUTF8(_ scalar: UInt32, at offset: Int) -> Int {
        JSONEscape.writeUTF8(scalar, to: self.base, at: offset)
    }

    /// The length of a well-formed multi-byte UTF-8 sequence (Unicode Table 3-7) at `offset`, else nil.
    /// Rejects overlong forms, surrogates and scalars above U+10FFFF.
    private func utf8SequenceLength(at offset: Int) -> Int? {
        let b0 = self.base[offset]
        @inline(__always) func byte(_ i: Int) -> UInt8? {
            offset + i < self.end ? self.base[offset + i] : nil
        }
        @inline(__always) func isContinuation(_ b: UInt8?) -> Bool {
            guard let b else { return false }
            return b & 0xC0 == 0x80
        }
        switch b0 {
        case 0xC2...0xDF:
            return isContinuation(byte(1)) ? 2 : nil
        case 0xE0...0xEF:
            guard let b1 = byte(1) else { return nil }
            let low: UInt8 = b0 == 0xE0 ? 0xA0 : 0x80
            let high: UInt8 = b0 == 0xED ? 0x9F : 0xBF
            guard b1 >= low && b1 <= high, isContinuation(byte(2)) else { return nil }
            return 3
        case 0xF0...0xF4:
            guard let b1 = byte(1) else { return nil }
            let low: UInt8 = b0 == 0xF0 ? 0x90 : 0x80
            let high: UInt8 = b0 == 0xF4 ? 0x8F : 0xBF
            guard b1 >= low && b1 <= high, isContinuation(byte(2)), isContinuation(byte(3)) else { return nil }
            return 4
        default:
            return nil
        }
    }

    /// The outcome of reading a number where a NumericDate (RFC 7519 §2) is expected.
    enum NumericDate {
        case value(Int64)
        /// Valid JSON, but not an integral value in ``JSONScanner/numericDateRange``.
        case unacceptable
    }

    /// NumericDates tokengate accepts: 1970-01-01 through 9999-12-31.
    static let numericDateRange: ClosedRange<Int64> = 0...253_402_300_799

    /// Parses a JSON number. Integral values (`1300819380`, `1.3008e9`, `1300819380.0`) inside
    /// ``numericDateRange`` are returned exactly; other valid numbers are `.unacceptable`; invalid JSON is nil.
    mutating func parseNumericDate() -> NumericDate? {
        self.skipWhitespace()
        var negative = false
        if self.position < self.end && self.base[self.position] == UInt8(ascii: "-") {
            negative = true
            self.position += 1
        }
        var mantissa: UInt64 = 0
        var overflow = false
        @inline(__always) func isDigit(_ i: Int) -> Bool {
            i < self.end && self.base[i] >= UInt8(ascii: "0") && self.base[i] <= UInt8(ascii: "9")
        }
        @inline(__always) func accumulate(_ digit: UInt8) {
            let (m1, o1) = mantissa.multipliedReportingOverflow(by: 10)
            let (m2, o2) = m1.addingReportingOverflow(UInt64(digit))
            if o1 || o2 { overflow = true } else { mantissa = m2 }
        }
        guard isDigit(self.position) else { return nil }
        if self.base[self.position] == UInt8(ascii: "0") {
            self.position += 1
            if isDigit(self.position) { return nil }  // no leading zeros
        } else {
            while isDigit(self.position) {
                accumulate(self.base[self.position] - UInt8(ascii: "0"))
                self.position += 1
            }
        }
        var fractionDigits = 0
        if self.position < self.end && self.base[self.position] == UInt8(ascii: ".") {
            self.position += 1
            guard isDigit(self.position) else { return nil }
            while isDigit(self.position) {
                accumulate(self.base[self.position] - UInt8(ascii: "0"))
                fractionDigits += 1
                self.position += 1
            }
        }
        var exponent = 0
        if self.position < self.end && (self.base[self.position] | 0x20) == UInt8(ascii: "e") {
            self.position += 1
            var exponentNegative = false
            if self.position < self.end
                && (self.base[self.position] == UInt8(ascii: "+") || self.base[self.position] == UInt8(ascii: "-"))
            {
                exponentNegative = self.base[self.position] == UInt8(ascii: "-")
                self.position += 1
            }
            guard isDigit(self.position) else { return nil }
            while isDigit(self.position) {
                if exponent < 100_000 {
                    exponent = exponent * 10 + Int(self.base[self.position] - UInt8(ascii: "0"))
                }
                self.position += 1
            }
            if exponentNegative { exponent = -exponent }
        }
        if overflow { return .unacceptable }
        var scale = exponent - fractionDigits
        while scale < 0 {
            if mantissa % 10 != 0 { return .unacceptable }
            mantissa /= 10
            scale += 1
            if mantissa == 0 { break }
        }
        while scale > 0 && mantissa != 0 {
            let (m, o) = mantissa.multipliedReportingOverflow(by: 10)
            if o { return .unacceptable }
            mantissa = m
            scale -= 1
        }
        guard mantissa <= UInt64(Self.numericDateRange.upperBound) else { return .unacceptable }
        let value = negative ? -Int64(mantissa) : Int64(mantissa)
        guard Self.numericDateRange.contains(value) else { return .unacceptable }
        return .value(value)
    }

    /// Parses `true` or `false`; nil for anything else (including other JSON values).
    mutating func parseBool() -> Bool? {
        self.skipWhitespace()
        if self.matchLiteral("true") { return true }
        if self.matchLiteral("false") { return false }
        return nil
    }

    private mutating func matchLiteral(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard self.position + count <= self.end else { return false }
        let matched = literal.withUTF8Buffer { lit -> Bool in
            for i in 0..<count where lit[i] != self.base[self.position + i] { return false }
            return true
        }
        if matched { self.position += count }
        return matched
    }

    /// Validates and skips any JSON value. `depth` counts the enclosing containers.
    mutating func skipValue(depth: Int) -> Bool {
        guard let next = self.peek() else { return false }
        switch next {
        case UInt8(ascii: "\""):
            return self.parseString() != nil
        case UInt8(ascii: "{"):
            guard depth < Self.maxDepth else { return false }
            self.position += 1
            var first = true
            while true {
                switch self.nextMember(first: &first) {
                case .member:
                    guard self.skipValue(depth: depth + 1) else { return false }
                case .end:
                    return true
                case .error:
                    return false
                }
            }
        case UInt8(ascii: "["):
            guard depth < Self.maxDepth else { return false }
            self.position += 1
            if self.consume(UInt8(ascii: "]")) { return true }
            while true {
                guard self.skipValue(depth: depth + 1) else { return false }
                if self.consume(UInt8(ascii: "]")) { return true }
                guard self.consume(UInt8(ascii: ",")) else { return false }
            }
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            return self.parseBool() != nil
        case UInt8(ascii: "n"):
            return self.matchLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return self.parseNumericDate() != nil
        default:
            return false
        }
    }
}

//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateTokens

@Suite struct JSONTopLevelMembersTests {
    typealias Code = JSONTopLevelMembers.SyntaxError.Code

    // MARK: Removal.

    /// Bodies with a `token` member first, in the middle, last and alone, and the exact bytes that must be left.
    static let removals: [(String, String)] = [
        // Only member: the whitespace around it stays.
        (#"{ "token" : "t" }"#, #"{  }"#),
        ("{\n  \"token\": \"t\"\n}\n", "{\n  \n}\n"),
        (#"{"token":"t"}"#, "{}"),
        // First: the following comma goes with it.
        (
            #"{"token":"t", "big":12345678901234567890123, "f":1.0,"e":"\u00E9\/\ud83d\ude00 é","z":-0.0E+00}"#,
            #"{ "big":12345678901234567890123, "f":1.0,"e":"\u00E9\/\ud83d\ude00 é","z":-0.0E+00}"#
        ),
        (#"{"token" : "t" ,"a":[1.50,{"token":"nested"}]}"#, #"{"a":[1.50,{"token":"nested"}]}"#),
        // Middle: the preceding comma goes with it.
        (#"{"a" : -0.0e+00 ,"token" :"t" , "b":[1.0,{"token":"x"}]}"#, #"{"a" : -0.0e+00  , "b":[1.0,{"token":"x"}]}"#),
        (
            "{\"z\":1,\n\t\"token\":\"t\",\r\n\"a\":{\"k\":null,\"j\":[true,false]}}",
            "{\"z\":1,\r\n\"a\":{\"k\":null,\"j\":[true,false]}}"
        ),
        // Last.
        (
            #"{"z":1E400,"y":"\"\\\b\f\n\r\t\u0000\u001F\/","token":"t"}"#,
            #"{"z":1E400,"y":"\"\\\b\f\n\r\t\u0000\u001F\/"}"#
        ),
        (#"{"x":1,"tok\u0065n":"t"}"#, #"{"x":1}"#),
        (#"{"s":"{\"token\":\"not this\"}",   "token":"t"   }"#, #"{"s":"{\"token\":\"not this\"}"   }"#),
    ]

    @Test(arguments: Self.removals)
    func removingTheTokenKeepsEveryOtherByte(body: String, expected: String) throws {
        let object = try JSONTopLevelMembers(parsing: Array(body.utf8))
        let token = try #require(object.members(named: "token").first)
        #expect(object.members(named: "token").count == 1)
        #expect(object.stringValue(of: token) == "t")
        let removed = object.removing(token)
        #expect(String(decoding: removed, as: UTF8.self) == expected)
        #expect(JSONTopLevelMembers.removingMember(named: "token", from: Array(body.utf8)) == Array(expected.utf8))
        // What is left is still one valid object, with the other members (and their bytes) unchanged.
        let rest = try JSONTopLevelMembers(parsing: removed)
        #expect(rest.members.map(\.name) == object.members.map(\.name).filter { $0 != "token" })
        for (before, after) in zip(object.members.filter { $0.name != "token" }, rest.members) {
            #expect(object.bytes[before.valueRange] == rest.bytes[after.valueRange])
        }
        if !Self.hasNumberBeyondDouble(removed) {
            #expect(try JSONSerialization.jsonObject(with: Data(removed)) is [String: Any])
        }
    }

    @Test func removingIsRefusedUnlessThereIsExactlyOneMember() {
        #expect(JSONTopLevelMembers.removingMember(named: "token", from: Array(#"{"a":1}"#.utf8)) == nil)
        #expect(JSONTopLevelMembers.removingMember(named: "token", from: Array(#"{"token":1,"token":2}"#.utf8)) == nil)
        #expect(JSONTopLevelMembers.removingMember(named: "token", from: Array(#"{"token":1,}"#.utf8)) == nil)
        #expect(JSONTopLevelMembers.removingMember(named: "token", from: Array(#"{"token":1} {}"#.utf8)) == nil)
    }

    /// Every member of generated bodies, removed in turn: the rest is valid, unchanged, and Foundation reads it.
    @Test func removingAnyGeneratedMemberLeavesTheOthersIntact() throws {
        var generator = JSONGenerator(seed: 0x5EED_0001)
        var removals = 0
        for _ in 0..<150 {
            let body = Array(generator.body().utf8)
            let object = try JSONTopLevelMembers(parsing: body)
            // Keeping only one name finds the same members, with the same ranges.
            for name in Set(object.members.map(\.name)) + ["absent"] {
                let kept = try JSONTopLevelMembers(parsing: body, keepingMembersNamed: name)
                #expect(kept.members == object.members(named: name))
            }
            for (position, member) in object.members.enumerated() {
                let removed = object.removing(member)
                let rest = try JSONTopLevelMembers(parsing: removed)
                var others = object.members
                others.remove(at: position)
                #expect(rest.members.map(\.name) == others.map(\.name))
                for (before, after) in zip(others, rest.members) {
                    #expect(object.bytes[before.valueRange] == rest.bytes[after.valueRange])
                }
                #expect(removed.count == body.count - member.removalRange.count)
                #expect(try JSONSerialization.jsonObject(with: Data(removed)) is [String: Any])
                removals += 1
            }
        }
        #expect(removals > 300, "the generator made too few members to be a test")
    }

    // MARK: Names.

    @Test func namesAreComparedDecodedAndOnlyAtTheTopLevel() throws {
        let escaped = try JSONTopLevelMembers(parsing: Array(#"{"token":"a","tok\u0065n":"b"}"#.utf8))
        #expect(escaped.members(named: "token").compactMap { escaped.stringValue(of: $0) } == ["a", "b"])

        let nested = try JSONTopLevelMembers(parsing: Array(#"{"a":{"token":"x"},"b":["token",{"token":1}]}"#.utf8))
        #expect(nested.members(named: "token").isEmpty)
        #expect(nested.members.map(\.name) == ["a", "b"])
        #expect(nested.members.map(\.valueIsString) == [false, false])

        let one = try JSONTopLevelMembers(
            parsing: Array(#"{"token":"x","a":{"token":"y"},"s":"\"token\":\"z\""}"#.utf8)
        )
        let token = try #require(one.members(named: "token").first)
        #expect(one.members(named: "token").count == 1)
        #expect(one.stringValue(of: token) == "x")

        // Canonically equivalent names are the same name to Swift dictionaries, so to the gateway too.
        let cafe = try JSONTopLevelMembers(
            parsing: Array("{\"caf\\u00e9\":\"1\",\"cafe\u{301}\":\"2\",\"café\":3}".utf8)
        )
        #expect(cafe.members(named: "café").count == 3)
        #expect(cafe.members(named: "cafe").isEmpty)
        #expect(try JSONTopLevelMembers(parsing: cafe.bytes, keepingMembersNamed: "caf\u{E9}").members.count == 3)
        // U+212A KELVIN SIGN is canonically `K`: the ASCII shortcut must not miss it.
        let kelvin = Array(#"{"\u212A":"1","K":"2","k":"3"}"#.utf8)
        let kept = try JSONTopLevelMembers(parsing: kelvin, keepingMembersNamed: "K")
        #expect(kept.members.map { kept.stringValue(of: $0) } == ["1", "2"])
        #expect(try JSONTopLevelMembers(parsing: kelvin).members(named: "K").count == 2)

        let decoded = try JSONTopLevelMembers(parsing: Array(#"{"\ud83d\ude00\n\"":"\u00e9\/\\"}"#.utf8))
        let member = try #require(decoded.members.first)
        #expect(member.name == "😀\n\"")
        #expect(decoded.stringValue(of: member) == "é/\\")
        #expect(decoded.members(named: "😀\n\"") == [member])
        let number = try JSONTopLevelMembers(parsing: Array(#"{"n":1}"#.utf8))
        #expect(number.stringValue(of: try #require(number.members.first)) == nil)
    }

    // MARK: Strictness, and agreement with Foundation.

    /// Hand-written bodies and what the scanner must make of them: `nil` to accept, or the error code.
    /// The comments say where Foundation's `JSONSerialization` (the previous parser) answers differently.
    static let handWritten: [(String, [UInt8], Code?)] = [
        ("empty object", Array("{}".utf8), nil),
        ("whitespace around", Array(" \t\r\n{ }\n".utf8), nil),
        ("every value kind", Array(#"{"s":"x","n":-12.5e-3,"t":true,"f":false,"z":null,"a":[],"o":{}}"#.utf8), nil),
        ("numbers", Array(#"{"a":[0,-0,1,-1,0.5,1e5,1E+5,1e-5,-0.0e0,123456789012345678901234567890]}"#.utf8), nil),
        ("1e-400 (rounds to zero)", Array(#"{"a":1e-400}"#.utf8), nil),
        ("all escapes", Array(#"{"a":"\"\\\/\b\f\n\r\t\u0000\u001f\u00E9\ud83d\ude00"}"#.utf8), nil),
        ("raw UTF-8 up to U+10FFFF", Array("{\"a\":\"é€😀\u{10FFFF}\u{7F}\"}".utf8), nil),
        ("duplicate names", Array(#"{"a":1,"a":2}"#.utf8), nil),
        ("NUL in a name", Array(#"{"\u0000":"x"}"#.utf8), nil),
        // Accepted here, refused by Foundation: valid RFC 8259 numbers beyond Double's range.
        ("1e400", Array(#"{"a":1e400}"#.utf8), nil),
        ("400 digits", Array(("{\"a\":" + String(repeating: "9", count: 400) + "}").utf8), nil),

        ("not an object: array", Array("[1]".utf8), .notAnObject),
        ("not an object: string", Array(#""x""#.utf8), .notAnObject),
        ("not an object: number", Array("1".utf8), .notAnObject),
        ("empty body", [], .unexpectedEnd),
        ("whitespace only", Array("  ".utf8), .unexpectedEnd),
        ("unclosed", Array(#"{"a":1"#.utf8), .unexpectedEnd),
        ("unclosed string", Array(#"{"a":"x}"#.utf8), .unexpectedEnd),
        // Stricter than Foundation, which accepts trailing commas.
        ("trailing comma in object", Array(#"{"a":1,}"#.utf8), .unexpectedByte),
        ("trailing comma in array", Array(#"{"a":[1,]}"#.utf8), .unexpectedByte),
        ("trailing comma, nested object", Array(#"{"a":{"b":1,}}"#.utf8), .unexpectedByte),
        ("leading comma", Array(#"{,"a":1}"#.utf8), .unexpectedByte),
        ("double comma", Array(#"{"a":1,,"b":2}"#.utf8), .unexpectedByte),
        ("missing colon", Array(#"{"a" 1}"#.utf8), .unexpectedByte),
        ("missing comma", Array(#"{"a":1 "b":2}"#.utf8), .unexpectedByte),
        ("unquoted name", Array("{a:1}".utf8), .unexpectedByte),
        ("single quotes", Array("{'a':1}".utf8), .unexpectedByte),
        ("comment", Array(#"{"a":1 /* c */}"#.utf8), .unexpectedByte),
        ("leading zero", Array(#"{"a":01}"#.utf8), .unexpectedByte),
        ("negative leading zero", Array(#"{"a":-01}"#.utf8), .unexpectedByte),
        ("plus sign", Array(#"{"a":+1}"#.utf8), .unexpectedByte),
        ("leading dot", Array(#"{"a":.5}"#.utf8), .unexpectedByte),
        ("trailing dot", Array(#"{"a":1.}"#.utf8), .invalidNumber),
        ("empty exponent", Array(#"{"a":1e}"#.utf8), .invalidNumber),
        ("minus alone", Array(#"{"a":-}"#.utf8), .invalidNumber),
        ("hex", Array(#"{"a":0x10}"#.utf8), .unexpectedByte),
        ("NaN", Array(#"{"a":NaN}"#.utf8), .unexpectedByte),
        ("TRUE", Array(#"{"a":TRUE}"#.utf8), .unexpectedByte),
        ("tru}", Array(#"{"a":tru}"#.utf8), .invalidLiteral),
        ("tru at the end", Array(#"{"a":tru"#.utf8), .unexpectedEnd),
        ("trux", Array(#"{"a":trux}"#.utf8), .invalidLiteral),
        ("nulll", Array(#"{"a":nulll}"#.utf8), .unexpectedByte),
        ("bad escape", Array(#"{"a":"\x"}"#.utf8), .invalidEscape),
        ("bad \\u", Array(#"{"a":"\u12g4"}"#.utf8), .invalidEscape),
        ("short \\u", Array(#"{"a":"\u12"}"#.utf8), .invalidEscape),
        ("lone high surrogate", Array(#"{"a":"\ud800"}"#.utf8), .unpairedSurrogate),
        ("lone low surrogate", Array(#"{"a":"\udc00"}"#.utf8), .unpairedSurrogate),
        ("high surrogate then text", Array(#"{"a":"\ud800xxxxxx"}"#.utf8), .unpairedSurrogate),
        ("two high surrogates", Array(#"{"a":"\ud800\ud800"}"#.utf8), .unpairedSurrogate),
        ("lone surrogate in a name", Array(#"{"\udfff":1}"#.utf8), .unpairedSurrogate),
        ("raw tab in a string", Array("{\"a\":\"x\ty\"}".utf8), .controlCharacter),
        ("raw NUL in a string", [UInt8](#"{"a":"x"#.utf8) + [0] + Array(#""}"#.utf8), .controlCharacter),
        ("0xFF", [UInt8](#"{"a":"x"#.utf8) + [0xFF] + Array(#""}"#.utf8), .invalidUTF8),
        ("overlong slash", [UInt8](#"{"a":"x"#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8), .invalidUTF8),
        ("overlong 3-byte", [UInt8](#"{"a":"x"#.utf8) + [0xE0, 0x80, 0xAF] + Array(#""}"#.utf8), .invalidUTF8),
        ("UTF-8 surrogate", [UInt8](#"{"a":"x"#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8), .invalidUTF8),
        ("above U+10FFFF", [UInt8](#"{"a":"x"#.utf8) + [0xF4, 0x90, 0x80, 0x80] + Array(#""}"#.utf8), .invalidUTF8),
        ("truncated sequence", [UInt8](#"{"a":"x"#.utf8) + [0xE2, 0x82] + Array(#""}"#.utf8), .invalidUTF8),
        ("lone continuation byte", [UInt8](#"{"a":"x"#.utf8) + [0x80] + Array(#""}"#.utf8), .invalidUTF8),
        ("non-ASCII outside a string", Array("{\"a\":1\u{A0}}".utf8), .unexpectedByte),
        ("form feed as whitespace", Array("{\u{0C}\"a\":1}".utf8), .unexpectedByte),
        ("garbage after", Array(#"{"a":1}x"#.utf8), .trailingBytes),
        ("second object after", Array(#"{"a":1}{}"#.utf8), .trailingBytes),
        ("NUL after", Array(#"{"a":1}"#.utf8) + [0], .trailingBytes),
        // Stricter than Foundation, which detects and accepts a BOM and UTF-16/32 (RFC 8259 §8.1: UTF-8, no BOM).
        ("UTF-8 BOM", [0xEF, 0xBB, 0xBF] + Array(#"{"a":1}"#.utf8), .notAnObject),
        ("UTF-16LE", Array(#"{"a":1}"#.data(using: .utf16LittleEndian)!), .unexpectedByte),
        ("UTF-16 with BOM", Array(#"{"a":1}"#.data(using: .utf16)!), .notAnObject),
        // Nesting: 512 levels (the top-level object included) is Foundation's limit too.
        ("depth 512", Self.nested(512), nil),
        ("depth 513", Self.nested(513), .tooDeep),
        ("depth 512 in objects", Self.nestedObjects(512), nil),
        ("depth 513 in objects", Self.nestedObjects(513), .tooDeep),
    ]

    /// `{"a":[[…]]}` with `depth` containers in all.
    static func nested(_ depth: Int) -> [UInt8] {
        let inner = String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1)
        return Array(("{\"a\":" + inner + "}").utf8)
    }

    /// `{"a":{"a":…{}}}` with `depth` objects in all.
    static func nestedObjects(_ depth: Int) -> [UInt8] {
        Array((String(repeating: "{\"a\":", count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)).utf8)
    }

    @Test func handWrittenBodiesAreAcceptedOrRefusedAsRFC8259Says() {
        for (name, bytes, expected) in Self.handWritten {
            let code: Code?
            do throws(JSONTopLevelMembers.SyntaxError) {
                _ = try JSONTopLevelMembers(parsing: bytes)
                code = nil
            } catch {
                code = error.code
                #expect(error.offset >= 0 && error.offset <= bytes.count, "\(name)")
            }
            #expect(code == expected, "\(name)")
        }
    }

    /// The scanner against Foundation's `JSONSerialization` over hand-written, generated and mutated bodies:
    /// wherever the scanner accepts, Foundation must accept too and read the same top-level string members.
    /// The scanner may refuse more (see ``handWritten``); the one place it accepts more is numbers beyond
    /// Double's range, which Foundation cannot represent and the gateway never needs to.
    @Test func agreesWithFoundationWhereverItAccepts() throws {
        var inputs = Self.handWritten.map(\.1)
        var generator = JSONGenerator(seed: 0xD1FF_E7E5)
        for _ in 0..<250 {
            let valid = Array(generator.body().utf8)
            #expect((try? JSONTopLevelMembers(parsing: valid)) != nil, "\(String(decoding: valid, as: UTF8.self))")
            inputs.append(valid)
            inputs.append(generator.mutate(valid))
            inputs.append(generator.mutate(valid))
        }
        var accepted = 0
        var refused = 0
        for input in inputs {
            let text = String(decoding: input, as: UTF8.self)
            guard let scanned = try? JSONTopLevelMembers(parsing: input) else {
                refused += 1
                continue
            }
            accepted += 1
            guard let parsed = try? JSONSerialization.jsonObject(with: Data(input)) else {
                #expect(Self.hasNumberBeyondDouble(input), "accepted, but Foundation refuses: \(text)")
                continue
            }
            let object = try #require(parsed as? [String: Any], "\(text)")
            #expect(Set(object.keys) == Set(scanned.members.map(\.name)), "\(text)")
            for member in scanned.members {
                // Foundation keeps one of duplicate names (which is unspecified): it must be one of ours.
                let candidates = scanned.members(named: member.name).map { scanned.stringValue(of: $0) }
                let theirs = (object[member.name] as? String).map { Array($0.unicodeScalars) }
                #expect(
                    candidates.contains { $0.map { Array($0.unicodeScalars) } == theirs },
                    "\(member.name) in \(text)"
                )
            }
        }
        #expect(accepted > 250 && refused > 250, "the inputs did not exercise both sides: \(accepted) / \(refused)")
    }

    /// A number token outside strings whose value is not a finite Double.
    static func hasNumberBeyondDouble(_ body: [UInt8]) -> Bool {
        var inString = false
        var escaped = false
        var number = ""
        for byte in body + [0x20] {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            if "0123456789+-.eE".utf8.contains(byte) {
                number.append(Character(Unicode.Scalar(byte)))
                continue
            }
            if !number.isEmpty, let value = Double(number), !value.isFinite { return true }
            number = ""
            if byte == UInt8(ascii: "\"") { inString = true }
        }
        return false
    }

    // MARK: Hostile sizes.

    @Test func aDepthBombIsRefusedQuickly() {
        let clock = ContinuousClock()
        let brackets = [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
        let bombs: [(String, [UInt8], Code)] = [
            ("arrays in a member", Array(#"{"a":"#.utf8) + brackets, .tooDeep),
            ("objects", Array(String(repeating: "{\"a\":", count: 100_000).utf8), .tooDeep),
            ("closed arrays", Self.nested(100_000), .tooDeep),
            ("top-level array", brackets, .notAnObject),
        ]
        for (name, bytes, expected) in bombs {
            let elapsed = clock.measure {
                #expect(throws: JSONTopLevelMembers.SyntaxError(code: expected, offset: Self.bombOffset(name))) {
                    try JSONTopLevelMembers(parsing: bytes)
                }
            }
            #expect(elapsed < .seconds(1), "\(name) took \(elapsed)")
        }
    }

    /// Where each bomb is refused: at the first container past the limit (container `maximumDepth + 1`).
    private static func bombOffset(_ name: String) -> Int {
        switch name {
        // Container k (the top-level object is 1) opens at 5 * (k - 1): each level is `{"a":`.
        case "objects": 5 * JSONTopLevelMembers.maximumDepth
        case "top-level array": 0
        // `{"a":` then container k (from 2 on) opens at 5 + (k - 2).
        default: 5 + JSONTopLevelMembers.maximumDepth - 1
        }
    }

    @Test func aOneMebibyteStringIsReadInBoundedTime() throws {
        let clock = ContinuousClock()
        let plain = String(repeating: "a", count: 1 << 20)
        let escaped = String(repeating: #"\u00e9\n"#, count: (1 << 20) / 8)
        for (value, decodedCount) in [(plain, 1 << 20), (escaped, (1 << 20) / 8 * 2)] {
            let body = Array(#"{"x":1,"token":""#.utf8) + Array(value.utf8) + Array(#"","y":[1]}"#.utf8)
            var result: (String?, [UInt8]?) = (nil, nil)
            let elapsed = try clock.measure {
                let object = try JSONTopLevelMembers(parsing: body)
                let token = try #require(object.members(named: "token").first)
                result = (object.stringValue(of: token), object.removing(token))
            }
            #expect(result.0?.count == decodedCount)
            #expect(result.1 == Array(#"{"x":1,"y":[1]}"#.utf8))
            #expect(elapsed < .seconds(5), "took \(elapsed)")
        }
        // Many small members: one pass, no per-value allocation.
        let many = "{" + (0..<100_000).map { "\"m\($0)\":\"v\"" }.joined(separator: ",") + "}"
        let elapsed = try clock.measure {
            let object = try JSONTopLevelMembers(parsing: Array(many.utf8))
            #expect(object.members.count == 100_000)
            let one = try JSONTopLevelMembers(parsing: Array(many.utf8), keepingMembersNamed: "m99999")
            #expect(one.members.map(\.name) == ["m99999"])
        }
        #expect(elapsed < .seconds(5), "took \(elapsed)")
    }
}

// MARK: Generated bodies.

/// Random but reproducible JSON object bodies (valid by construction), and broken variants of them.
struct JSONGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        self.state = seed
    }

    /// SplitMix64: small, and the same sequence on every run.
    private mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private mutating func below(_ bound: Int) -> Int {
        Int(self.next() % UInt64(bound))
    }

    private mutating func pick<T>(_ choices: [T]) -> T {
        choices[self.below(choices.count)]
    }

    /// A top-level object of up to 7 members, sometimes with a token (or two, or one spelled with an escape).
    mutating func body() -> String {
        self.object(depth: 1, names: ["token", "tok\\u0065n", "a", "b", "n", "\\u00e9", "x y", "token2", "\\/"])
    }

    private mutating func object(depth: Int, names: [String]) -> String {
        let count = self.below(depth == 1 ? 8 : 4)
        var members: [String] = []
        for _ in 0..<count {
            let name = self.below(3) == 0 ? self.string() : "\"" + self.pick(names) + "\""
            let value = self.value(depth: depth + 1)
            members.append(self.space() + name + self.space() + ":" + self.space() + value + self.space())
        }
        return "{" + (members.isEmpty ? self.space() : members.joined(separator: ",")) + "}"
    }

    private mutating func value(depth: Int) -> String {
        switch self.below(depth < 5 ? 9 : 6) {
        case 0, 1: return self.string()
        case 2, 3: return self.number()
        case 4: return self.pick(["true", "false", "null"])
        case 5: return self.string()
        case 6, 7:
            let count = self.below(4)
            let elements = (0..<count).map { _ in self.space() + self.value(depth: depth + 1) + self.space() }
            return "[" + (elements.isEmpty ? self.space() : elements.joined(separator: ",")) + "]"
        default:
            return self.object(depth: depth, names: ["token", "a", "k"])
        }
    }

    private mutating func string() -> String {
        let pieces = [
            "a", "Z", "0", " ", "token", "\\n", "\\\"", "\\\\", "\\/", "\\b\\f\\r\\t", "\\u00e9", "\\u00E9",
            "\\ud83d\\ude00", "\\u0000", "\\u001f", "\\u2028", "é", "€", "😀", "{", "}", ",", ":", "[", "]", "'",
            "\u{7F}",
        ]
        return "\"" + (0..<self.below(6)).map { _ in self.pick(pieces) }.joined() + "\""
    }

    /// Numbers Double can hold (exponents to 99, at most 20 digits), so Foundation accepts them all.
    private mutating func number() -> String {
        var text = self.below(3) == 0 ? "-" : ""
        if self.below(4) == 0 {
            text += "0"
        } else {
            text += String(1 + self.below(9)) + (0..<self.below(20)).map { _ in String(self.below(10)) }.joined()
        }
        if self.below(3) == 0 { text += "." + (0...self.below(4)).map { _ in String(self.below(10)) }.joined() }
        if self.below(4) == 0 { text += self.pick(["e", "E", "e+", "e-", "E-"]) + String(self.below(99)) }
        return text
    }

    private mutating func space() -> String {
        self.pick(["", "", "", " ", "\n", "\t ", "\r\n  "])
    }

    /// `body` with one to three bytes deleted, inserted or replaced, or cut short. Digits are never added, so a
    /// mutation cannot push a number past Double's range.
    mutating func mutate(_ body: [UInt8]) -> [UInt8] {
        let interesting: [UInt8] =
            Array(",}]{[\":\\ \u{1}\nux'/*nt-+".utf8) + [0x7F, 0xFF, 0xC3, 0xED, 0x80, 0xEF, 0x00]
        var bytes = body
        for _ in 0...self.below(3) {
            guard !bytes.isEmpty else { break }
            let at = self.below(bytes.count)
            switch self.below(4) {
            case 0: bytes.remove(at: at)
            case 1: bytes.insert(self.pick(interesting), at: at)
            case 2: bytes[at] = self.pick(interesting)
            default: bytes.removeSubrange(at...)
            }
        }
        return bytes
    }
}

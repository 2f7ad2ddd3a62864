//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Testing

@testable import TokengateTokens

@Suite struct ScannerTests {
    @Test func base64RoundTripsEveryLength() {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let encoded = Base64URL.encode(bytes)
            #expect(!encoded.contains("=") && !encoded.contains("+") && !encoded.contains("/"))
            #expect(Base64URL.decode(encoded) == bytes, "length \(length)")
        }
        #expect(Base64URL.decode("A") == nil)
        #expect(Base64URL.decode("AB") == nil, "unused bits set")
        #expect(Base64URL.decode("AA") == [0])
        #expect(Base64URL.decode("AAB") == nil)
        #expect(Base64URL.decode("AAE") == [0, 1])
        #expect(Base64URL.decode("AA==") == nil)
        #expect(Base64URL.decode("A A=") == nil)
    }

    func string(_ json: String) -> String? {
        var bytes = Array(json.utf8)
        return bytes.withUnsafeMutableBufferPointer { buffer -> String? in
            var scanner = JSONScanner(base: buffer.baseAddress!, count: buffer.count)
            guard let span = scanner.parseString(), scanner.atEnd() else { return nil }
            return String(
                decoding: UnsafeBufferPointer(start: buffer.baseAddress! + span.start, count: span.count),
                as: UTF8.self
            )
        }
    }

    @Test func stringsUnescapeInPlace() {
        #expect(self.string(#""plain""#) == "plain")
        #expect(self.string(#""a\"b\\c\/d\b\f\n\r\t""#) == "a\"b\\c/d\u{8}\u{C}\n\r\t")
        #expect(self.string(#""\u0041\u00e9\u20AC\ud83d\ude00""#) == "Aé€😀")
        #expect(self.string(#""\ude00""#) == nil)
        #expect(self.string(#""\ud83d""#) == nil)
        #expect(self.string(#""\ud83d\u0041""#) == nil)
        #expect(self.string(#""\x""#) == nil)
        #expect(self.string(#""\u12""#) == nil)
        #expect(self.string("\"tab\there\"") == nil)
        #expect(self.string(#""unterminated"#) == nil)
    }

    func skip(_ json: String) -> Bool {
        var bytes = Array(json.utf8)
        return bytes.withUnsafeMutableBufferPointer { buffer in
            var scanner = JSONScanner(base: buffer.baseAddress!, count: buffer.count)
            return scanner.skipValue(depth: 0) && scanner.atEnd()
        }
    }

    @Test func valuesAreValidated() {
        for good in ["{}", "[]", #"{"a":[1,2.5e-3,-0,true,false,null,{"b":"c"}]}"#, " [ 1 , 2 ] ", "0", "-1.0E+2"] {
            #expect(self.skip(good), "\(good)")
        }
        for bad in [
            "{", "[1,]", #"{"a":1,}"#, #"{"a" 1}"#, "[1 2]", "tru", "nul", "01", "1.", ".1", "-", "1e", "+1",
            #"{a:1}"#, "[\"\u{1}\"]", String(repeating: "[", count: 17) + String(repeating: "]", count: 17),
        ] {
            #expect(!self.skip(bad), "\(bad)")
        }
        #expect(self.skip(String(repeating: "[", count: 16) + String(repeating: "]", count: 16)))
    }

    /// The token scanner and the reader of the cutoffs file and admin bodies (``JSONTopLevelMembers``) share one
    /// escape table (``JSONEscape``): for every byte after a backslash, and every byte in a `\u` escape, they
    /// take or refuse the same strings and read the same text.
    @Test func bothJSONReadersReadEveryEscapeAlike() throws {
        func members(_ json: String) -> String?? {
            guard let object = try? JSONTopLevelMembers(parsing: Array("{\"k\":\(json)}".utf8)) else { return .none }
            return .some(object.members.first.flatMap { object.stringValue(of: $0) })
        }
        var taken = 0
        for byte in UInt8(0x20)...UInt8(0x7E) where byte != UInt8(ascii: "u") {
            for json in ["\"a\\\(Character(Unicode.Scalar(byte)))b\"", "\"\\u00\(Character(Unicode.Scalar(byte)))1\""] {
                let scanned = self.string(json)
                #expect(members(json) == (scanned.map { .some($0) } ?? .none), "\(json)")
                if scanned != nil { taken += 1 }
            }
        }
        #expect(taken == 8 + 22, "the eight one-character escapes, and the 22 hex digits")
    }
}
